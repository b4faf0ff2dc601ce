package idmap

// Map maps uint64 ids to values of a pointer-like type V, whose zero value
// stands for "no entry" and cannot be stored. Its zero value is not ready:
// call Init first. It is not safe for concurrent use; its owners hold a
// lock of their own.
type Map[V comparable] struct {
	slots    []entry[V]   // a power of two of them
	overflow map[uint64]V // ids whose slot was taken; nil while empty
	n        int
}

type entry[V comparable] struct {
	id uint64
	v  V
}

// holds reports whether the slot holds the entry for id.
func (e *entry[V]) holds(id uint64) bool {
	var zero V
	return e.v != zero && e.id == id
}

// slot returns the ring slot id selects.
func (m *Map[V]) slot(id uint64) *entry[V] {
	return &m.slots[id&uint64(len(m.slots)-1)]
}

// Init makes m an empty map with a ring of at least slots slots (rounded up
// to a power of two). Entries beyond the ring's reach cost a map entry each.
func (m *Map[V]) Init(slots int) {
	size := 1
	for size < slots {
		size <<= 1
	}
	*m = Map[V]{slots: make([]entry[V], size)}
}

// Len returns how many entries m holds.
func (m *Map[V]) Len() int { return m.n }

// Get returns the value stored under id, or the zero value.
func (m *Map[V]) Get(id uint64) V {
	if s := m.slot(id); s.holds(id) {
		return s.v
	}
	return m.overflow[id]
}

// Add stores v under id and reports true, or reports false and changes
// nothing when id is already present. It panics when v is the zero value,
// which stands for "no entry".
func (m *Map[V]) Add(id uint64, v V) bool {
	var zero V
	if v == zero {
		panic("idmap: Add of the zero value")
	}
	s := m.slot(id)
	if s.holds(id) {
		return false
	}
	if m.overflow != nil { // a lookup in a nil map still costs a call
		if _, dup := m.overflow[id]; dup {
			return false
		}
	}
	if s.v == zero {
		s.id, s.v = id, v
	} else {
		if m.overflow == nil {
			m.overflow = make(map[uint64]V)
		}
		m.overflow[id] = v
	}
	m.n++
	return true
}

// Take removes the entry stored under id and returns its value, or returns
// the zero value when there is none.
func (m *Map[V]) Take(id uint64) V {
	if s := m.slot(id); s.holds(id) {
		v := s.v
		*s = entry[V]{}
		m.n--
		return v
	}
	v, ok := m.overflow[id]
	if ok {
		m.dropOverflow(id)
		m.n--
	}
	return v
}

// dropOverflow removes id from the overflow map, and lets the map go once
// it is empty: a map never shrinks, and a burst of slow entries should not
// leave a large one behind.
func (m *Map[V]) dropOverflow(id uint64) {
	delete(m.overflow, id)
	if len(m.overflow) == 0 {
		m.overflow = nil
	}
}

// Range calls f for every entry, in no particular order. f must not change
// m.
func (m *Map[V]) Range(f func(id uint64, v V)) {
	var zero V
	for i := range m.slots {
		if s := &m.slots[i]; s.v != zero {
			f(s.id, s.v)
		}
	}
	for id, v := range m.overflow {
		f(id, v)
	}
}

// RemoveIf removes the entries for which drop reports true and appends
// their values to out, which it returns.
func (m *Map[V]) RemoveIf(out []V, drop func(id uint64, v V) bool) []V {
	var zero V
	before := len(out)
	for i := range m.slots {
		if s := &m.slots[i]; s.v != zero && drop(s.id, s.v) {
			out = append(out, s.v)
			*s = entry[V]{}
		}
	}
	for id, v := range m.overflow {
		if drop(id, v) {
			m.dropOverflow(id)
			out = append(out, v)
		}
	}
	m.n -= len(out) - before
	return out
}

// Overflowed reports how many entries sit in the overflow map: ids whose
// slot an older entry held when they were added.
func (m *Map[V]) Overflowed() int { return len(m.overflow) }
