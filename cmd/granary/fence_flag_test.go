package main

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// siloOptionsOf parses args as the silo's flags.
func siloOptionsOf(t *testing.T, args ...string) (*siloFlags, error) {
	t.Helper()
	s := newSettings(flag.NewFlagSet("t", flag.ContinueOnError))
	f := defineSiloFlags(s)
	require.NoError(t, s.fs.Parse(args))
	_, err := f.options()
	return f, err
}

func TestFenceMinSilosSetsTheFenceAndZeroTurnsItOff(t *testing.T) {
	cluster := []string{"-silo-address", "127.0.0.1:0", "-gateway", "127.0.0.1:0"}
	for _, tc := range []struct {
		args     []string
		disabled bool
		min      int
	}{
		{args: nil, min: 3},
		{args: []string{"-fence-min-silos", "5"}, min: 5},
		{args: []string{"-fence-min-silos", "0"}, disabled: true},
	} {
		f, err := siloOptionsOf(t, append(cluster, tc.args...)...)
		require.NoError(t, err, "%v", tc.args)
		o, err := f.options()
		require.NoError(t, err)
		assert.Equal(t, tc.disabled, o.Cluster.Fence.Disabled, "%v", tc.args)
		if !tc.disabled {
			assert.Equal(t, tc.min, o.Cluster.Fence.MinSilos, "%v", tc.args)
			assert.Positive(t, o.Cluster.Fence.Stability, "derived from the timings")
		}
	}
	_, err := siloOptionsOf(t, append(cluster, "-fence-min-silos", "-1")...)
	assert.ErrorContains(t, err, "-fence-min-silos must not be negative")
}
