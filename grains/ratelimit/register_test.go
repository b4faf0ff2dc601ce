package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/silo"
)

func TestRegisteringTwiceIsHarmless(t *testing.T) {
	s, err := silo.New(silo.Options{DisableGateway: true}, silo.WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, ratelimit.Register(s, ratelimit.Defaults{}))
	require.NoError(t, ratelimit.Register(s, ratelimit.Defaults{}), "the same defaults: nothing to do")
	explicit := ratelimit.Defaults{}
	explicit.EnsureDefaults()
	require.NoError(t, ratelimit.Register(s, explicit), "zero fields mean the library defaults")
	err = ratelimit.Register(s, ratelimit.Defaults{Concurrency: ratelimit.ConcurrencyOptions{PermitLimit: 3}})
	assert.ErrorIs(t, err, ratelimit.ErrRegistered, "other defaults are refused, not ignored")

	other, err := silo.New(silo.Options{DisableGateway: true}, silo.WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, ratelimit.Register(other, ratelimit.Defaults{Concurrency: ratelimit.ConcurrencyOptions{PermitLimit: 3}}), "each silo has its own")
}

func TestInvalidDefaultsAreRefused(t *testing.T) {
	s, err := silo.New(silo.Options{DisableGateway: true}, silo.WithLogger(quiet))
	require.NoError(t, err)
	err = ratelimit.Register(s, ratelimit.Defaults{
		Concurrency: ratelimit.ConcurrencyOptions{QueueLimit: -1},
		TokenBucket: ratelimit.TokenBucketOptions{ReplenishmentPeriod: time.Microsecond},
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Defaults.Concurrency")
	assert.Contains(t, err.Error(), "Defaults.TokenBucket", "every bad field is reported")
	require.NoError(t, ratelimit.Register(s, ratelimit.Defaults{}), "nothing was registered")
}

func TestLibraryDefaults(t *testing.T) {
	var d ratelimit.Defaults
	d.EnsureDefaults()
	assert.Equal(t, ratelimit.ConcurrencyOptions{PermitLimit: 10}, d.Concurrency)
	assert.Equal(t, ratelimit.FixedWindowOptions{PermitLimit: 10, Window: time.Second}, d.FixedWindow)
	assert.Equal(t, ratelimit.SlidingWindowOptions{PermitLimit: 10, Window: time.Second, SegmentsPerWindow: 2}, d.SlidingWindow)
	assert.Equal(t, ratelimit.TokenBucketOptions{TokenLimit: 10, TokensPerPeriod: 2, ReplenishmentPeriod: time.Second}, d.TokenBucket)
	require.NoError(t, d.Validate())
	d = ratelimit.Defaults{FixedWindow: ratelimit.FixedWindowOptions{QueueLimit: 5, ManualReplenishment: true}}
	d.EnsureDefaults()
	assert.Equal(t, ratelimit.FixedWindowOptions{PermitLimit: 10, QueueLimit: 5, Window: time.Second, ManualReplenishment: true}, d.FixedWindow, "set fields are kept")
}
