package main

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A -stop-timeout that is not positive is refused up front, like
// -gateway no-port, not when the process is asked to stop (the stop would
// fail at once and leave the silo half stopped).
func TestStopTimeoutMustBePositive(t *testing.T) {
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer devnull.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // stop as soon as started
	for _, d := range []string{"-1s", "0s"} {
		err = run(ctx, []string{"-gateway", "127.0.0.1:0", "-stop-timeout", d}, devnull, devnull)
		require.ErrorContains(t, err, "stop-timeout", d)
	}
}

// -h prints the usage and is not an error: main exits 0 on flag.ErrHelp.
func TestHelpPrintsUsage(t *testing.T) {
	out, err := os.CreateTemp(t.TempDir(), "usage")
	require.NoError(t, err)
	defer out.Close()
	for _, arg := range []string{"-h", "-help"} {
		err := run(context.Background(), []string{arg}, out, out)
		require.ErrorIs(t, err, flag.ErrHelp, arg)
	}
	usage, err := os.ReadFile(out.Name())
	require.NoError(t, err)
	require.Contains(t, string(usage), "usage: granary [flags]")
	require.Contains(t, string(usage), "-gateway")
}

// The built binary exits 0 on -h, as a newcomer would run it.
func TestHelpExitsZero(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	out, err := exec.Command(buildBinary(t), "-h").CombinedOutput()
	require.NoError(t, err, "granary -h exits 0:\n%s", out)
	require.Contains(t, string(out), "usage: granary [flags]")
}

// Every setting's environment variable is GRANARY_ and its flag's name in
// capitals with underscores, as the docs promise.
func TestEveryFlagHasItsEnvironmentVariable(t *testing.T) {
	s := newSettings(flag.NewFlagSet("t", flag.ContinueOnError))
	defineSiloFlags(s)
	require.NotEmpty(t, s.names)
	for _, name := range s.names {
		require.Equal(t, "GRANARY_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_")), s.env[name], name)
		require.Contains(t, s.fs.Lookup(name).Usage, "($"+s.env[name]+")", "the usage names it")
	}
}
