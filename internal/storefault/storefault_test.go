package storefault_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/storefault"
	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/persistence/storetest"
)

var (
	testKey = persistence.Key{GrainType: "counter", GrainKey: "k1", Name: "state"}

	_ persistence.Store = (*storefault.Store[persistence.Key])(nil)
)

func TestStoreFailsChosenCalls(t *testing.T) {
	inner := persistence.NewMemoryStore()
	s := storefault.New[persistence.Key](inner)
	ctx := context.Background()
	boom := errors.New("boom")

	s.FailNext(storefault.OpWrite, 2, boom)
	for range 2 {
		_, err := s.Write(ctx, testKey, []byte("x"), "")
		require.ErrorIs(t, err, boom)
	}
	assert.Equal(t, 0, inner.Len(), "an injected failure must not reach the inner store")
	etag, err := s.Write(ctx, testKey, []byte("x"), "")
	require.NoError(t, err)
	assert.Equal(t, 3, s.Calls(storefault.OpWrite))

	s.FailNext(storefault.OpRead, 1, boom)
	_, _, err = s.Read(ctx, testKey)
	require.ErrorIs(t, err, boom)
	data, _, err := s.Read(ctx, testKey)
	require.NoError(t, err)
	assert.Equal(t, []byte("x"), data)

	s.FailNext(storefault.OpDelete, 1, boom)
	require.ErrorIs(t, s.Delete(ctx, testKey, etag), boom)
	assert.Equal(t, 1, inner.Len())

	s.FailNext(storefault.OpDelete, 3, boom)
	s.FailNext(storefault.OpDelete, 0, nil) // cancels
	require.NoError(t, s.Delete(ctx, testKey, etag))
	assert.Equal(t, 0, inner.Len())
	assert.Equal(t, 2, s.Calls(storefault.OpRead))
	assert.Equal(t, 2, s.Calls(storefault.OpDelete))
}

func TestFailNextRefusesNonsense(t *testing.T) {
	s := storefault.New[persistence.Key](persistence.NewMemoryStore())
	assert.Panics(t, func() { s.FailNext(storefault.Op(9), 1, errors.New("boom")) })
	assert.Panics(t, func() { s.FailNext(storefault.OpRead, 1, nil) })
}

func TestOpString(t *testing.T) {
	assert.Equal(t, "Read", storefault.OpRead.String())
	assert.Equal(t, "Write", storefault.OpWrite.String())
	assert.Equal(t, "Delete", storefault.OpDelete.String())
	assert.Equal(t, "Op(9)", storefault.Op(9).String())
}

// TestStoreWithoutFaultsConforms checks that the wrapper, with no failure
// pending, keeps the Store contract of what it wraps.
func TestStoreWithoutFaultsConforms(t *testing.T) {
	storetest.Run(t, func(*testing.T) persistence.Store {
		return storefault.New[persistence.Key](persistence.NewMemoryStore())
	})
}
