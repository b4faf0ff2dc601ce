package directory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/directory/directorypb"
)

// A silo restarts under its name with a higher generation. Once the view
// has shown a generation leave, every generation up to it is dead: an
// entry of an older incarnation, handed over by a silo whose view lags,
// must not pass for a silo not seen yet and hold its grain for a grace.
func TestAnIncarnationOlderThanOneThatLeftIsDead(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	c := &fakeCluster{t: t, silos: make(map[string]*fakeSilo), down: make(map[string]bool), clock: fake}
	a, b := c.add("a", 1), c.add("b", 1)
	c.add("x", 1)
	c.setView()
	c.kill("x")
	c.add("x", 2)
	c.setView()
	c.kill("x") // a has seen x leave twice, in generations 1 and 2

	g := grainsOwnedBy("a", 1, "a", "b")[0]
	first := &directorypb.Entry{Grain: pbGrain(g), Activation: pbActivation(Activation{Silo: "x", Generation: 1})}
	a.dir.merge([]*directorypb.Entry{first})
	require.Zero(t, a.dir.Stats().Conflicts)
	assert.Empty(t, register(t, b, g), "x's first incarnation died before its second: b's activation wins")
	assert.Equal(t, "b", locate(t, a, g, ""))
}
