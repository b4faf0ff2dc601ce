package directory

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A silo back from a false death is in the owner's view again, and the
// owner is asking it what it hosts: the entries the death dropped are not
// back yet. A registration of one of its grains from another silo is
// refused, to be tried again, until the answer comes, and then learns the
// returned silo's activation instead of winning beside it; the owner's own
// lookup waits for the answer. Before, the owner granted it at once, and the merge
// that came with the answer found a duplicate made after the silo was
// already seen alive.
func TestARegistrationWaitsForTheReclaimOfASiloBackFromAFalseDeath(t *testing.T) {
	c := newClusterTimingOut(t, 20*time.Second, "a", "b", "c")
	a, b, cc := c.all()[0], c.all()[1], c.all()[2]
	id := grainsOwnedBy("a", 1, "a", "b", "c")[0] // owned by a, with or without b
	require.Empty(t, register(t, b, id))

	noB := without(c.view(), nil, "b") // a and c think b died; b runs on
	a.dir.SetView(noB)
	cc.dir.SetView(noB)
	require.Eventually(t, func() bool { return a.dir.Stats().Held == 0 && cc.dir.Stats().Held == 0 }, 10*time.Second, time.Millisecond)

	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open) // a failure must not leave b's answers held
	c.mu.Lock()
	c.gates["Hosted"] = gate // b is slow to say what it hosts
	c.mu.Unlock()
	back := c.view()
	a.dir.SetView(back)
	cc.dir.SetView(back)
	require.Eventually(t, func() bool { return c.servedCount("b", "Hosted") >= 1 }, 10*time.Second, time.Millisecond,
		"a asks b what it hosts")

	registered := make(chan string, 1)
	cc.dir.Register(id, func(winner string, err error) {
		assert.NoError(t, err)
		registered <- winner
	})
	type answer struct {
		silo   string
		placed bool
	}
	located := make(chan answer, 1)
	a.dir.Locate(id, "", func(silo string, placed bool, err error) {
		assert.NoError(t, err)
		located <- answer{silo, placed}
	})
	require.Eventually(t, func() bool {
		refused := c.servedCount("a", "Register") >= 2
		a.dir.mu.Lock()
		defer a.dir.mu.Unlock()
		return refused && len(a.dir.mu.awaiting) > 0
	}, 10*time.Second, time.Millisecond, "c's registration is refused until b answers, and a's own lookup waits")
	open()
	select {
	case w := <-registered:
		assert.Equal(t, "b", w, "c learns b's activation")
	case <-time.After(10 * time.Second):
		t.Fatal("the registration was not answered")
	}
	select {
	case l := <-located:
		assert.Equal(t, answer{"b", false}, l, "a's lookup finds b's activation, placing nothing")
	case <-time.After(10 * time.Second):
		t.Fatal("the lookup was not answered")
	}
	assert.Equal(t, "b", locate(t, a, id, ""))
	assert.Zero(t, a.dir.Stats().Conflicts, "no duplicate was made")
	b.host.mu.Lock()
	defer b.host.mu.Unlock()
	assert.Empty(t, b.host.deactivated)
}
