package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/gossipcut"
)

// startCutSilos starts n silos that gossip through cut, each given every
// other's gossip address as a seed once it runs, and waits until every view
// shows all of them.
func startCutSilos(t testing.TB, cut *gossipcut.Cut, n int) []*Membership {
	t.Helper()
	var ms []*Membership
	for i := range n {
		var seeds []string
		for _, m := range ms {
			seeds = append(seeds, m.GossipAddress())
		}
		ms = append(ms, startSiloIn(t, gossipcut.NewContext(context.Background(), cut), siloOptions(fmt.Sprintf("silo-%d", i), seeds...)))
	}
	waitForViews(t, ms, ms...)
	return ms
}

// startSiloIn is startSilo with a context of the test's own (a Cut).
func startSiloIn(t testing.TB, ctx context.Context, opts Options) *Membership {
	t.Helper()
	m, err := New(opts, WithLogger(discard))
	require.NoError(t, err)
	t.Cleanup(m.Kill)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, m.Start(ctx))
	return m
}

func gossipAddresses(ms ...*Membership) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.GossipAddress()
	}
	return out
}

func TestACutMakesEachSideSeeTheOtherFailed(t *testing.T) {
	cut := gossipcut.New()
	ms := startCutSilos(t, cut, 3)
	a, b, c := ms[0], ms[1], ms[2]
	_, subA := a.Subscribe()
	defer subA.Close()
	_, subC := c.Subscribe()
	defer subC.Close()

	cut.Partition(gossipAddresses(a, b), gossipAddresses(c))
	bound := detectionBound(a.opts.Timings, 3)
	waitForEvent(t, subA, bound, func(e Event) bool { return e.Kind == EventFailed && e.Member.ID == c.Local().ID })
	waitForEvent(t, subC, bound, func(e Event) bool { return e.Kind == EventFailed && e.Member.ID == a.Local().ID })
	waitForViews(t, []*Membership{a, b}, a, b)
	waitForViews(t, []*Membership{c}, c)
	require.Positive(t, cut.Dropped())
}
