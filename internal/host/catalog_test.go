package host

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
)

// Activations of different grain types under one key share the catalog's
// entry for that key; each is still found, listed and removed on its own.
func TestCatalogKeepsTypesApartUnderOneKey(t *testing.T) {
	var c catalog
	c.init()
	mk := func(typ, key string) *activation { return &activation{id: actor.GrainID{Type: typ, Key: key}} }
	a, b, d := mk("A", "k"), mk("B", "k"), mk("C", "k")
	other := mk("A", "j")
	for _, x := range []*activation{a, b, d, other} {
		c.add(x)
	}
	require.Equal(t, 4, c.len())
	for _, x := range []*activation{a, b, d, other} {
		assert.Same(t, x, c.get(x.id))
	}
	assert.Nil(t, c.get(actor.GrainID{Type: "B", Key: "j"}), "a key that exists for another type only")
	assert.Nil(t, c.get(actor.GrainID{Type: "A", Key: "x"}))

	c.remove(b) // from the middle of the chain
	assert.Nil(t, c.get(b.id))
	assert.Same(t, a, c.get(a.id))
	assert.Same(t, d, c.get(d.id))
	c.remove(b) // not there any more: nothing changes
	assert.Equal(t, 3, c.len())

	c.remove(d) // the first of the chain, added last
	assert.Nil(t, c.get(d.id))
	assert.Same(t, a, c.get(a.id))
	c.remove(a)
	assert.Nil(t, c.get(a.id))
	_, kept := c.byKey["k"]
	assert.False(t, kept, "an emptied key is deleted")
	assert.Equal(t, 1, c.len())

	var seen []*activation
	for x := range c.all {
		seen = append(seen, x)
	}
	assert.Equal(t, []*activation{other}, seen)
}

// Random adds and removes over a few keys and types agree with a plain map
// keyed by actor.GrainID.
func TestCatalogMatchesAMap(t *testing.T) {
	var c catalog
	c.init()
	model := map[actor.GrainID]*activation{}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		id := actor.GrainID{Type: fmt.Sprint("T", rng.IntN(3)), Key: fmt.Sprint("k", rng.IntN(5))}
		if x := model[id]; x != nil && rng.IntN(2) == 0 {
			c.remove(x)
			delete(model, id)
		} else if x == nil {
			x = &activation{id: id}
			c.add(x)
			model[id] = x
		} else {
			c.remove(&activation{id: id}) // a stale activation of the same grain is not removed
		}
		require.Equal(t, len(model), c.len())
		for mid, x := range model {
			require.Same(t, x, c.get(mid))
		}
		n := 0
		for x := range c.all {
			require.Same(t, model[x.id], x)
			n++
		}
		require.Equal(t, len(model), n)
	}
}
