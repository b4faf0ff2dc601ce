package directory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A joiner whose previous owners never hand its ranges over (their views
// do not have it yet) rebuilds them once HandoffWait passes: every range
// the view made wait in one rebuild, each live silo asked once, not once
// per range.
func TestOverdueRangesOfOneViewAreRebuiltTogether(t *testing.T) {
	c := newFakeCluster(t, "a", "b")
	b := c.all()[1]
	ids := grainsOwnedBy("j", 8, "a", "b", "j")
	for _, id := range ids {
		require.Empty(t, register(t, b, id))
	}
	j := c.add("j", 1)
	j.dir.SetView(c.view("j"))
	j.dir.SetView(c.view()) // a and b never see j: no handoff comes
	held := j.dir.Stats().Held
	require.Greater(t, held, 2, "j waits on several ranges")
	require.Eventually(t, func() bool { return j.dir.Stats().Held == 0 }, 10*time.Second, time.Millisecond,
		"the ranges are rebuilt after HandoffWait")
	assert.Equal(t, 1, c.servedCount("a", "Hosted"), "a is asked once for %d ranges", held)
	assert.Equal(t, 1, c.servedCount("b", "Hosted"), "b is asked once for %d ranges", held)
	for _, id := range ids {
		assert.Equal(t, "b", locate(t, j, id, ""), "%s is found where it runs", id)
	}
}
