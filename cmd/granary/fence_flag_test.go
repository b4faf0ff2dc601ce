package main

import (
	"flag"
	"os"
	"path/filepath"
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

// clusterArgs are the flags of a silo of a cluster, with a secret.
func clusterArgs(t *testing.T) []string {
	t.Helper()
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("a secret of the cluster, long enough"), 0o600))
	return []string{"-silo-address", "127.0.0.1:0", "-gateway", "127.0.0.1:0", "-secret-file", secret}
}

func TestFenceMinSilosSetsTheFenceAndZeroTurnsItOff(t *testing.T) {
	cluster := clusterArgs(t)
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

func TestTheDeathFenceIsOnUnlessTurnedOffAndApartFromTheMinorityFence(t *testing.T) {
	cluster := clusterArgs(t)
	for _, tc := range []struct {
		args []string
		off  bool
	}{
		{args: nil},
		{args: []string{"-fence-min-silos", "0"}},
		{args: []string{"-death-fence=false"}, off: true},
	} {
		f, err := siloOptionsOf(t, append(cluster, tc.args...)...)
		require.NoError(t, err, "%v", tc.args)
		o, err := f.options()
		require.NoError(t, err)
		assert.Equal(t, tc.off, o.Cluster.Fence.Death.Disabled, "%v", tc.args)
		if !tc.off {
			assert.Positive(t, o.Cluster.Fence.Death.Stall, "derived from the timings and the grace")
		}
	}
}
