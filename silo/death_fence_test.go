package silo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/testcluster"
)

// A silo that hears it was declared dead while it ran serves on while the
// death's grace runs, since the declarer places its grains nowhere else
// meanwhile. Once the grace is past, it refuses every grain call, whoever
// makes it, and deactivates its grains, flushing them; the others serve
// them meanwhile. The minority fence is off: the death fence is a switch
// of its own. Once its cluster has taken it back, it serves again, and
// every grain kept its state and has one activation.
func TestASiloDeclaredDeadServesNothingUntilItsClusterTakesItBack(t *testing.T) {
	cut := newCutReachability()
	// A grace that no test outlasts: no silo leaves a view here, and a
	// verdict within it is sure to wait.
	const grace = time.Hour
	c := testcluster.New(t, testcluster.Options{
		Silos:       3,
		Register:    func(s *silo.Silo) error { return testgrain.RegisterCounterGrain(s, testgrain.New(nil)) },
		SiloOptions: []silo.Option{silo.WithReachability(cut.wrap)},
		Configure: func(_ int, o *silo.Options) {
			o.Cluster.Fence.Disabled = true
			o.Cluster.DeathGrace = grace
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	viaSilo := func(i int) *client.Client {
		return c.NewClient(client.Options{Gateways: []string{c.Silo(i).GatewayAddr().String()}})
	}
	other, declared := viaSilo(0), viaSilo(2)
	ids := make([]actor.GrainID, 6)
	for i := range ids {
		ids[i] = actor.GrainID{Type: testgrain.CounterGrainType, Key: fmt.Sprint("declared-", i)}
		addOnce(t, ctx, other, ids[i], c.PlaceOn(i%3))
	}
	onDeclared := []actor.GrainID{ids[2], ids[5]}
	for _, id := range onDeclared {
		require.True(t, c.Silo(2).Host().IsActive(id))
	}

	cut.declare(testcluster.Name(2), testcluster.Name(0), time.Second)
	require.Eventually(t, func() bool { return c.Silo(2).Stats().Fence.Verdicts == 1 }, 10*time.Second, time.Millisecond,
		"the verdict was never heard")
	for _, id := range onDeclared {
		_, err := testgrain.NewCounterRef(declared, id.Key).Get(ctx, &testgrain.GetRequest{})
		require.NoError(t, err, "%s while the grace runs", id)
		require.True(t, c.Silo(2).Host().IsActive(id), "%s stays where it is while the grace runs", id)
	}
	require.False(t, c.Silo(2).Stats().Fence.Fenced)

	cut.declare(testcluster.Name(2), testcluster.Name(0), grace)
	require.Eventually(t, func() bool { return c.Silo(2).Stats().Fence.Fenced }, 10*time.Second, time.Millisecond,
		"a verdict past the grace raised no fence")
	require.ErrorIs(t, c.Silo(2).Ready(), silo.ErrDeclaredDead)
	for _, id := range onDeclared {
		require.Eventually(t, func() bool { return !c.Silo(2).Host().IsActive(id) }, 10*time.Second, time.Millisecond,
			"%s still active on the silo declared dead", id)
	}
	_, err := testgrain.NewCounterRef(declared, ids[2].Key).Add(ctx, &testgrain.AddRequest{Delta: 1})
	require.ErrorIs(t, err, proxy.ErrUnavailable, "through its gateway")
	assert.ErrorContains(t, err, "declared dead by silo-0 while it ran", "the reason travels with the error")
	_, err = testgrain.NewCounterRef(c.Silo(2).Caller(), ids[2].Key).Add(ctx, &testgrain.AddRequest{Delta: 1})
	require.ErrorIs(t, err, proxy.ErrUnavailable, "from its own caller")
	assert.ErrorContains(t, err, silo.ErrDeclaredDead.Error())
	for i := range 2 {
		assert.NoError(t, c.Silo(i).Ready(), "the others are ready")
	}

	// Its cluster takes it back; once the hold has passed, every grain
	// has the state its acknowledged calls left.
	assert.True(t, c.Silo(2).Stats().Fence.Fenced, "up while silo-0 says it lost silo-2")
	cut.takeBack(testcluster.Name(2))
	require.Eventually(t, func() bool { return c.Silo(2).Ready() == nil }, 10*time.Second, time.Millisecond, "the fence never lifted")
	for i, id := range ids {
		r, err := testgrain.NewCounterRef(declared, id.Key).Add(ctx, &testgrain.AddRequest{Delta: 1}, c.PlaceOn(i%3))
		require.NoError(t, err, "%s through the silo taken back", id)
		assert.Equal(t, int64(2), r.GetValue(), "%s kept its state; the refused calls changed nothing", id)
		assert.Equal(t, 1, c.Activations(id), "%s has one activation", id)
	}
	st := c.Silo(2).Stats().Fence
	assert.EqualValues(t, 1, st.Deaths)
	assert.Zero(t, st.Fencings, "the minority fence is off")
	assert.GreaterOrEqual(t, st.Refused, int64(1), "refusals are counted")
}
