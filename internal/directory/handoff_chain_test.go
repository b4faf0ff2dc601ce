package directory

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/cluster"
)

// chainGrain returns a grain whose entry a owns among a, b, c and h, b
// once a is off the ring, and c once b is off it too: the range it lies in
// goes from a to b to c as a and then b stop.
func chainGrain(t *testing.T) actor.GrainID {
	t.Helper()
	all, withoutA, withoutAB := ringOf("a", "b", "c", "h"), ringOf("b", "c", "h"), ringOf("c", "h")
	for i := range 10000 {
		id := grain(i)
		o1, _ := all.OwnerOf(id)
		o2, _ := withoutA.OwnerOf(id)
		o3, _ := withoutAB.OwnerOf(id)
		if o1.ID == "a" && o2.ID == "b" && o3.ID == "c" {
			return id
		}
	}
	t.Fatal("no grain moves from a to b to c")
	return actor.GrainID{}
}

// without returns v minus the silos ids, and with the statuses given.
func without(v cluster.View, statuses map[string]cluster.Status, ids ...string) cluster.View {
	v.Members = slices.DeleteFunc(slices.Clone(v.Members), func(m cluster.Member) bool { return slices.Contains(ids, m.ID) })
	for i := range v.Members {
		if st, ok := statuses[v.Members[i].ID]; ok {
			v.Members[i].Status = st
		}
	}
	return v
}

// handedToTheOthers waits until a's handoffs to silos have landed: only
// the one to b fails.
func handedToTheOthers(t *testing.T, silos ...*fakeSilo) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, s := range silos {
			if st := s.dir.Stats(); st.HandoffsReceived == 0 || st.Held > 0 {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "a's handoffs to the others land")
}

// Silo a stops gracefully and its handoff to b, the range's next owner,
// fails (a's directory closes first: the stop went on without it). b holds
// the range, waiting for a's entries or for the rebuild that replaces
// them, and stops itself before either came. b's handoff to c then named
// the range as handed over, with no entry for the grain, and c believed
// it: c placed the grain again beside h's activation, which went on
// serving, and nothing ever told either that the other existed.
//
// A range its sender still holds is handed over as unfilled, and its new
// owner rebuilds it from what the silos host at once. The clock is fake:
// no handoff wait ends, so only the handoff can release the range.
func TestARangeHeldForAFailedHandoffIsRebuiltByItsNextOwner(t *testing.T) {
	shutting := cluster.StatusShuttingDown
	for _, tc := range []struct {
		name string
		// stopB moves b off the ring: its view, its handoff, and then c's
		// view (before or after the handoff lands).
		stopB func(t *testing.T, c *fakeCluster, v1 cluster.View)
	}{{
		name: "b still waits for a's handoff, c's view first",
		stopB: func(t *testing.T, c *fakeCluster, v1 cluster.View) {
			v2 := without(v1, map[string]cluster.Status{"b": shutting})
			c.silos["c"].dir.SetView(v2)
			c.silos["h"].dir.SetView(v2)
			c.silos["b"].dir.SetView(v2)
			require.NoError(t, c.silos["b"].dir.Wait(context.Background()))
		},
	}, {
		name: "b still waits for a's handoff, b's handoff first",
		stopB: func(t *testing.T, c *fakeCluster, v1 cluster.View) {
			v2 := without(v1, map[string]cluster.Status{"b": shutting})
			c.silos["b"].dir.SetView(v2)
			require.NoError(t, c.silos["b"].dir.Wait(context.Background()))
			c.silos["c"].dir.SetView(v2)
			c.silos["h"].dir.SetView(v2)
		},
	}, {
		name: "b hands over before it announces its leave",
		stopB: func(t *testing.T, c *fakeCluster, v1 cluster.View) {
			require.NoError(t, c.silos["b"].dir.Handover(context.Background()))
			v2 := without(v1, map[string]cluster.Status{"b": shutting})
			for _, id := range []string{"c", "h", "b"} {
				c.silos[id].dir.SetView(v2)
			}
			require.NoError(t, c.silos["b"].dir.Wait(context.Background()))
		},
	}, {
		name: "a has left and b's rebuild is still asking",
		stopB: func(t *testing.T, c *fakeCluster, v1 cluster.View) {
			gate := make(chan struct{})
			c.mu.Lock()
			c.gates["Hosted"] = gate // b's rebuild of a's range waits for the answers
			c.mu.Unlock()
			left := without(v1, nil, "a")
			for _, id := range []string{"b", "c", "h"} {
				c.silos[id].dir.SetView(left)
			}
			v2 := without(left, map[string]cluster.Status{"b": shutting})
			c.silos["b"].dir.SetView(v2)
			require.Eventually(t, func() bool { return c.silos["c"].dir.Stats().HandoffsReceived > 0 }, 10*time.Second, time.Millisecond,
				"b's handoff reaches c")
			c.silos["c"].dir.SetView(v2)
			c.silos["h"].dir.SetView(v2)
			c.mu.Lock()
			delete(c.gates, "Hosted")
			c.mu.Unlock()
			close(gate)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			fake := clock.NewFake(time.Unix(1000, 0))
			c := &fakeCluster{t: t, silos: make(map[string]*fakeSilo), down: make(map[string]bool), refused: make(map[string]int),
				gates: make(map[string]chan struct{}), clock: fake}
			for _, id := range []string{"a", "b", "c", "h"} {
				c.add(id, 1)
			}
			c.setView()
			a, b, cc, h := c.silos["a"], c.silos["b"], c.silos["c"], c.silos["h"]
			id := chainGrain(t)
			require.Empty(t, register(t, h, id), "h's activation wins at a")

			// a announces its leave; its handoff to b does not land, and
			// a's directory closes with the handoff still trying.
			c.mu.Lock()
			c.down["b"] = true
			c.mu.Unlock()
			v1 := c.viewWith(map[string]cluster.Status{"a": shutting})
			a.dir.SetView(v1)
			for _, s := range []*fakeSilo{b, cc, h} {
				s.dir.SetView(v1)
			}
			require.Positive(t, b.dir.Stats().Held, "b holds the range a is to hand it")
			handedToTheOthers(t, cc, h)
			a.dir.Close()
			c.mu.Lock()
			c.down["b"] = false
			c.mu.Unlock()
			require.Zero(t, b.dir.Stats().HandoffsReceived, "a's handoff failed")

			tc.stopB(t, c, v1)

			silo, placed := locatePlaced(t, cc, id, "")
			assert.False(t, placed, "c finds the grain's activation instead of placing it again")
			assert.Equal(t, "h", silo)
			assert.Equal(t, "h", register(t, cc, id), "a registration elsewhere loses to h's activation")
			h.host.mu.Lock()
			assert.Empty(t, h.host.deactivated, "h's activation, the only one, goes on")
			h.host.mu.Unlock()
		})
	}
}

// The same sequence, with h silent when c rebuilds the range (loaded, or
// its link still to be dialled): c releases the range without h's answer,
// and the grain is activated again on c beside h's activation. c asks h
// again once the range is released, and the duplicate is resolved: one of
// the two is told to deactivate.
func TestADuplicateLeftByARangeHandedOverUnfilledIsResolved(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	c := &fakeCluster{t: t, silos: make(map[string]*fakeSilo), down: make(map[string]bool), refused: make(map[string]int),
		gates: make(map[string]chan struct{}), clock: fake}
	for _, id := range []string{"a", "b", "c", "h"} {
		c.add(id, 1)
	}
	c.setView()
	a, b, cc, h := c.silos["a"], c.silos["b"], c.silos["c"], c.silos["h"]
	id := chainGrain(t)
	require.Empty(t, register(t, h, id), "h's activation wins at a")

	c.mu.Lock()
	c.down["b"] = true
	c.mu.Unlock()
	v1 := c.viewWith(map[string]cluster.Status{"a": cluster.StatusShuttingDown})
	for _, s := range []*fakeSilo{a, b, cc, h} {
		s.dir.SetView(v1)
	}
	handedToTheOthers(t, cc, h)
	a.dir.Close()
	c.mu.Lock()
	c.down["b"] = false
	c.down["h"] = true
	c.mu.Unlock()

	v2 := without(v1, map[string]cluster.Status{"b": cluster.StatusShuttingDown})
	for _, s := range []*fakeSilo{cc, h, b} {
		s.dir.SetView(v2)
	}
	require.Eventually(t, func() bool { return cc.dir.Stats().Rebuilds > 0 && cc.dir.Stats().Held == 0 }, 10*time.Second, time.Millisecond,
		"c rebuilds the range it was handed unfilled, and releases it without h's answer")
	require.Empty(t, register(t, cc, id), "with h's activation unknown, c activates the grain again: a duplicate")
	c.mu.Lock()
	c.down["h"] = false
	c.mu.Unlock()
	require.Eventually(t, func() bool {
		h.host.mu.Lock()
		defer h.host.mu.Unlock()
		cc.host.mu.Lock()
		defer cc.host.mu.Unlock()
		return len(h.host.deactivated)+len(cc.host.deactivated) == 1
	}, 10*time.Second, time.Millisecond, "one of the two is told to deactivate")
	assert.EqualValues(t, 1, cc.dir.Stats().Conflicts)
}
