package main

import (
	"context"
	"os"
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
