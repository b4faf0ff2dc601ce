package silo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/internal/redistest"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/silo"
)

// TestGrainKeepsServingWhileRedisIsDown stops Redis while a grain keeps
// changing state. No call fails because of it: state lives in the
// activation and only its snapshot goes to Redis. Every flush period
// tries to write and fails, the state stays dirty, and once Redis is back
// a period writes the last value without any new change.
func TestGrainKeepsServingWhileRedisIsDown(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	store := redisStoreOn(t, srv)
	e := startSilo(t, envConfig{fakeClock: true, siloOpts: []silo.Option{silo.WithStore(store)}})
	ref := testgrain.NewCounterRef(e.client(client.Options{}), "busy")
	ctx := context.Background()
	key := persistence.Key{GrainType: testgrain.CounterGrainType, GrainKey: "busy", Name: "state"}
	flusher := func() persistence.FlusherStats { return e.silo.Stats().Flusher }
	// period runs one flush period and waits until its write has ended.
	period := func() persistence.FlusherStats {
		before := flusher()
		e.clock.Advance(silo.DefaultFlushPeriod)
		eventually(t, func() bool {
			now := flusher()
			return now.WritesSucceeded+now.WritesFailed > before.WritesSucceeded+before.WritesFailed
		}, "a dirty grain is written every period")
		return flusher()
	}
	stored := func() int64 {
		data, _, err := store.Read(ctx, key)
		require.NoError(t, err)
		v, n := protowire.ConsumeVarint(data)
		require.Positive(t, n, "counter state %x", data)
		return int64(v)
	}

	_, err := ref.Add(ctx, &testgrain.AddRequest{Delta: 1})
	require.NoError(t, err)
	require.EqualValues(t, 1, period().WritesSucceeded)
	require.EqualValues(t, 1, stored())

	srv.Stop()
	const outagePeriods = 10
	want := int64(1)
	for i := 1; i <= outagePeriods; i++ {
		r, err := ref.Add(ctx, &testgrain.AddRequest{Delta: int64(i)})
		require.NoError(t, err, "call %d while Redis is down", i)
		want += int64(i)
		require.Equal(t, want, r.Value)
		st := period()
		require.EqualValues(t, i, st.WritesFailed, "period %d tried and failed", i)
	}
	assert.EqualValues(t, 1, flusher().WritesSucceeded)
	assert.True(t, e.silo.Host().IsActive(actor.GrainID{Type: testgrain.CounterGrainType, Key: "busy"}))
	cold := testgrain.NewCounterRef(e.client(client.Options{}), "cold")
	_, err = cold.Get(ctx, &testgrain.GetRequest{})
	assert.Error(t, err, "a grain that is not active cannot load its state, so its activation fails")

	srv.Restart()
	// No new change: only a record that stayed dirty is written. Once as
	// many dials have failed as its pool has connections (ten per
	// GOMAXPROCS: the outage fails ten or more, a pool of one's), go-redis
	// answers with the last dial error and dials again only once a
	// second, so the periods of that second fail too, however many.
	deadline := time.Now().Add(10 * time.Second)
	for period().WritesSucceeded < 2 {
		require.True(t, time.Now().Before(deadline), "not written within 10s of Redis coming back")
	}
	assert.EqualValues(t, 2, flusher().WritesSucceeded)
	assert.Equal(t, want, stored(), "every change made during the outage reached Redis")
	assert.Zero(t, e.silo.Host().Stats().Deactivations, "no write was taken for a conflict")

	_, err = cold.Get(ctx, &testgrain.GetRequest{})
	assert.NoError(t, err, "activations work again")

	// And the grain goes on as before.
	_, err = ref.Add(ctx, &testgrain.AddRequest{Delta: 100})
	require.NoError(t, err)
	require.EqualValues(t, 3, period().WritesSucceeded)
	assert.Equal(t, want+100, stored())
}
