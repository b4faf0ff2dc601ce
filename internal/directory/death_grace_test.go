package directory

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/directory/directorypb"
	"github.com/granary-go/granary/internal/ring"
)

// newGraceCluster is a cluster of ids whose directories keep a lost
// silo's grains for grace, on a fake clock.
func newGraceCluster(t *testing.T, grace time.Duration, ids ...string) (*fakeCluster, *clock.Fake) {
	fake := clock.NewFake(time.Unix(1000, 0))
	c := &fakeCluster{t: t, silos: make(map[string]*fakeSilo), down: make(map[string]bool), refused: make(map[string]int),
		gates: make(map[string]chan struct{}), clock: fake, deathGrace: grace, callTimeout: 20 * time.Second}
	for _, id := range ids {
		c.add(id, 1)
	}
	c.setView()
	return c, fake
}

type lookup struct {
	silo   string
	placed bool
}

// locateLater starts a lookup of id at s and returns where its answer
// comes.
func locateLater(t *testing.T, s *fakeSilo, id actor.GrainID) <-chan lookup {
	out := make(chan lookup, 1)
	s.dir.Locate(id, "", func(silo string, placed bool, err error) {
		assert.NoError(t, err)
		out <- lookup{silo, placed}
	})
	return out
}

// answered waits for a lookup's answer.
func answered(t *testing.T, l <-chan lookup) lookup {
	t.Helper()
	select {
	case a := <-l:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("the lookup was not answered")
		return lookup{}
	}
}

// unanswered asserts that a lookup has no answer yet.
func unanswered(t *testing.T, l <-chan lookup, why string) {
	t.Helper()
	select {
	case a := <-l:
		t.Fatalf("%s, but the lookup was answered: %+v", why, a)
	default:
	}
}

// parkedAt is how many operations wait at s for a reclaim or a grace.
func parkedAt(s *fakeSilo) int {
	s.dir.mu.Lock()
	defer s.dir.mu.Unlock()
	return len(s.dir.mu.awaiting)
}

// A silo declared dead while it runs on (starved, it did not refute the
// suspicion in time) comes back within the grace: meanwhile its grain's
// owner places it nowhere else, its own lookup waiting and another silo's
// registration refused, and once the silo is back both find its
// activation. Without the grace the lookup placed the grain at once, a
// second activation beside the one still serving.
func TestAGrainOfASiloDeclaredDeadIsPlacedNowhereElseWithinTheGrace(t *testing.T) {
	const grace = time.Minute
	c, fake := newGraceCluster(t, grace, "a", "b", "c")
	a, b, cc := c.all()[0], c.all()[1], c.all()[2]
	id := grainsOwnedBy("a", 1, "a", "b", "c")[0] // owned by a, with or without b
	require.Empty(t, register(t, b, id))

	noB := without(c.view(), nil, "b")
	a.dir.SetView(noB)
	cc.dir.SetView(noB)
	require.Equal(t, 1, a.dir.Stats().Mourning, "a keeps b's grains for the grace")

	located := locateLater(t, a, id)
	registered := make(chan string, 1)
	cc.dir.Register(id, func(winner string, err error) {
		assert.NoError(t, err)
		registered <- winner
	})
	require.Eventually(t, func() bool { return c.servedCount("a", "Register") >= 2 && parkedAt(a) > 0 },
		10*time.Second, time.Millisecond, "c's registration is refused and a's own lookup waits")
	fake.Advance(grace / 2)
	unanswered(t, located, "the grace has not passed")

	back := c.view()
	a.dir.SetView(back)
	cc.dir.SetView(back)
	assert.Equal(t, lookup{"b", false}, answered(t, located), "a's lookup finds b's activation, placing nothing")
	select {
	case w := <-registered:
		assert.Equal(t, "b", w, "c learns b's activation")
	case <-time.After(10 * time.Second):
		t.Fatal("the registration was not answered")
	}
	assert.Zero(t, a.dir.Stats().Mourning, "b's return ends the grace")
	assert.Zero(t, a.dir.Stats().Conflicts, "no duplicate was made")
	b.host.mu.Lock()
	defer b.host.mu.Unlock()
	assert.Empty(t, b.host.deactivated)
}

// A silo that crashed does not come back: once the grace has passed, its
// entries are dropped and its grains placed again.
func TestAGrainOfACrashedSiloIsPlacedAgainOnceTheGraceHasPassed(t *testing.T) {
	const grace = time.Minute
	c, fake := newGraceCluster(t, grace, "a", "b", "c")
	a, b := c.all()[0], c.all()[1]
	id := grainsOwnedBy("a", 1, "a", "b", "c")[0]
	require.Empty(t, register(t, b, id))
	dropped := a.dir.Stats().Dropped

	c.kill("b")
	located := locateLater(t, a, id)
	require.Eventually(t, func() bool { return parkedAt(a) > 0 }, 10*time.Second, time.Millisecond, "a's lookup waits")
	fake.Advance(grace - time.Millisecond)
	unanswered(t, located, "the grace has not passed")
	assert.Equal(t, dropped, a.dir.Stats().Dropped, "b's entry stays for the grace")

	fake.Advance(time.Millisecond)
	got := answered(t, located)
	assert.True(t, got.placed, "the grain is placed again")
	assert.NotEqual(t, "b", got.silo)
	st := a.dir.Stats()
	assert.Zero(t, st.Mourning)
	assert.Greater(t, st.Dropped, dropped, "b's entry is dropped")
}

// No grace is kept for a silo that cannot be running its grains: one
// seen restarted (at once, or after it left the view) runs nothing of its
// old generation, and one that was shutting down unregistered what it ran.
func TestNoGraceIsKeptForASiloThatRunsNoneOfItsGrains(t *testing.T) {
	restarted := func(v cluster.View) cluster.View {
		v.Members = append([]cluster.Member(nil), v.Members...)
		for i := range v.Members {
			if v.Members[i].ID == "b" {
				v.Members[i].Generation = 2
			}
		}
		return v
	}
	for _, tc := range []struct {
		name  string
		views func(c *fakeCluster) []cluster.View
	}{
		{"restarted", func(c *fakeCluster) []cluster.View { return []cluster.View{restarted(c.view())} }},
		{"restarted after it left", func(c *fakeCluster) []cluster.View {
			return []cluster.View{without(c.view(), nil, "b"), restarted(c.view())}
		}},
		{"shut down", func(c *fakeCluster) []cluster.View {
			return []cluster.View{c.viewWith(map[string]cluster.Status{"b": cluster.StatusShuttingDown}), without(c.view(), nil, "b")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newGraceCluster(t, time.Minute, "a", "b", "c")
			a, b := c.all()[0], c.all()[1]
			id := grainsOwnedBy("a", 1, "a", "b", "c")[0]
			require.Empty(t, register(t, b, id))
			for _, v := range tc.views(c) {
				a.dir.SetView(v)
			}
			assert.Zero(t, a.dir.Stats().Mourning)
			got := answered(t, locateLater(t, a, id))
			assert.True(t, got.placed, "the grain is placed again at once")
		})
	}
}

// A grain that the silo declared dead owned the entry of has no entry at
// its new owner (the rebuild asks the live silos, and the grain runs on
// the lost one): its lookup waits for the grace too, and finds the grain
// where it runs when its silo comes back.
func TestAGrainOwnedByASiloDeclaredDeadWaitsAtItsNewOwner(t *testing.T) {
	const grace = time.Minute
	c, fake := newGraceCluster(t, grace, "a", "b", "c")
	a, b, cc := c.all()[0], c.all()[1], c.all()[2]
	id := grainsOwnedBy("b", 1, "a", "b", "c")[0]
	require.Empty(t, register(t, b, id))

	noB := without(c.view(), nil, "b")
	a.dir.SetView(noB)
	cc.dir.SetView(noB)
	require.Eventually(t, func() bool { return a.dir.Stats().Held == 0 && cc.dir.Stats().Held == 0 },
		10*time.Second, time.Millisecond, "the ranges gained from b are rebuilt")
	owner, _ := ring.New([]ring.Silo{{ID: "a", Generation: 1}, {ID: "c", Generation: 1}}, 0).OwnerOf(id)
	at := a
	if owner.ID == "c" {
		at = cc
	}
	located := locateLater(t, at, id)
	require.Eventually(t, func() bool { return parkedAt(at) > 0 }, 10*time.Second, time.Millisecond,
		"%s's lookup waits", owner.ID)
	fake.Advance(grace / 2)
	unanswered(t, located, "the grace has not passed")

	back := c.view()
	a.dir.SetView(back)
	cc.dir.SetView(back)
	assert.Equal(t, lookup{"b", false}, answered(t, located), "the lookup finds b's activation, placing nothing")
}

// An entry of a silo in its grace goes on with the range it is in: a
// silo that shuts down hands it to the range's new owner, which keeps it
// for the grace rather than dropping it as dead.
func TestAnEntryOfASiloDeclaredDeadIsHandedOnWithinTheGrace(t *testing.T) {
	c, _ := newGraceCluster(t, time.Minute, "a", "b", "c")
	a, b, cc := c.all()[0], c.all()[1], c.all()[2]
	id := grainsOwnedBy("a", 1, "a", "b", "c")[0]
	require.Empty(t, register(t, b, id))

	noB := without(c.view(), nil, "b")
	a.dir.SetView(noB)
	cc.dir.SetView(noB)
	leaving := without(c.viewWith(map[string]cluster.Status{"a": cluster.StatusShuttingDown}), nil, "b")
	received := cc.dir.Stats().HandoffsReceived
	a.dir.SetView(leaving)
	cc.dir.SetView(leaving)
	require.Eventually(t, func() bool {
		st := cc.dir.Stats()
		return st.HandoffsReceived > received && st.Held == 0
	}, 10*time.Second, time.Millisecond, "a hands its ranges to c")

	located := locateLater(t, cc, id)
	require.Eventually(t, func() bool { return parkedAt(cc) > 0 }, 10*time.Second, time.Millisecond, "c's lookup waits")
	back := c.viewWith(map[string]cluster.Status{"a": cluster.StatusShuttingDown})
	for _, s := range c.all() {
		s.dir.SetView(back)
	}
	assert.Equal(t, lookup{"b", false}, answered(t, located), "the lookup finds b's activation, placing nothing")
}

// A silo that flaps (declared dead, back, and declared dead again within
// one grace) gets a whole grace for its second death: the first one's
// timer does not end it.
func TestASecondDeathWaitsItsOwnGrace(t *testing.T) {
	const grace = time.Minute
	c, fake := newGraceCluster(t, grace, "a", "b", "c")
	a, b := c.all()[0], c.all()[1]
	id := grainsOwnedBy("a", 1, "a", "b", "c")[0]
	require.Empty(t, register(t, b, id))

	a.dir.SetView(without(c.view(), nil, "b"))
	fake.Advance(grace / 4)
	a.dir.SetView(c.view()) // back
	require.Zero(t, a.dir.Stats().Mourning)
	fake.Advance(grace / 4)
	a.dir.SetView(without(c.view(), nil, "b")) // and declared dead again
	located := locateLater(t, a, id)
	require.Eventually(t, func() bool { return parkedAt(a) > 0 }, 10*time.Second, time.Millisecond, "a's lookup waits")
	fake.Advance(grace / 2) // the first grace's timer fires
	unanswered(t, located, "the second grace has not passed")
	assert.Equal(t, 1, a.dir.Stats().Mourning)

	fake.Advance(grace / 2)
	assert.True(t, answered(t, located).placed, "once it has, the grain is placed again")
}

// joinerWithinAGrace plays a join within a death's grace: silo b, which
// owns and runs grain id, leaves a's view (declared dead, it runs on); a
// gains b's range, and j, joining, gains it from a before the grace has
// passed. j never saw b.
func joinerWithinAGrace(t *testing.T, grace time.Duration) (c *fakeCluster, fake *clock.Fake, j *fakeSilo, id actor.GrainID) {
	t.Helper()
	c, fake = newGraceCluster(t, grace, "a", "b")
	a, b := c.all()[0], c.all()[1]
	j = c.add("j", 1)
	withJ := ring.New([]ring.Silo{{ID: "a", Generation: 1}, {ID: "j", Generation: 1}}, 0)
	for _, g := range grainsOwnedBy("b", 50, "a", "b") {
		if o, _ := withJ.OwnerOf(g); o.ID == "j" {
			id = g
			break
		}
	}
	require.NotZero(t, id, "a grain b owns that j will")
	require.Empty(t, register(t, b, id))

	a.dir.SetView(without(c.view(), nil, "b", "j"))
	require.Eventually(t, func() bool { return a.dir.Stats().Held == 0 }, 10*time.Second, time.Millisecond, "a rebuilds b's range")
	require.Equal(t, 1, a.dir.Stats().Mourning)
	fake.Advance(grace / 2) // j joins half way through the grace

	joined := without(c.view(), nil, "b")
	j.dir.SetView(joined)
	a.dir.SetView(joined)
	require.Eventually(t, func() bool { st := j.dir.Stats(); return st.HandoffsReceived > 0 && st.Held == 0 },
		10*time.Second, time.Millisecond, "a hands the range to j")
	return c, fake, j, id
}

// A handoff's graces are a peer's word: only a live sender's are taken;
// none outlasts this silo's own grace or covers more than the handoff
// hands; at most maxHandedGraces are kept at once; none is begun for this
// silo, a silo the view has, or one already dead here; and a silo whose
// grace is over by the time the handoff arrives is dead here, not unseen.
func TestHandedGracesAreBounded(t *testing.T) {
	const grace = time.Minute
	c, fake := newGraceCluster(t, grace, "a", "b", "c")
	a := c.all()[0]
	a.dir.SetView(without(c.view(), nil, "b"))
	require.Equal(t, 1, a.dir.Stats().Mourning)
	from := Activation{Silo: "c", Generation: 1}
	handed := []ring.Range{{First: 100, Last: 200}}
	mourning := func(silo string, gen int64, remaining time.Duration, ranges ...ring.Range) *directorypb.Mourning {
		return &directorypb.Mourning{Silo: &directorypb.Activation{Silo: silo, Generation: gen}, RemainingNanos: int64(remaining), Ranges: pbRanges(ranges)}
	}
	take := func(from Activation, in ...*directorypb.Mourning) map[Activation]*reclaiming {
		a.dir.mu.Lock()
		defer a.dir.mu.Unlock()
		return a.dir.takeGracesLocked(from, in, handed)
	}

	a.dir.mu.Lock()
	a.dir.mu.gone["gone-sender"] = 1
	a.dir.mu.Unlock()
	assert.Empty(t, take(Activation{Silo: "gone-sender", Generation: 1}, mourning("x", 1, time.Second)), "a sender a takes for dead")

	graces := take(from,
		mourning("a", 1, time.Second),           // this silo
		mourning("c", 1, time.Second),           // in a's view
		mourning("b", 1, time.Second),           // mourned by a already
		mourning("gone-sender", 1, time.Second), // dead here already
		mourning("over", 1, -1),                 // its grace over
		mourning("long", 1, 1<<62, ring.Range{First: 0, Last: 150}, ring.Range{First: 180, Last: 1 << 40}),
	)
	require.Len(t, graces, 1)
	w := graces[Activation{Silo: "long", Generation: 1}]
	require.NotNil(t, w)
	assert.Equal(t, fake.Now().Add(grace), w.until, "no longer than a's own grace")
	assert.Equal(t, []ring.Range{{First: 100, Last: 150}, {First: 180, Last: 200}}, w.ranges, "only what the handoff hands")
	a.dir.mu.Lock()
	assert.False(t, a.dir.liveLocked(Activation{Silo: "over", Generation: 1}), "a silo whose grace is over is dead, not unseen")
	a.dir.mu.Unlock()

	take(from, mourning("long", 1, time.Second, ring.Range{First: 100, Last: 200}), mourning("long", 1, time.Second, ring.Range{First: 120, Last: 130}))
	assert.Equal(t, []ring.Range{{First: 100, Last: 200}}, w.ranges,
		"a range already waiting is not added again: the grace waits on [100, 200] once")

	var many []*directorypb.Mourning
	for i := range 2 * maxHandedGraces {
		many = append(many, mourning(fmt.Sprint("s", i), 1, time.Second))
	}
	more := take(from, many...)
	assert.Len(t, more, maxHandedGraces-1, "at most %d handed graces at once", maxHandedGraces)
	assert.Equal(t, 1+maxHandedGraces, a.dir.Stats().Mourning)
	a.dir.endGraces(graces)
	a.dir.endGraces(more)
	fake.Advance(grace)
	assert.Zero(t, a.dir.Stats().Mourning, "every grace ends")
}

// A grace's ranges, from a peer, are merged and intersected by a sweep:
// overlapping and touching ranges become one, the ends of the hash space
// included, and what lies in both lists is kept exactly.
func TestGraceRangesMergeAndIntersect(t *testing.T) {
	const top = ^uint64(0)
	r := func(first, last uint64) ring.Range { return ring.Range{First: first, Last: last} }
	assert.Equal(t, []ring.Range{r(0, 20), r(30, top)},
		merged([]ring.Range{r(30, 40), r(5, 10), r(0, 4), r(8, 20), r(41, top), r(50, 60)}))
	assert.Equal(t, []ring.Range{r(10, 10), r(15, 20), r(top, top)},
		intersect([]ring.Range{r(0, 10), r(15, 20), r(top-5, top)}, []ring.Range{r(10, 17), r(17, 30), r(top, top)}))
	assert.Empty(t, intersect([]ring.Range{r(0, 9)}, []ring.Range{r(10, 20)}))
}

// rebuildWithinAGrace plays a view that skips the one between: a loses b
// (declared dead, it runs on, owning and running grain id) and sees j
// active in one view, so it hands j none of b's range, which was never
// a's. j, which never saw b, waits for a handoff that does not come and
// rebuilds the range after its handoff wait (200 ms into the grace).
func rebuildWithinAGrace(t *testing.T, grace time.Duration) (c *fakeCluster, fake *clock.Fake, j *fakeSilo, id actor.GrainID) {
	t.Helper()
	c, fake = newGraceCluster(t, grace, "a", "b")
	a := c.all()[0]
	j = c.add("j", 1)
	withJ := ring.New([]ring.Silo{{ID: "a", Generation: 1}, {ID: "j", Generation: 1}}, 0)
	for _, g := range grainsOwnedBy("b", 50, "a", "b") {
		if o, _ := withJ.OwnerOf(g); o.ID == "j" {
			id = g
			break
		}
	}
	require.NotZero(t, id, "a grain b owns that j will")
	require.Empty(t, register(t, c.all()[1], id))

	j.dir.SetView(without(c.view("j"), nil, "b")) // j joins after b was lost
	a.dir.SetView(without(c.view(), nil, "b"))    // a loses b and sees j active in one view
	require.Equal(t, 1, a.dir.Stats().Mourning)
	j.dir.SetView(without(c.view(), nil, "b"))
	require.Eventually(t, func() bool { return j.dir.Stats().HandoffsReceived > 0 }, 10*time.Second, time.Millisecond,
		"a hands j its own ranges")
	require.NotZero(t, j.dir.Stats().Held, "j holds b's range, which a never hands")
	fake.Advance(200 * time.Millisecond) // j's handoff wait
	require.Eventually(t, func() bool { return j.dir.Stats().Held == 0 }, 10*time.Second, time.Millisecond, "j rebuilds the range")
	return c, fake, j, id
}

// graceRoutes are the two ways a silo that never saw a lost one learns
// its grace, and how much of the grace is left when it has.
var graceRoutes = []struct {
	name  string
	setup func(t *testing.T, grace time.Duration) (*fakeCluster, *clock.Fake, *fakeSilo, actor.GrainID)
	left  func(grace time.Duration) time.Duration
}{
	{"handed with the range", joinerWithinAGrace, func(g time.Duration) time.Duration { return g / 2 }},
	{"told by a rebuild's answer", rebuildWithinAGrace, func(g time.Duration) time.Duration { return g - 200*time.Millisecond }},
}

// A silo that gains a range within a grace and never saw the lost silo
// learns the grace, from the handoff or from the silos its rebuild asks:
// it keeps the grain with no entry waiting for the rest of the grace, and
// when the lost silo comes back asks it what it hosts and finds the grain
// there. Without the grace in the handoff or the answer, j placed the
// grain at once, beside b's activation.
func TestALearntGraceKeepsTheGrainWaitingForItsSilo(t *testing.T) {
	const grace = time.Minute
	for _, route := range graceRoutes {
		t.Run(route.name, func(t *testing.T) {
			c, fake, j, id := route.setup(t, grace)
			assert.Equal(t, 1, j.dir.Stats().Mourning, "j keeps the grace it learnt")
			located := locateLater(t, j, id)
			require.Eventually(t, func() bool { return parkedAt(j) > 0 }, 10*time.Second, time.Millisecond, "j's lookup waits")
			fake.Advance(route.left(grace) - time.Millisecond)
			unanswered(t, located, "the grace has not passed")

			c.setView() // b is back, in every view
			assert.Equal(t, lookup{"b", false}, answered(t, located), "j finds b's activation, placing nothing")
			assert.Zero(t, j.dir.Stats().Mourning)
			assert.Zero(t, j.dir.Stats().Conflicts)
		})
	}
}

// A learnt grace ends when the teller's would: a silo that does not come
// back has its grains placed again once it has passed, not later.
func TestALearntGraceEndsWhenTheTellersWould(t *testing.T) {
	const grace = time.Minute
	for _, route := range graceRoutes {
		t.Run(route.name, func(t *testing.T) {
			_, fake, j, id := route.setup(t, grace)
			located := locateLater(t, j, id)
			require.Eventually(t, func() bool { return parkedAt(j) > 0 }, 10*time.Second, time.Millisecond, "j's lookup waits")
			fake.Advance(route.left(grace) - time.Millisecond)
			unanswered(t, located, "the grace has not passed")
			fake.Advance(time.Millisecond)
			got := answered(t, located)
			assert.True(t, got.placed, "once the teller's grace has passed, the grain is placed again")
			assert.NotEqual(t, "b", got.silo)
			assert.Zero(t, j.dir.Stats().Mourning)
		})
	}
}
