package silo_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/ring"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/testcluster"
)

// cutReachability reports the members a test cut off from the others as
// unreachable, on both sides, over what the membership reports. Gossip and
// links go on: only the fences see the cut.
type cutReachability struct {
	mu       sync.Mutex
	cut      map[string]bool // the silos on the far side of the cut
	changed  map[string]chan struct{}
	verdicts map[string]chan cluster.DeathVerdict // what declare hands each silo, in place of its membership's
	saysDead map[string]string                    // silo -> the member that says it lost it, until taken back
}

func newCutReachability() *cutReachability {
	return &cutReachability{cut: map[string]bool{}, changed: map[string]chan struct{}{}, verdicts: map[string]chan cluster.DeathVerdict{},
		saysDead: map[string]string{}}
}

// declare tells silo self that declarer declared it dead age ago, as its
// membership's probes would, and has declarer say so until takeBack.
func (c *cutReachability) declare(self, declarer string, age time.Duration) {
	c.mu.Lock()
	ch := c.verdicts[self]
	c.saysDead[self] = declarer
	c.mu.Unlock()
	ch <- cluster.DeathVerdict{By: declarer, Round: 1, Age: age}
}

// takeBack has the declarer of silo self answer its probes again: the
// membership's own answers, of rounds later than the verdict's, show.
func (c *cutReachability) takeBack(self string) {
	c.mu.Lock()
	delete(c.saysDead, self)
	c.mu.Unlock()
}

// set cuts the silos named off from the others (none: heal).
func (c *cutReachability) set(silos ...string) {
	c.mu.Lock()
	c.cut = map[string]bool{}
	for _, s := range silos {
		c.cut[s] = true
	}
	for _, ch := range c.changed {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	c.mu.Unlock()
}

func (c *cutReachability) wrap(self string, m silo.ReachabilitySource) silo.ReachabilitySource {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{}, 1)
	c.changed[self] = ch
	// The test's verdicts replace the membership's.
	verdicts := make(chan cluster.DeathVerdict, 1)
	c.verdicts[self] = verdicts
	return &cutView{c: c, self: self, m: m, changed: ch, verdicts: verdicts}
}

type cutView struct {
	c        *cutReachability
	self     string
	m        silo.ReachabilitySource
	changed  chan struct{}
	verdicts chan cluster.DeathVerdict
}

func (v *cutView) DeathVerdicts() <-chan cluster.DeathVerdict { return v.verdicts }

func (v *cutView) Reachability() []cluster.Reachability {
	out := v.m.Reachability()
	v.c.mu.Lock()
	defer v.c.mu.Unlock()
	for i := range out {
		if out[i].ID != v.self && v.c.cut[out[i].ID] != v.c.cut[v.self] {
			out[i].Reachable = false
		}
		if v.c.saysDead[v.self] == out[i].ID {
			out[i].SaysDead, out[i].Acked = true, 0
		}
	}
	return out
}

func (v *cutView) ReachabilityChanged() <-chan struct{} { return v.changed }

func TestASiloCutOffFromTheMajorityRefusesCallsUntilTheCutHeals(t *testing.T) {
	cut := newCutReachability()
	c := testcluster.New(t, testcluster.Options{
		Silos:       3,
		Register:    func(s *silo.Silo) error { return testgrain.RegisterCounterGrain(s, testgrain.New(nil)) },
		SiloOptions: []silo.Option{silo.WithReachability(cut.wrap)},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	viaSilo := func(i int) *client.Client {
		return c.NewClient(client.Options{Gateways: []string{c.Silo(i).GatewayAddr().String()}})
	}
	majority, minority := viaSilo(0), viaSilo(2)

	// Grains live on every silo, the minority's included. Only the fences
	// see this cut: the majority still counts silo-2 in the directory's
	// ring, and silo-2's part of the directory refuses registrations. So
	// the grains are ones whose entries the majority keeps, as they all
	// are once a real cut has the majority declare silo-2 dead.
	ids := grainsKeptBy(6, "silo-0", "silo-1")
	for i, id := range ids {
		addOnce(t, ctx, majority, id, c.PlaceOn(i%3))
	}
	for i := range 3 {
		require.Eventually(t, func() bool { return len(c.Silo(i).Stats().Fence.Stable) == 3 }, 10*time.Second, 5*time.Millisecond,
			"silo %d's stable membership is %v", i, c.Silo(i).Stats().Fence.Stable)
	}
	onMinority := []actor.GrainID{ids[2], ids[5]}
	for _, id := range onMinority {
		require.True(t, c.Silo(2).Host().IsActive(id))
	}

	cut.set(testcluster.Name(2))
	require.Eventually(t, func() bool { return c.Silo(2).Stats().Fence.Fenced }, 10*time.Second, 5*time.Millisecond,
		"silo-2 never fenced (is the stable membership formed? the fence needs Cluster.Fence.Stability first)")

	err := c.Silo(2).Ready()
	require.ErrorIs(t, err, silo.ErrFenced)
	assert.ErrorContains(t, err, "sees 1 of 3 silos of the last stable membership: silo-0, silo-1 unreachable")
	for _, i := range []int{0, 1} {
		assert.NoError(t, c.Silo(i).Ready(), "the majority is ready")
	}

	// Every call reaching silo-2 is refused, whoever makes it.
	_, err = testgrain.NewCounterRef(minority, "fenced-0").Add(ctx, &testgrain.AddRequest{Delta: 1})
	require.ErrorIs(t, err, proxy.ErrUnavailable, "through its gateway")
	assert.ErrorContains(t, err, "silo-0, silo-1 unreachable", "the reason travels with the error")
	_, err = testgrain.NewCounterRef(c.Silo(2).Caller(), "fenced-0").Add(ctx, &testgrain.AddRequest{Delta: 1})
	assert.ErrorIs(t, err, proxy.ErrUnavailable, "from its own caller")
	var callErr *proxy.CallError
	require.True(t, errors.As(err, &callErr))
	assert.Equal(t, proxy.CodeUnavailable, callErr.Code)

	// Its grains deactivate, and the majority serves them, state and all.
	for _, id := range onMinority {
		require.Eventually(t, func() bool { return !c.Silo(2).Host().IsActive(id) }, 10*time.Second, 5*time.Millisecond,
			"%s still active on the fenced silo", id)
	}
	for i, id := range ids {
		ref := testgrain.NewCounterRef(majority, id.Key)
		// A grain the directory still places on silo-2 would be refused
		// there: the hint keeps the test about the fence, not placement.
		r, err := ref.Add(ctx, &testgrain.AddRequest{Delta: 1}, c.PlaceOn(i%2))
		require.NoError(t, err, "%s through the majority", id)
		assert.Equal(t, int64(2), r.GetValue(), "%s kept its state", id)
	}
	for _, id := range ids {
		assert.Equal(t, 0, activeOn(c, 2, id), "%s: nothing activates on the fenced silo", id)
	}
	refused := c.Silo(2).Stats().Fence.Refused
	assert.GreaterOrEqual(t, refused, int64(2), "refusals are counted")

	cut.set()
	require.Eventually(t, func() bool { return c.Silo(2).Ready() == nil }, 10*time.Second, 5*time.Millisecond, "silo-2 never unfenced")
	for _, id := range ids {
		r, err := testgrain.NewCounterRef(minority, id.Key).Get(ctx, &testgrain.GetRequest{})
		require.NoError(t, err, "%s through the healed silo", id)
		assert.Equal(t, int64(2), r.GetValue())
		assert.Equal(t, 1, c.Activations(id), "%s has one activation", id)
	}
	assert.Equal(t, int64(1), c.Silo(2).Stats().Fence.Fencings)
}

// grainsKeptBy returns n counter grains whose directory entries the silos
// named keep, in the ring of silo-0, silo-1 and silo-2.
func grainsKeptBy(n int, keepers ...string) []actor.GrainID {
	r := ring.New([]ring.Silo{{ID: "silo-0"}, {ID: "silo-1"}, {ID: "silo-2"}}, 0)
	var out []actor.GrainID
	for i := 0; len(out) < n; i++ {
		id := actor.GrainID{Type: testgrain.CounterGrainType, Key: fmt.Sprint("fenced-", i)}
		if o, _ := r.OwnerOf(id); slices.Contains(keepers, o.ID) {
			out = append(out, id)
		}
	}
	return out
}

// activeOn is 1 when silo i has an activation of id serving, else 0.
func activeOn(c *testcluster.Cluster, i int, id actor.GrainID) int {
	if c.Silo(i).Host().IsActive(id) {
		return 1
	}
	return 0
}

func TestASiloWhoseGossipIsCutOffIsFencedWhileTheMajorityServesItsGrains(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{
		Silos:    3,
		Register: func(s *silo.Silo) error { return testgrain.RegisterCounterGrain(s, testgrain.New(nil)) },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	viaSilo := func(i int) *client.Client {
		return c.NewClient(client.Options{Gateways: []string{c.Silo(i).GatewayAddr().String()}})
	}
	majority, minority := viaSilo(0), viaSilo(2)
	for i := range 3 {
		require.Eventually(t, func() bool { return len(c.Silo(i).Stats().Fence.Stable) == 3 }, 10*time.Second, 5*time.Millisecond)
	}
	ids := make([]actor.GrainID, 6)
	for i := range ids {
		ids[i] = actor.GrainID{Type: testgrain.CounterGrainType, Key: fmt.Sprint("cut-", i)}
		addOnce(t, ctx, majority, ids[i], c.PlaceOn(i%3))
	}

	c.Partition([]int{0, 1}, []int{2})
	require.Eventually(t, func() bool { return c.Silo(2).Stats().Fence.Fenced }, 30*time.Second, 5*time.Millisecond)
	require.ErrorIs(t, c.Silo(2).Ready(), silo.ErrFenced)
	_, err := testgrain.NewCounterRef(minority, ids[2].Key).Get(ctx, &testgrain.GetRequest{})
	require.ErrorIs(t, err, proxy.ErrUnavailable)
	assert.ErrorContains(t, err, "unreachable")

	// The majority declares silo-2 dead and serves every grain, state and
	// all; nothing runs on silo-2 meanwhile.
	for _, id := range ids {
		require.Eventually(t, func() bool {
			r, err := testgrain.NewCounterRef(majority, id.Key).Get(ctx, &testgrain.GetRequest{}, proxy.WithTimeout(2*time.Second))
			return err == nil && r.GetValue() == 1
		}, 30*time.Second, 20*time.Millisecond, "%s through the majority", id)
		assert.Equal(t, 0, activeOn(c, 2, id), "%s runs on the fenced silo", id)
	}
	for i := range 2 {
		assert.NoError(t, c.Silo(i).Ready())
		assert.False(t, c.Silo(i).Stats().Fence.Fenced)
	}

	c.Heal()
	require.Eventually(t, func() bool { return c.Silo(2).Ready() == nil }, 30*time.Second, 10*time.Millisecond, "silo-2 never unfenced")
	for _, id := range ids {
		require.Eventually(t, func() bool {
			r, err := testgrain.NewCounterRef(minority, id.Key).Get(ctx, &testgrain.GetRequest{}, proxy.WithTimeout(2*time.Second))
			return err == nil && r.GetValue() == 1
		}, 30*time.Second, 20*time.Millisecond, "%s through the healed silo", id)
	}
	// A call through silo-2 right after the heal may activate a grain
	// there before the directories have merged; their duplicate
	// resolution leaves one.
	for _, id := range ids {
		require.Eventually(t, func() bool { return c.Activations(id) == 1 }, 30*time.Second, 10*time.Millisecond,
			"%s keeps %d activations", id, c.Activations(id))
	}
}

// addOnce adds 1 to id's counter. A call that failed unsent (a link that a
// loaded machine's stall closed) cannot have run, and is tried again: the
// setup is not what the tests check.
func addOnce(t *testing.T, ctx context.Context, c *client.Client, id actor.GrainID, opts ...proxy.CallOption) {
	t.Helper()
	var err error
	for range 5 {
		if _, err = testgrain.NewCounterRef(c, id.Key).Add(ctx, &testgrain.AddRequest{Delta: 1}, opts...); err == nil {
			return
		}
		if !errors.Is(err, rpc.ErrNotSent) {
			break
		}
	}
	require.NoError(t, err, "%s", id)
}
