package host

import "github.com/granary-go/granary/actor"

// catalog maps grain ids to their activations; the host's lock guards it.
//
// It is keyed by the grain's key alone. Activations of other grain types
// under the same key, which are rare, are chained behind the first one.
// A request for one of many idle grains pays the lookup in full. Hashing a
// actor.GrainID hashed its type too, a protobuf service name of some thirty
// bytes, and then compared it; that was half of what such a request cost
// over one for a hot grain (BenchmarkTurnPartitioned). The type is now
// compared once, and a decoded request's type is usually the very string
// the activation holds, so the comparison stops at the pointers.
type catalog struct {
	byKey map[string]*activation
	n     int
}

func (c *catalog) init() { c.byKey = make(map[string]*activation) }

// get returns id's activation, or nil.
func (c *catalog) get(id actor.GrainID) *activation {
	for a := c.byKey[id.Key]; a != nil; a = a.sameKey {
		if a.id.Type == id.Type {
			return a
		}
	}
	return nil
}

// add adds a, whose grain must have no activation in c.
func (c *catalog) add(a *activation) {
	a.sameKey = c.byKey[a.id.Key]
	c.byKey[a.id.Key] = a
	c.n++
}

// remove removes a if it is in c.
func (c *catalog) remove(a *activation) {
	first := c.byKey[a.id.Key]
	if first == a {
		if a.sameKey == nil {
			delete(c.byKey, a.id.Key)
		} else {
			c.byKey[a.id.Key] = a.sameKey
		}
		a.sameKey = nil
		c.n--
		return
	}
	for p := first; p != nil; p = p.sameKey {
		if p.sameKey == a {
			p.sameKey, a.sameKey = a.sameKey, nil
			c.n--
			return
		}
	}
}

// len returns how many activations c holds.
func (c *catalog) len() int { return c.n }

// all yields every activation in c. The body must not change c.
func (c *catalog) all(yield func(*activation) bool) {
	for _, a := range c.byKey {
		for ; a != nil; a = a.sameKey {
			if !yield(a) {
				return
			}
		}
	}
}
