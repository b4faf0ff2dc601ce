package directory

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/ring"
)

// A silo that stays silent for longer than a directory call's whole time
// (CallTimeout, retries included) must still be asked until it answers:
// under load a silo's goroutines can be starved for seconds, and the
// owner that gave up after one call's time never learnt of the silo's
// activation, so the duplicate beside it served for good.
//
// Each refused try is followed by a pause of at least 5 ms, so
// silentTries refusals take at least twice the call time below.
const (
	silentCallTimeout = 30 * time.Millisecond
	silentTries       = 12
)

func newSilentCluster(t *testing.T, ids ...string) *fakeCluster {
	return newClusterTimingOut(t, silentCallTimeout, ids...)
}

// newClusterTimingOut returns a cluster whose directories' calls time out
// after callTimeout.
func newClusterTimingOut(t *testing.T, callTimeout time.Duration, ids ...string) *fakeCluster {
	c := &fakeCluster{t: t, silos: make(map[string]*fakeSilo), down: make(map[string]bool), refused: make(map[string]int),
		gates: make(map[string]chan struct{}), callTimeout: callTimeout, downMethod: make(map[string]string)}
	for _, id := range ids {
		c.add(id, 1)
	}
	c.setView()
	return c
}

// setDown makes silo's partition refuse (down) or answer requests.
func (c *fakeCluster) setDown(silo string, down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down[silo] = down
}

// waitRefused waits until silo refused n requests in all.
func (c *fakeCluster) waitRefused(silo string, n int, why string) {
	c.t.Helper()
	require.Eventually(c.t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.refused[silo] >= n },
		10*time.Second, time.Millisecond, why)
}

func deactivated(s *fakeSilo, id actor.GrainID) bool {
	s.host.mu.Lock()
	defer s.host.mu.Unlock()
	return slices.Contains(s.host.deactivated, id)
}

func TestASiloBackFromAFalseDeathIsAskedWhatItHostsPastTheCallTimeout(t *testing.T) {
	c := newSilentCluster(t, "a", "b", "c")
	a, b, cc := c.all()[0], c.all()[1], c.all()[2]
	id := grainsOwnedBy("a", 1, "a", "b", "c")[0] // owned by a, hosted on b
	require.Empty(t, register(t, b, id))
	noB := without(c.view(), nil, "b")
	a.dir.SetView(noB)
	cc.dir.SetView(noB)
	require.Empty(t, register(t, cc, id), "with b's entry dropped, c activates the grain again: a duplicate")

	c.setDown("b", true)
	back := c.view()
	a.dir.SetView(back)
	cc.dir.SetView(back)
	c.waitRefused("b", silentTries, "a asks b what it hosts past its call time")
	assert.GreaterOrEqual(t, a.dir.Stats().Asking, int64(1), "a asks b, round after round")
	c.setDown("b", false)
	require.Eventually(t, func() bool { return deactivated(b, id) }, 10*time.Second, time.Millisecond,
		"b's duplicate is told to deactivate once b answers")
	require.Eventually(t, func() bool { return a.dir.Stats().Asking == 0 }, 10*time.Second, time.Millisecond,
		"the request ends with the answer")
	assert.EqualValues(t, 1, a.dir.Stats().Conflicts)
}

func TestARebuildAsksASilentSiloPastTheCallTimeout(t *testing.T) {
	c := newSilentCluster(t, "a", "b", "c")
	a, cc := c.all()[0], c.all()[2]
	id := grainOwnedWithout(t, "b", "a", "a", "b", "c")
	require.Empty(t, register(t, cc, id), "c's activation wins at b")
	c.setDown("c", true)
	c.killUnseenBy("b", "c")
	require.Eventually(t, func() bool { return a.dir.Stats().Held == 0 }, 10*time.Second, time.Millisecond,
		"the rebuild ends without c's answer")
	require.Empty(t, register(t, a, id), "with c's entry unknown, a activates the grain again: a duplicate")
	c.waitRefused("c", silentTries, "a asks c what it hosts past its call time")
	c.setDown("c", false)
	cc.dir.SetView(c.view())
	require.Eventually(t, func() bool { return deactivated(a, id) || deactivated(cc, id) }, 10*time.Second, time.Millisecond,
		"one of the two is told to deactivate once c answers")
	assert.EqualValues(t, 1, a.dir.Stats().Conflicts)
}

// A duplicate's silo that is silent past the call time is still told to
// deactivate it once it answers.
func TestADuplicateIsToldToDeactivatePastTheCallTimeout(t *testing.T) {
	c := newSilentCluster(t, "a", "b", "c")
	a, b := c.all()[0], c.all()[1]
	id := grainsOwnedBy("a", 1, "a", "b", "c")[0]
	duplicatesOnB(t, c, []actor.GrainID{id})
	c.waitRefused("b", silentTries, "a tells b to deactivate past its call time")
	assert.EqualValues(t, 1, a.dir.Stats().Conflicts, "a found the duplicate")
	assert.False(t, deactivated(b, id))
	c.mu.Lock()
	delete(c.downMethod, "b")
	c.mu.Unlock()
	require.Eventually(t, func() bool { return deactivated(b, id) }, 10*time.Second, time.Millisecond,
		"b deactivates its duplicate once it answers")
}

// duplicatesOnB makes each of ids, grains a owns, a duplicate on b that a
// finds: b registers them, a and c take b for dead and c registers them
// again, and then b, which answers what it hosts and refuses to
// deactivate anything, is in their views again.
func duplicatesOnB(t *testing.T, c *fakeCluster, ids []actor.GrainID) {
	t.Helper()
	a, b, cc := c.all()[0], c.all()[1], c.all()[2]
	for _, id := range ids {
		require.Empty(t, register(t, b, id))
	}
	noB := without(c.view(), nil, "b")
	a.dir.SetView(noB)
	cc.dir.SetView(noB)
	for _, id := range ids {
		require.Empty(t, register(t, cc, id), "with b's entry dropped, c activates the grain again: a duplicate")
	}
	c.mu.Lock()
	c.downMethod["b"] = "Deactivate"
	c.mu.Unlock()
	back := c.view()
	a.dir.SetView(back)
	cc.dir.SetView(back)
}

// An answer that comes after the range moved on goes to the range's new
// owner: that silo took the asker's handoff, which lacked the silent
// silo's activation, for all there was, and placed the grain again.
func TestALateAnswerGoesOnToTheRangesNewOwner(t *testing.T) {
	c := newSilentCluster(t, "a", "b", "c")
	a, cc := c.all()[0], c.all()[2]
	// A grain b owns, a owns once b is gone, and d once it joins.
	var id actor.GrainID
	withD := ring.New([]ring.Silo{{ID: "a", Generation: 1}, {ID: "c", Generation: 1}, {ID: "d", Generation: 1}}, 0)
	withoutB := ring.New([]ring.Silo{{ID: "a", Generation: 1}, {ID: "c", Generation: 1}}, 0)
	for _, g := range grainsOwnedBy("b", 200, "a", "b", "c") {
		o1, _ := withoutB.OwnerOf(g)
		o2, _ := withD.OwnerOf(g)
		if o1.ID == "a" && o2.ID == "d" {
			id = g
			break
		}
	}
	require.NotEmpty(t, id.Key)
	require.Empty(t, register(t, cc, id), "c's activation wins at b")
	c.setDown("c", true)
	c.killUnseenBy("b", "c")
	require.Eventually(t, func() bool { return a.dir.Stats().Held == 0 && a.dir.Stats().Asking == 1 }, 10*time.Second, time.Millisecond,
		"the rebuild ends without c's answer, and a goes on asking")

	// d joins and takes the grain's range from a, and places the grain;
	// c, starved, sees none of it.
	d := c.add("d", 1)
	for _, v := range []cluster.View{c.view("d"), c.view()} {
		for _, s := range c.all() {
			if s != cc {
				s.dir.SetView(v)
			}
		}
	}
	require.Eventually(t, func() bool { return d.dir.Stats().Held == 0 }, 10*time.Second, time.Millisecond, "d takes the range")
	require.Empty(t, register(t, d, id), "with c's entry unknown, d activates the grain again: a duplicate")

	c.setDown("c", false)
	require.Eventually(t, func() bool { return deactivated(d, id) || deactivated(cc, id) }, 10*time.Second, time.Millisecond,
		"a hands c's late answer on to d, whose merge tells one of the two to deactivate")
	assert.EqualValues(t, 1, d.dir.Stats().Conflicts)
	assert.Zero(t, a.dir.Stats().Conflicts)
}

// A silo that a false death cost a range hands it back, with what it
// registered there meanwhile, until the owner takes it: the owner held
// nothing (its own view never lost the range) and would never rebuild it,
// so the handoff is all that can bring the duplicate to its merge.
func TestAHandoffBackToASiloBackFromAFalseDeathGoesOnPastTheCallTimeout(t *testing.T) {
	c := newSilentCluster(t, "a", "b", "c")
	a, b := c.all()[0], c.all()[1]
	id := grainOwnedWithout(t, "b", "a", "a", "b", "c")
	require.Empty(t, register(t, b, id), "b owns the grain and hosts it")

	// a alone takes b for dead, and activates the grain again.
	noB := without(c.view(), nil, "b")
	a.dir.SetView(noB)
	require.Eventually(t, func() bool { return a.dir.Stats().Held == 0 }, 10*time.Second, time.Millisecond, "a rebuilds b's range")
	require.Empty(t, register(t, a, id), "with b's entry dropped, a activates the grain again: a duplicate")

	// b is back in a's view, and takes no handoff for a while.
	c.mu.Lock()
	c.downMethod["b"] = "Handoff"
	c.mu.Unlock()
	a.dir.SetView(c.view())
	c.waitRefused("b", silentTries, "a hands the range back to b past its call time")
	c.mu.Lock()
	delete(c.downMethod, "b")
	c.mu.Unlock()
	require.Eventually(t, func() bool { return deactivated(a, id) }, 10*time.Second, time.Millisecond,
		"b merges a's entry and tells a's duplicate to deactivate")
	assert.EqualValues(t, 1, b.dir.Stats().Conflicts)
}

// grainOwnedWithout returns a grain that owner owns in ids, and heir owns
// in ids without owner.
func grainOwnedWithout(t *testing.T, owner, heir string, ids ...string) actor.GrainID {
	t.Helper()
	var rest []ring.Silo
	for _, id := range ids {
		if id != owner {
			rest = append(rest, ring.Silo{ID: id, Generation: 1})
		}
	}
	without := ring.New(rest, 0)
	for _, g := range grainsOwnedBy(owner, 50, ids...) {
		if o, _ := without.OwnerOf(g); o.ID == heir {
			return g
		}
	}
	t.Fatalf("no grain of %s passes to %s", owner, heir)
	return actor.GrainID{}
}

// The duplicates a silo is to deactivate are told it by one asker, however
// many there are: after a healed partition there can be thousands, and an
// asker each would hold a goroutine and a call apiece against a silo that
// is already slow to answer.
func TestTheDuplicatesOfOneSiloAreToldItByOneAsker(t *testing.T) {
	const n = 40
	c := newSilentCluster(t, "a", "b", "c")
	a, b := c.all()[0], c.all()[1]
	ids := grainsOwnedBy("a", n, "a", "b", "c")
	duplicatesOnB(t, c, ids)
	c.waitRefused("b", 3*n, "a tells b to deactivate its duplicates, round after round")
	assert.EqualValues(t, n, a.dir.Stats().Conflicts, "a found every duplicate")
	assert.EqualValues(t, 1, a.dir.Stats().Asking, "one asker tells b all of them")
	c.mu.Lock()
	delete(c.downMethod, "b")
	c.mu.Unlock()
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if !deactivated(b, id) {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "b deactivates every duplicate once it answers")
	require.Eventually(t, func() bool { return a.dir.Stats().Asking == 0 }, 10*time.Second, time.Millisecond,
		"the asker ends with the last answer")
}

// One duplicate whose deactivation is slow to be answered holds up no other
// told to the same silo: each is sent as soon as it is queued, not in
// rounds that wait for their slowest call (here up to its time out, half a
// minute).
func TestASlowDeactivationHoldsUpNoOtherToTheSameSilo(t *testing.T) {
	c := newClusterTimingOut(t, time.Minute, "a", "b")
	a, b := c.all()[0], c.all()[1]
	slow, next := actor.GrainID{Type: "counter", Key: "slow"}, actor.GrainID{Type: "counter", Key: "next"}
	held := make(chan struct{})
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(held) }) }) // before the cluster closes
	c.mu.Lock()
	c.heldDeactivations = map[string]chan struct{}{slow.Key: held}
	c.mu.Unlock()
	onB := b.dir.self
	a.dir.deactivateDuplicate(slow, onB)
	require.Eventually(t, func() bool { return a.dir.Stats().Asking == 1 }, 10*time.Second, time.Millisecond)
	a.dir.deactivateDuplicate(next, onB)
	require.Eventually(t, func() bool { return deactivated(b, next) }, 10*time.Second, time.Millisecond,
		"the later duplicate is told while the slow one waits")
	assert.False(t, deactivated(b, slow))
	assert.EqualValues(t, 1, a.dir.Stats().Asking, "by the same asker")
	release.Do(func() { close(held) })
	require.Eventually(t, func() bool { return deactivated(b, slow) }, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return a.dir.Stats().Asking == 0 }, 10*time.Second, time.Millisecond)
}

// A duplicate on a silo's new generation is told to deactivate even while
// the asker for its old generation, which died silent, is still at work:
// that asker ends with its generation and drops what it still held, which
// must not include the new generation's duplicates.
func TestADuplicateOnARestartedSiloOutlivesTheAskerOfItsOldGeneration(t *testing.T) {
	c := newSilentCluster(t, "a", "b")
	a := c.all()[0]
	old, fresh := actor.GrainID{Type: "counter", Key: "old"}, actor.GrainID{Type: "counter", Key: "fresh"}
	c.mu.Lock()
	c.downMethod["b"] = "Deactivate"
	c.mu.Unlock()
	a.dir.deactivateDuplicate(old, Activation{Silo: "b", Generation: 1})
	c.waitRefused("b", 2, "a asks b's first generation, round after round")

	// b restarts under generation 2, still refusing deactivations for a while.
	b2 := c.add("b", 2)
	c.mu.Lock()
	c.order = slices.DeleteFunc(c.order, func(id string) bool { return id == "b" })
	c.order = append(c.order, "b")
	c.mu.Unlock()
	a.dir.SetView(c.view())
	c.mu.Lock()
	before := c.refused["b"]
	c.mu.Unlock()
	a.dir.deactivateDuplicate(fresh, b2.dir.self)
	// The first generation's asker ends with it after one more refused
	// round; the second's asks on, round after round.
	c.waitRefused("b", before+4, "a asks b's second generation, round after round")
	c.mu.Lock()
	delete(c.downMethod, "b")
	c.mu.Unlock()
	require.Eventually(t, func() bool { return deactivated(b2, fresh) }, 10*time.Second, time.Millisecond,
		"the new generation's duplicate is told once b answers")
}
