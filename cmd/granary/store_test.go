package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/examples/counter"
	"github.com/granary-go/granary/internal/redistest"
	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/persistence/redisstore"
)

var quietLog = slog.New(slog.DiscardHandler)

func TestOpenStoreChoosesTheStore(t *testing.T) {
	ctx := context.Background()
	st, err := openStore(ctx, "memory", quietLog)
	require.NoError(t, err)
	assert.IsType(t, &persistence.MemoryStore{}, st.Store)
	assert.Contains(t, st.describe, "memory")
	assert.NoError(t, st.close())

	for _, spec := range []string{"", "Memory", "redis", "mysql://h/0", "redis://h:1/0?db=1"} {
		_, err := openStore(ctx, spec, quietLog)
		assert.ErrorContains(t, err, "-store", "%q", spec)
	}

	// A Redis that does not answer fails the start, with the store's error.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := "redis://:hunter2@" + l.Addr().String() + "/0"
	require.NoError(t, l.Close())
	_, err = openStore(ctx, down, quietLog)
	assert.ErrorIs(t, err, redisstore.ErrUnavailable)
	assert.NotContains(t, err.Error(), "hunter2", "the error must not show the password")
}

func TestStoreFlagDefaultsToTheEnvironment(t *testing.T) {
	t.Setenv(storeEnv, "redis://127.0.0.1:1/0?bogus=1")
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer devnull.Close()
	err = run(context.Background(), []string{"-gateway", "127.0.0.1:0"}, devnull, devnull)
	assert.ErrorContains(t, err, "bogus", "$GRANARY_STORE is the default")

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // stop as soon as started
	assert.NoError(t, run(ctx, []string{"-gateway", "127.0.0.1:0", "-store", "memory"}, devnull, devnull), "the flag wins")
}

// TestSiloRunsOnRedis runs the binary's silo with -store redis://...: the
// state a call changes reaches Redis by the time the silo has stopped, and
// the startup log names the store without its password.
func TestSiloRunsOnRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{Password: "hunter2"})
	logFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	defer logFile.Close()
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	defer outR.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-gateway", "127.0.0.1:0", "-store", srv.URL(2) + "?prefix=granary:cmd:"}, outW, logFile)
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	require.True(t, lines.Scan())
	addr := strings.Fields(strings.SplitAfter(lines.Text(), "listening on ")[1])[0]

	c, err := client.New(client.Options{Gateways: []string{addr}})
	require.NoError(t, err)
	_, err = counter.NewCounterRef(c, "k").Add(context.Background(), &counter.AddRequest{Delta: 6})
	require.NoError(t, err)
	require.NoError(t, c.Close())
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("silo did not stop")
	}
	_, _ = io.Copy(io.Discard, outR)

	store, err := redisstore.NewFromURL(srv.URL(2) + "?prefix=granary:cmd:")
	require.NoError(t, err)
	defer store.Close()
	data, _, err := store.Read(context.Background(), persistence.Key{GrainType: counter.CounterGrainType, GrainKey: "k", Name: "state"})
	require.NoError(t, err, "the silo wrote the grain's state to Redis")
	v, n := protowire.ConsumeVarint(data)
	require.Positive(t, n)
	assert.EqualValues(t, 6, v)

	logs, err := os.ReadFile(logFile.Name())
	require.NoError(t, err)
	assert.Contains(t, string(logs), `store="redis://`+srv.Addr()+`/2 (key prefix \"granary:cmd:\", with password)"`)
	assert.NotContains(t, string(logs), "hunter2")
}
