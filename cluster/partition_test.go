package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/gossipcut"
)

// startCutSilos starts n silos that gossip through cut, each given every
// other's gossip address as a seed once it runs, and waits until every view
// shows all of them.
func startCutSilos(t testing.TB, cut *gossipcut.Cut, n int, optFns ...Option) []*Membership {
	t.Helper()
	var ms []*Membership
	for i := range n {
		var seeds []string
		for _, m := range ms {
			seeds = append(seeds, m.GossipAddress())
		}
		ms = append(ms, startSiloIn(t, gossipcut.NewContext(context.Background(), cut), siloOptions(fmt.Sprintf("silo-%d", i), seeds...), optFns...))
	}
	waitForViews(t, ms, ms...)
	return ms
}

// startSiloIn is startSilo with a context of the test's own (a Cut).
func startSiloIn(t testing.TB, ctx context.Context, opts Options, optFns ...Option) *Membership {
	t.Helper()
	m, err := New(opts, append([]Option{WithLogger(discard)}, optFns...)...)
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

// oneView reports whether every silo's view shows exactly the silos ms.
func oneView(ms []*Membership) bool {
	want := ids(ms)
	for _, m := range ms {
		if !slices.Equal(want, viewIDs(m.View())) {
			return false
		}
	}
	return true
}

// healBound is how long after a heal the test accepts before the views
// are one. A rejoin round and a few gossip rounds make it (docs/cluster.md);
// ten rounds, and the failure detection time for a false suspicion that a
// loaded machine adds in the meantime, leave room.
func healBound(t Timings) time.Duration { return 10*t.RejoinInterval + detectionBound(t, 3) }

// cutAndHeal cuts {a, b} from {c}, waits until each side sees the other
// failed, heals, and returns how long the views took to become one.
func cutAndHeal(t *testing.T, cut *gossipcut.Cut, ms []*Membership) time.Duration {
	t.Helper()
	a, b, c := ms[0], ms[1], ms[2]
	cut.Partition(gossipAddresses(a, b), gossipAddresses(c))
	bound := detectionBound(a.opts.Timings, 3)
	for _, m := range []*Membership{a, b} {
		require.Eventually(t, func() bool { return slices.Equal(ids([]*Membership{a, b}), viewIDs(m.View())) },
			bound, time.Millisecond, "%s never saw c fail: %v", m.Local().ID, viewIDs(m.View()))
	}
	require.Eventually(t, func() bool { return slices.Equal([]string{c.Local().ID}, viewIDs(c.View())) },
		bound, time.Millisecond, "c never saw a and b fail: %v", viewIDs(c.View()))

	cut.Heal()
	healed := time.Now()
	require.Eventually(t, func() bool { return oneView(ms) }, healBound(a.opts.Timings), time.Millisecond,
		"no single view %v after the heal", healBound(a.opts.Timings))
	return time.Since(healed)
}

func TestAHealedPartitionBecomesOneViewAgain(t *testing.T) {
	cut := gossipcut.New()
	logger, logs := newRecorder()
	ms := startCutSilos(t, cut, 3, WithLogger(logger))
	took := cutAndHeal(t, cut, ms)
	t.Logf("one view %v after the heal (RejoinInterval %v)", took, ms[0].opts.Timings.RejoinInterval)

	// c dialled a and b every round of the cut; it says it rejoined them
	// once each, at Info, and its failed dials not at all above Debug.
	var rejoined []string
	for _, r := range logs.find(func(r logRecord) bool { return r.attrs["silo"] == "silo-2" && r.level >= slog.LevelInfo }) {
		require.NotContains(t, r.message, "rejoin dial", "a failed dial logged at %v", r.level)
		if r.message == "cluster: rejoined a member seen failed" {
			rejoined = append(rejoined, r.attrs["member"])
		}
	}
	slices.Sort(rejoined)
	// A false suspicion on a loaded machine may add a rejoin: at least
	// one of each, and never one per dial.
	require.Subset(t, rejoined, []string{"silo-0", "silo-1"})
	require.Less(t, len(rejoined), 4, "%v", rejoined)
}

func TestAFlappingPartitionHealsEveryTime(t *testing.T) {
	cut := gossipcut.New()
	ms := startCutSilos(t, cut, 3)
	for i := range 4 {
		took := cutAndHeal(t, cut, ms)
		t.Logf("flap %d: one view %v after the heal", i, took)
	}
	// A cut shorter than failure detection leaves nothing to heal.
	cut.Partition(gossipAddresses(ms[0], ms[1]), gossipAddresses(ms[2]))
	cut.Heal()
	require.Eventually(t, func() bool { return oneView(ms) }, healBound(ms[0].opts.Timings), time.Millisecond)
}
