package directory

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/cluster"
)

// A joining silo's own view can lag the others': they see it active and
// hand it the entries of its ranges while its directory still has it
// joining. A view that comes in between (it is still joining there) finds
// those entries owned by others and hands them back; the view that makes
// it active must then wait for them again, not take the ranges for handed
// over on the strength of the earlier handoff, or it serves them without
// the entries and places their grains a second time.
func TestAHandoffBeforeTheJoinersOwnViewIsNotLostToAViewInBetween(t *testing.T) {
	c := newFakeCluster(t, "a", "b")
	a, b := c.all()[0], c.all()[1]
	ids := grainsOwnedBy("j", 8, "a", "b", "j")
	for _, id := range ids {
		require.Empty(t, register(t, b, id))
	}
	j := c.add("j", 1)
	j.dir.SetView(c.viewWith(map[string]cluster.Status{"j": cluster.StatusJoining}))
	active := c.view()
	a.dir.SetView(active)
	b.dir.SetView(active)
	require.Eventually(t, func() bool { return j.dir.Stats().HandoffsReceived >= 2 }, 10*time.Second, time.Millisecond,
		"a and b hand j its ranges")
	j.dir.SetView(c.viewWith(map[string]cluster.Status{"j": cluster.StatusJoining}))
	j.dir.SetView(c.view())
	j.dir.mu.Lock()
	records := len(j.dir.mu.received)
	j.dir.mu.Unlock()
	assert.Zero(t, records, "the view that has j active ends the records of what came ahead of it")
	for _, id := range ids {
		where, found, err := j.dir.Find(context.Background(), id)
		require.NoError(t, err)
		assert.True(t, found, "%s keeps its entry", id)
		assert.Equal(t, "b", where, "%s", id)
	}
}
