package directory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
)

// A joiner whose previous owners never hand its ranges over (their views
// do not have it yet) rebuilds them once HandoffWait passes: every range
// the view made wait in one rebuild, each live silo asked once, not once
// per range.
func TestOverdueRangesOfOneViewAreRebuiltTogether(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	c := &fakeCluster{t: t, silos: make(map[string]*fakeSilo), down: make(map[string]bool), refused: make(map[string]int),
		gates: make(map[string]chan struct{}), clock: fake}
	c.add("a", 1)
	b := c.add("b", 1)
	c.setView()
	ids := grainsOwnedBy("j", 8, "a", "b", "j")
	for _, id := range ids {
		require.Empty(t, register(t, b, id))
	}
	j := c.add("j", 1)
	j.dir.SetView(c.view("j"))
	j.dir.SetView(c.view()) // a and b never see j: no handoff comes
	held := j.dir.Stats().Held
	require.Greater(t, held, 2, "j waits on several ranges")
	fake.Advance(j.dir.opts.HandoffWait)
	require.Eventually(t, func() bool { return j.dir.Stats().Held == 0 }, 10*time.Second, time.Millisecond,
		"the ranges are rebuilt once HandoffWait passed")
	for _, silo := range []string{"a", "b"} {
		asked := c.servedCount(silo, "Hosted")
		assert.Positive(t, asked, "%s is asked what it hosts", silo)
		// A try that outlived its response timeout on a loaded machine is
		// asked again; a rebuild per range asked once per range.
		assert.Less(t, asked, held, "%s is asked for the %d ranges together", silo, held)
	}
	for _, id := range ids {
		assert.Equal(t, "b", locate(t, j, id, ""), "%s is found where it runs", id)
	}
}

// A view's HandoffWait timer rebuilds only the holds that view made: a
// later view that makes the same ranges wait again (the silo went back to
// joining and came back) waits its own HandoffWait. Matched by range, the
// first timer cut the second wait short by as much as the first had run.
func TestAnEarlierViewsTimerDoesNotCutALaterWaitShort(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	c := &fakeCluster{t: t, silos: make(map[string]*fakeSilo), down: make(map[string]bool), refused: make(map[string]int),
		gates: make(map[string]chan struct{}), clock: fake}
	c.add("a", 1)
	c.add("b", 1)
	c.setView()
	j := c.add("j", 1)
	j.dir.SetView(c.view("j"))
	j.dir.SetView(c.view()) // a and b never see j: no handoff comes
	require.Positive(t, j.dir.Stats().Held)
	wait := j.dir.opts.HandoffWait
	fake.Advance(wait / 2)
	j.dir.SetView(c.view("j")) // j is joining again: its holds end
	require.Zero(t, j.dir.Stats().Held)
	j.dir.SetView(c.view()) // and active: the same ranges wait again
	fake.Advance(wait/2 + time.Millisecond)
	j.dir.mu.Lock()
	rebuilding := 0
	for _, h := range j.dir.mu.holds {
		if h.rebuilding {
			rebuilding++
		}
	}
	waiting := len(j.dir.mu.holds)
	j.dir.mu.Unlock()
	require.Positive(t, waiting)
	assert.Zero(t, rebuilding, "the first view's timer rebuilt none of the second view's %d holds", waiting)
	fake.Advance(wait / 2)
	require.Eventually(t, func() bool { return j.dir.Stats().Held == 0 }, 10*time.Second, time.Millisecond,
		"the second view's own timer rebuilds them")
}
