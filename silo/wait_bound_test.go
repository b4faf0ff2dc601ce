package silo_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grains/ratelimit"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/silo"
)

// A call queued in a limiter that carries neither a budget nor a response
// timeout, as a raw client may send it, is answered once the silo's
// response timeout has passed, instead of being held for ever.
func TestQueuedCallWithNoBudgetIsAnsweredByTheResponseTimeout(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	s, err := silo.New(silo.Options{GatewayAddress: "127.0.0.1:0", ResponseTimeout: 20 * time.Second},
		silo.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), silo.WithStore(persistence.NewMemoryStore()), silo.WithClock(clk))
	require.NoError(t, err)
	require.NoError(t, ratelimit.Register(s, ratelimit.Defaults{Concurrency: ratelimit.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1}}))
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, s.Stop(ctx))
	})
	raw := dialRaw(t, &env{t: t, silo: s})
	acquire := func(id uint64) {
		payload, err := proto.Marshal(&pb.AcquireRequest{Permits: 1})
		require.NoError(t, err)
		raw.send(t, wire.Envelope{Kind: wire.KindRequest, CallID: id, GrainType: pb.ConcurrencyLimiterGrainType, GrainKey: "k",
			MethodID: pb.ConcurrencyLimiter_Acquire_Method.ID, Payload: payload})
	}
	acquire(1)
	first := <-raw.replies
	require.Equal(t, wire.StatusOK, first.Status)
	var lease pb.LeaseMetadata
	require.NoError(t, proto.Unmarshal(first.Payload, &lease))
	require.True(t, lease.Acquired)

	acquire(2) // queued behind the lease, which is never released
	require.Eventually(t, func() bool {
		st, _ := ratelimit.SiloStats(s)
		return st.Waiting == 1
	}, 10*time.Second, time.Millisecond)
	clk.Advance(20 * time.Second)
	var second wire.Envelope
	select {
	case second = <-raw.replies:
	case <-time.After(10 * time.Second):
		t.Fatal("the queued call was not answered once the response timeout had passed")
	}
	require.Equal(t, uint64(2), second.CallID)
	require.Equal(t, wire.StatusOK, second.Status)
	require.NoError(t, proto.Unmarshal(second.Payload, &lease))
	assert.False(t, lease.Acquired, "answered with a lease not acquired")
}
