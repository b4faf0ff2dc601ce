package directory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An activation registered with a silo that owned its grain only by views
// that had lost the grain's real owner (a false death) is known to no
// owner once that silo dies: the owners rebuild the ranges the dead silo
// owned by their own views, and the grain's range was never among them.
// The silo that hosts such an activation registers it again with the
// grain's owner, and a duplicate loses there.
func TestAnActivationWhoseRegistrarDiesIsRegisteredAgainWithTheOwner(t *testing.T) {
	c := newFakeCluster(t, "a", "b", "c", "d")
	all := c.all()
	a, b, cc := all[0], all[1], all[2]
	id := grainOwnedWithout(t, "b", "a", "a", "b", "c", "d") // b owns it, and a without b
	require.Empty(t, register(t, b, id), "b owns the grain and hosts it")

	// a and c take b for dead; b and d do not.
	noB := without(c.view(), nil, "b")
	a.dir.SetView(noB)
	cc.dir.SetView(noB)
	require.Eventually(t, func() bool { return a.dir.Stats().Held == 0 }, 10*time.Second, time.Millisecond, "a rebuilds b's range")
	require.Empty(t, register(t, cc, id), "c's activation wins at a, a duplicate of b's")

	// a dies, and every view has b again.
	c.kill("a")
	require.Eventually(t, func() bool { return deactivated(cc, id) || deactivated(b, id) }, 10*time.Second, time.Millisecond,
		"c registers its activation again with b, and one of the two deactivates")
	assert.True(t, deactivated(cc, id), "the later one, c's, loses to b's entry")
	assert.Equal(t, "b", locate(t, cc, id, ""))
}
