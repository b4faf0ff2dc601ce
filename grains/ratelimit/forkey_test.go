package ratelimit_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit"
)

func TestForKeyIsAHolderOfAnotherKeyWithTheSameOptions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	bound := ratelimit.ConcurrencyOptions{PermitLimit: 1}
	template := ratelimit.Concurrency(e.silo.Caller(), "template", bound)
	h := template.ForKey("for-key")

	assert.Equal(t, "for-key", h.GrainID().Key)
	assert.Equal(t, template.GrainID().Type, h.GrainID().Type)
	got, ok := h.Bound()
	require.True(t, ok)
	assert.Equal(t, bound, got)

	lease, err := h.Acquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, lease.Acquired())
	assert.Equal(t, "for-key", lease.Owner().Key)
	rejected, err := h.Acquire(ctx, 1)
	require.NoError(t, err)
	assert.False(t, rejected.Acquired(), "the bound limit of one permit holds")
	st, err := template.Statistics(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.TotalSuccessfulLeases, "the template's own key was never touched")

	require.NoError(t, lease.Release(ctx))
	again, err := h.Acquire(ctx, 1)
	require.NoError(t, err)
	assert.True(t, again.Acquired(), "released through the new holder's reference")
	require.NoError(t, again.Release(ctx))
}
