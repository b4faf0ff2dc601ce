package persistence

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/storefault"
)

var testKey = Key{GrainType: "counter", GrainKey: "k1", Name: "state"}

// storeFactories lists every Store in this package that must keep the Store
// contract, so each semantic test runs against all of them.
var storeFactories = map[string]func() Store{
	"memory": func() Store { return NewMemoryStore() },
	"faulty": func() Store { return storefault.New[Key](NewMemoryStore()) },
}

func forEachStore(t *testing.T, test func(t *testing.T, s Store)) {
	for name, newStore := range storeFactories {
		t.Run(name, func(t *testing.T) { test(t, newStore()) })
	}
}

func requireConflict(t *testing.T, err error, key Key, expected, actual string) {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrConflict)
	var conflict *ConflictError
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, key, conflict.Key)
	assert.Equal(t, expected, conflict.Expected)
	assert.Equal(t, actual, conflict.Actual)
}

func TestStoreReadMissing(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		data, etag, err := s.Read(context.Background(), testKey)
		assert.ErrorIs(t, err, ErrNotFound)
		assert.Nil(t, data)
		assert.Empty(t, etag)
	})
}

func TestStoreCreateThenUpdate(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		etag1, err := s.Write(ctx, testKey, []byte("one"), "")
		require.NoError(t, err)
		require.NotEmpty(t, etag1)

		data, etag, err := s.Read(ctx, testKey)
		require.NoError(t, err)
		assert.Equal(t, []byte("one"), data)
		assert.Equal(t, etag1, etag)

		etag2, err := s.Write(ctx, testKey, []byte("two"), etag1)
		require.NoError(t, err)
		assert.NotEqual(t, etag1, etag2)

		data, etag, err = s.Read(ctx, testKey)
		require.NoError(t, err)
		assert.Equal(t, []byte("two"), data)
		assert.Equal(t, etag2, etag)
	})
}

func TestStoreWriteConflicts(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		_, err := s.Write(ctx, testKey, []byte("x"), "42")
		requireConflict(t, err, testKey, "42", "") // update of a missing state

		etag1, err := s.Write(ctx, testKey, []byte("one"), "")
		require.NoError(t, err)
		_, err = s.Write(ctx, testKey, []byte("again"), "")
		requireConflict(t, err, testKey, "", etag1) // create of an existing state

		etag2, err := s.Write(ctx, testKey, []byte("two"), etag1)
		require.NoError(t, err)
		_, err = s.Write(ctx, testKey, []byte("stale"), etag1)
		requireConflict(t, err, testKey, etag1, etag2) // stale etag

		data, etag, err := s.Read(ctx, testKey)
		require.NoError(t, err)
		assert.Equal(t, []byte("two"), data, "a refused write must not change the state")
		assert.Equal(t, etag2, etag)
	})
}

func TestStoreDelete(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		require.NoError(t, s.Delete(ctx, testKey, ""), "deleting nothing with etag \"\" is a no-op")
		requireConflict(t, s.Delete(ctx, testKey, "7"), testKey, "7", "")

		etag1, err := s.Write(ctx, testKey, []byte("one"), "")
		require.NoError(t, err)
		requireConflict(t, s.Delete(ctx, testKey, ""), testKey, "", etag1)
		requireConflict(t, s.Delete(ctx, testKey, etag1+"x"), testKey, etag1+"x", etag1)

		require.NoError(t, s.Delete(ctx, testKey, etag1))
		_, _, err = s.Read(ctx, testKey)
		assert.ErrorIs(t, err, ErrNotFound)

		// Re-creating after a delete must not bring the old etag back, or a
		// holder of the pre-delete etag could overwrite the new state.
		etag2, err := s.Write(ctx, testKey, []byte("again"), "")
		require.NoError(t, err)
		assert.NotEqual(t, etag1, etag2)
		_, err = s.Write(ctx, testKey, []byte("stale"), etag1)
		requireConflict(t, err, testKey, etag1, etag2)
	})
}

func TestStoreKeysAreIndependent(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		keys := []Key{
			testKey,
			{GrainType: "counter", GrainKey: "k1", Name: "other"},
			{GrainType: "counter", GrainKey: "k2", Name: "state"},
			{GrainType: "timer", GrainKey: "k1", Name: "state"},
		}
		for i, k := range keys {
			_, err := s.Write(ctx, k, []byte(strconv.Itoa(i)), "")
			require.NoError(t, err, k.String())
		}
		for i, k := range keys {
			data, _, err := s.Read(ctx, k)
			require.NoError(t, err)
			assert.Equal(t, strconv.Itoa(i), string(data), k.String())
		}
	})
}

func TestStoreCopiesData(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		in := []byte("abc")
		etag, err := s.Write(ctx, testKey, in, "")
		require.NoError(t, err)
		in[0] = 'X' // the writer keeps using its buffer

		out, _, err := s.Read(ctx, testKey)
		require.NoError(t, err)
		assert.Equal(t, []byte("abc"), out)
		out[1] = 'Y' // a reader scribbles on what it got

		again, gotETag, err := s.Read(ctx, testKey)
		require.NoError(t, err)
		assert.Equal(t, []byte("abc"), again)
		assert.Equal(t, etag, gotETag)
	})
}

func TestStoreHonoursCancelledContext(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, err := s.Read(ctx, testKey)
		assert.ErrorIs(t, err, context.Canceled)
		_, err = s.Write(ctx, testKey, []byte("x"), "")
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, s.Delete(ctx, testKey, ""), context.Canceled)
	})
}

func TestMemoryStoreETagsIncrease(t *testing.T) {
	s := NewMemoryStore()
	ctx := context.Background()
	other := Key{GrainType: "counter", GrainKey: "k1", Name: "other"}
	etags := map[Key]string{}
	var last uint64
	// Alternate keys: the version counter is store-wide, not per key.
	for i := range 6 {
		k := testKey
		if i%2 == 1 {
			k = other
		}
		etag, err := s.Write(ctx, k, nil, etags[k])
		require.NoError(t, err)
		etags[k] = etag
		n, err := strconv.ParseUint(etag, 10, 64)
		require.NoError(t, err)
		assert.Greater(t, n, last)
		last = n
	}
	assert.Equal(t, 2, s.Len())
}

func TestMemoryStoreEmptyDataIsFound(t *testing.T) {
	s := NewMemoryStore()
	ctx := context.Background()
	_, err := s.Write(ctx, testKey, nil, "")
	require.NoError(t, err)
	data, etag, err := s.Read(ctx, testKey)
	require.NoError(t, err)
	assert.NotNil(t, data, "stored empty state must read back as found")
	assert.Empty(t, data)
	assert.NotEmpty(t, etag)
}

// TestMemoryStoreConcurrentWriters checks that ETags serialize racing
// writers: of all writers holding the same ETag exactly one wins.
func TestMemoryStoreConcurrentWriters(t *testing.T) {
	s := NewMemoryStore()
	ctx := context.Background()
	etag, err := s.Write(ctx, testKey, []byte("0"), "")
	require.NoError(t, err)

	const writers = 16
	var wg sync.WaitGroup
	results := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			_, results[i] = s.Write(ctx, testKey, []byte(strconv.Itoa(i)), etag)
		})
	}
	wg.Wait()
	wins := 0
	for _, err := range results {
		if err == nil {
			wins++
			continue
		}
		assert.ErrorIs(t, err, ErrConflict)
	}
	assert.Equal(t, 1, wins)
}

func TestConflictErrorMessage(t *testing.T) {
	err := &ConflictError{Key: testKey, Expected: "1", Actual: "2"}
	assert.Equal(t, `persistence: etag conflict on counter/k1/state: expected "1", stored "2"`, err.Error())
	assert.NotErrorIs(t, err, ErrNotFound)
}
