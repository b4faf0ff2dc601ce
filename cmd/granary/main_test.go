package main

import (
	"bufio"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/examples/counter"
)

func TestMain(m *testing.M) {
	// The tests' silos, and the processes they start, never take the
	// default HTTP port: another program may hold it.
	if err := os.Setenv("GRANARY_HTTP", "127.0.0.1:0"); err != nil {
		panic(err)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if binary.dir != "" {
			_ = os.RemoveAll(binary.dir)
		}
		os.Exit(code)
	}))
}

func TestRunServesUntilCancelled(t *testing.T) {
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	defer outR.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer devnull.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-gateway", "127.0.0.1:0", "-name", "cmd-test"}, outW, devnull)
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	require.True(t, lines.Scan())
	first := lines.Text()
	require.Contains(t, first, "gateway listening on 127.0.0.1:")
	addr := strings.Fields(strings.SplitAfter(first, "listening on ")[1])[0]

	c, err := client.New(client.Options{Gateways: []string{addr}})
	require.NoError(t, err)
	r, err := counter.NewCounterRef(c, "k").Add(context.Background(), &counter.AddRequest{Delta: 4})
	require.NoError(t, err)
	assert.EqualValues(t, 4, r.Value)
	require.NoError(t, c.Close())

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("silo did not stop")
	}
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	assert.Equal(t, []string{"stopping...", "stopped"}, rest)
}

func TestRunRejectsBadFlags(t *testing.T) {
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer devnull.Close()
	require.Error(t, run(context.Background(), []string{"-gateway", "no-port"}, devnull, devnull))
	require.Error(t, run(context.Background(), []string{"-bogus"}, devnull, devnull))
}
