package directory

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/cluster"
)

// A silo cut off from the others, whose view had only itself, heals. Its
// directory is settled on the healed view only once the ranges it gains
// from the live silos have been handed to it and it has handed over what
// it recorded during the split and no longer owns: before that, a fenced
// silo must not serve again (silo/fence.go).
func TestADirectoryIsSettledOnAHealedViewOnceItsHandoffsAreDone(t *testing.T) {
	c := newFakeCluster(t, "a", "b", "c")
	a, b, cc := c.all()[0], c.all()[1], c.all()[2]
	require.True(t, cc.dir.Settled(0))

	without := func(ids ...string) cluster.View {
		v := c.view()
		v.Members = slices.DeleteFunc(slices.Clone(v.Members), func(m cluster.Member) bool { return slices.Contains(ids, m.ID) })
		return v
	}
	majority, alone := without("c"), without("a", "b")
	a.dir.SetView(majority)
	b.dir.SetView(majority)
	cc.dir.SetView(alone)
	require.Eventually(t, func() bool { return cc.dir.Settled(alone.Version) }, 10*time.Second, time.Millisecond,
		"alone, c owns every range, and has nobody to wait for")
	// What c recorded alone, in a range a owns in the healed ring.
	id := grainsOwnedBy("a", 1, "a", "b", "c")[0]
	require.Empty(t, register(t, cc, id))

	c.mu.Lock()
	c.down["a"] = true // c's handoff to a cannot land yet
	c.mu.Unlock()
	healed := c.view()
	cc.dir.SetView(healed)
	assert.False(t, cc.dir.Settled(healed.Version), "c holds the ranges it gains from a and b")
	assert.False(t, cc.dir.Settled(healed.Version+1), "nor is it settled on a view it has not taken")
	a.dir.SetView(healed)
	b.dir.SetView(healed)
	require.Eventually(t, func() bool { return cc.dir.Stats().Held == 0 }, 10*time.Second, time.Millisecond,
		"a and b hand c its ranges")
	assert.False(t, cc.dir.Settled(healed.Version), "c's own handoff to a is still on its way")

	c.mu.Lock()
	c.down["a"] = false
	c.mu.Unlock()
	require.Eventually(t, func() bool { return cc.dir.Settled(healed.Version) }, 10*time.Second, time.Millisecond)
	assert.Equal(t, "c", locate(t, a, id, ""), "a has c's entry")
}
