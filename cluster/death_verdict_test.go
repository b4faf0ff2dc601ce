package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/gossipcut"
)

// A silo the others saw fail, while it saw nothing wrong with them (here
// its failure detector is slower than theirs, as a starved silo's
// verdicts come late), hears from the first probe of its that reaches
// them that their views lost it: a death verdict, naming who gave it. The
// member then counts as saying so, until it takes the silo back and
// answers its probes again.
func TestASiloHearsThatTheOthersSawItFail(t *testing.T) {
	cut := gossipcut.New()
	ctx := gossipcut.NewContext(context.Background(), cut)
	// The others neither gossip to the silo they lost nor dial it again,
	// so that nothing but its own probe tells it.
	quick := partitionTimings()
	quick.GossipToTheDeadTime = time.Nanosecond
	quick.RejoinInterval, quick.RejoinWindow = time.Hour, time.Hour
	a := startSiloIn(t, ctx, withTimings(siloOptions("silo-a"), quick))
	b := startSiloIn(t, ctx, withTimings(siloOptions("silo-b", a.GossipAddress()), quick))
	// The slow silo probes every 4 s, finding a member unreachable after
	// two silent rounds; the others declare it dead within about a second
	// of the cut.
	slow := quick
	slow.ProbeInterval, slow.ProbeTimeout = 4*time.Second, time.Second
	slow.PushPullInterval = time.Hour
	c := startSiloIn(t, ctx, withTimings(siloOptions("silo-c", a.GossipAddress()), slow))
	waitForViews(t, []*Membership{a, b, c}, a, b, c)
	// A verdict needs a member that answered a probe before.
	require.Eventually(t, func() bool {
		c.probes.mu.Lock()
		defer c.probes.mu.Unlock()
		for _, id := range []string{"silo-a", "silo-b"} {
			if st := c.probes.mu.members[id]; st == nil || st.lastAck == 0 {
				return false
			}
		}
		return true
	}, 3*slow.ProbeInterval, 10*time.Millisecond, "the slow silo's probes were never answered")
	_, subA := a.Subscribe()
	defer subA.Close()
	_, subB := b.Subscribe()
	defer subB.Close()

	cutAt := time.Now()
	cut.Partition(gossipAddresses(a, b), gossipAddresses(c))
	waitForEvent(t, subA, detectionBound(quick, 3), departureOf(c.Local().ID))
	waitForEvent(t, subB, detectionBound(quick, 3), departureOf(c.Local().ID))
	// The cut lasts a while past the others' verdict, which the verdict's
	// age must then cover.
	const aged = 500 * time.Millisecond
	time.Sleep(aged)
	cut.Heal()
	select {
	case d := <-c.DeathVerdicts():
		assert.Contains(t, []string{a.Local().ID, b.Local().ID}, d.By, "the declarer is one of the silos that lost it")
		r := c.Reachability()
		i := slices.IndexFunc(r, func(r Reachability) bool { return r.ID == d.By })
		require.GreaterOrEqual(t, i, 0, "the declarer is in the view")
		assert.True(t, r[i].SaysDead, "the declarer says so: %+v", r[i])
		// The declarer lost it before the wait; the probe it answered
		// went out after the heal.
		assert.GreaterOrEqual(t, d.Age, aged, "the verdict's age covers the cut")
		assert.LessOrEqual(t, d.Age, 2*time.Since(cutAt), "the verdict's age counts from the cut at the most")
	case <-time.After(3 * slow.ProbeInterval):
		t.Fatalf("the silo never heard that the others saw it fail: %v", c.Reachability())
	}
	select {
	case d := <-a.DeathVerdicts():
		t.Fatalf("a silo the others never lost has a verdict from %s", d.By)
	default:
	}

	// Once the others have taken it back, they answer its probes again.
	c.mu.Lock()
	ml := c.mu.ml
	c.mu.Unlock()
	c.rejoins.Add(1)
	c.rejoin(ml, a.GossipAddress())
	waitForViews(t, []*Membership{a, b, c}, a, b, c)
	require.Eventually(t, func() bool {
		for _, r := range c.Reachability() {
			if r.SaysDead || !r.Reachable {
				return false
			}
		}
		return true
	}, 3*slow.ProbeInterval+waitFor, 10*time.Millisecond, "still said dead: %v", c.Reachability())
}

// A cut that each side sees gives no verdict across it once it heals:
// each view lost the other, and the fences and the directory's merge are
// what resolve a partition. A silo on the near side may hear one from its
// own side, which the far side's gossip of the deaths it saw, arriving
// with the heal, had lose it for a moment (memberlist takes a dead
// message at the incarnation it knows, until the silo refutes it): that
// loss is new, and its verdict's age says so. The cut lasts a second past
// the views' losses, so that a loss from before the heal would date from
// a second before it at least.
func TestAHealedCutGivesNoVerdictAcrossIt(t *testing.T) {
	cut := gossipcut.New()
	ms := startCutSilos(t, cut, 3)
	a, c := ms[0], ms[2]
	_, subA := a.Subscribe()
	defer subA.Close()
	_, subC := c.Subscribe()
	defer subC.Close()
	near := []*Membership{a, ms[1]}
	cut.Partition(gossipAddresses(near...), gossipAddresses(c))
	bound := detectionBound(a.opts.Timings, 3)
	waitForEvent(t, subA, bound, departureOf(c.Local().ID))
	waitForEvent(t, subC, bound, departureOf(a.Local().ID))
	const held = time.Second
	time.Sleep(held)
	cut.Heal()
	healedAt := time.Now()
	waitForViews(t, ms, ms...)
	// A few probe rounds of the healed cluster, in which a late verdict
	// would come.
	deadline := time.After(5 * a.opts.Timings.ProbeInterval)
	side := func(m *Membership) bool { return slices.Contains(near, m) }
	byID := map[string]*Membership{}
	for _, m := range ms {
		byID[m.Local().ID] = m
	}
	for {
		for _, m := range ms {
			select {
			case d := <-m.DeathVerdicts():
				require.Equal(t, side(m), side(byID[d.By]), "%s has a verdict from %s, across the cut", m.Local().ID, d.By)
				// One read during the cut is a false death of a loaded
				// machine, not the heal's.
				if d.At.After(healedAt) {
					assert.Less(t, d.Age, d.At.Sub(healedAt)+held,
						"%s's verdict from %s dates from before the heal", m.Local().ID, d.By)
				}
			default:
			}
		}
		select {
		case <-deadline:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

func withTimings(o Options, t Timings) Options {
	o.Timings = t
	return o
}
