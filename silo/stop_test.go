package silo_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

// Stop is documented as safe to call twice. When the first call runs out of
// time (a turn still blocks), a later call must finish the job: the host's
// actor system and its workers must not be left running for good.
func TestStopAfterTimeoutFinishesOnRetry(t *testing.T) {
	e := startSilo(t, envConfig{})
	errc := make(chan error, 1)
	go func() {
		_, err := testgrain.NewCounterRef(e.silo.Caller(), "k").Block(context.Background(), &testgrain.BlockRequest{Tag: "b"})
		errc <- err
	}()
	require.Equal(t, "b", <-e.gate.Entered())

	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := e.silo.Stop(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the blocked turn keeps the host from stopping")
	assert.ErrorContains(t, err, testgrain.CounterGrainType+"/k in Block", "the error names the grain and its method")
	require.ErrorIs(t, <-errc, proxy.ErrUnavailable, "the caller is released by the closing silo")

	e.gate.Release("b")
	<-e.gate.Exited()
	ctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	require.NoError(t, e.silo.Stop(ctx))
	goleak.VerifyNone(t)
}

// The same through the gateway: the blocked turn runs on the connection's
// inbound runner, and closing that connection waits for it. Stop must still
// return within its ctx, and a later Stop must finish without leaks.
func TestStopWithinItsContextWhileAGatewayTurnBlocks(t *testing.T) {
	e := startSilo(t, envConfig{})
	c := e.client(client.Options{})
	ref := testgrain.NewCounterRef(c, "k")
	// Activate first: a request for an idle, active grain runs on the
	// connection's runner.
	_, err := ref.Get(context.Background(), &testgrain.GetRequest{})
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() {
		_, err := ref.Block(context.Background(), &testgrain.BlockRequest{Tag: "gw"})
		errc <- err
	}()
	require.Equal(t, "gw", <-e.gate.Entered())

	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- e.silo.Stop(short) }()
	select {
	case err := <-stopped:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(10 * time.Second):
		t.Fatal("Stop ignored its context while a turn blocked")
	}

	e.gate.Release("gw")
	<-e.gate.Exited()
	ctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	require.NoError(t, e.silo.Stop(ctx), "a later Stop finishes the job")
	// The released turn's reply may or may not beat the closing connection;
	// either way the call returns.
	<-errc
	require.NoError(t, c.Close())
	goleak.VerifyNone(t)
}

// A graceful stop lets a call in flight finish and refuses new work
// meanwhile.
func TestStopLetsACallInFlightFinish(t *testing.T) {
	e := startSilo(t, envConfig{})
	c := e.client(client.Options{})
	ref := testgrain.NewCounterRef(c, "k")
	errc := make(chan error, 1)
	go func() {
		_, err := ref.Block(context.Background(), &testgrain.BlockRequest{Tag: "drain"})
		errc <- err
	}()
	require.Equal(t, "drain", <-e.gate.Entered())
	stopped := make(chan error, 1)
	go func() { stopped <- e.silo.Stop(context.Background()) }()
	eventually(t, func() bool {
		_, err := testgrain.NewCounterRef(c, "other").Get(context.Background(), &testgrain.GetRequest{})
		return errors.Is(err, proxy.ErrUnavailable)
	}, "new work is refused while the silo drains")
	e.gate.Release("drain")
	require.NoError(t, <-errc, "the call in flight finished")
	require.NoError(t, <-stopped)
}

// A stop that runs out of time logs the grains that held it up.
func TestStopLogsTheGrainsThatHeldItUp(t *testing.T) {
	var logs syncBuffer
	e := startSilo(t, envConfig{siloOpts: []silo.Option{silo.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))}})
	go func() {
		_, _ = testgrain.NewCounterRef(e.silo.Caller(), "stuck").Block(context.Background(), &testgrain.BlockRequest{Tag: "s"})
	}()
	require.Equal(t, "s", <-e.gate.Entered())
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.Error(t, e.silo.Stop(short))
	assert.Contains(t, logs.String(), "grains did not deactivate in time")
	assert.Contains(t, logs.String(), "1 grains did not deactivate in time: "+testgrain.CounterGrainType+"/stuck in Block")
	e.gate.Release("s")
	<-e.gate.Exited()
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
