package idmap

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type val struct{ id uint64 }

func TestInitRoundsUpToAPowerOfTwo(t *testing.T) {
	var m Map[*val]
	m.Init(5)
	assert.Len(t, m.slots, 8)
	m.Init(0)
	assert.Len(t, m.slots, 1)
}

func TestRingAndOverflow(t *testing.T) {
	var m Map[*val]
	m.Init(4)
	a, b, c := &val{1}, &val{5}, &val{9} // all in slot 1
	require.True(t, m.Add(1, a))
	require.True(t, m.Add(5, b), "a taken slot sends the id to the overflow map")
	require.True(t, m.Add(9, c))
	assert.Equal(t, 3, m.Len())
	assert.Equal(t, 2, m.Overflowed())

	for _, id := range []uint64{1, 5, 9} {
		assert.False(t, m.Add(id, &val{id}), "id %d is already present", id)
	}
	assert.Same(t, b, m.Get(5))
	assert.Nil(t, m.Get(13))

	assert.Same(t, a, m.Take(1))
	assert.Nil(t, m.Take(1), "taken once")
	assert.False(t, m.Add(5, &val{5}), "an overflowed id is still found once its slot is free")
	assert.Same(t, b, m.Take(5))
	assert.Same(t, c, m.Take(9))
	assert.Nil(t, m.overflow, "an emptied overflow map is let go")
	assert.Zero(t, m.Len())

	require.True(t, m.Add(9, c), "an id may come back once taken")
	assert.Zero(t, m.Overflowed(), "and then takes its free slot")
}

func TestAddRefusesTheZeroValue(t *testing.T) {
	var m Map[*val]
	m.Init(4)
	assert.Panics(t, func() { m.Add(1, nil) })
	assert.Zero(t, m.Len())
}

func TestRange(t *testing.T) {
	m := filled(t, 2, 6) // four of them overflow
	want := map[uint64]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true}
	got := map[uint64]bool{}
	m.Range(func(id uint64, v *val) {
		assert.Equal(t, id, v.id)
		assert.False(t, got[id], "id %d seen twice", id)
		got[id] = true
	})
	assert.Equal(t, want, got)
	assert.Equal(t, 6, m.Len(), "Range removes nothing")
}

func TestRemoveIf(t *testing.T) {
	m := filled(t, 4, 12)
	require.Equal(t, 8, m.Overflowed())
	odd := m.RemoveIf(nil, func(id uint64, v *val) bool {
		assert.Equal(t, id, v.id)
		return id%2 == 1
	})
	assert.Len(t, odd, 6)
	for _, v := range odd {
		assert.Equal(t, uint64(1), v.id%2)
		assert.Nil(t, m.Get(v.id))
	}
	assert.Equal(t, 6, m.Len())
	rest := m.RemoveIf(odd[:0], func(uint64, *val) bool { return true })
	assert.Len(t, rest, 6)
	assert.Zero(t, m.Len())
	assert.Nil(t, m.overflow)
}

// TestAgainstAMap runs random operations on a Map and on a plain map, ids
// mostly counting up as a connection's calls do, and checks that they agree
// after every step.
func TestAgainstAMap(t *testing.T) {
	next := uint64(1)
	checkAgainstMap(t, 8, rand.New(rand.NewPCG(1, 2)), func(rng *rand.Rand, ref map[uint64]*val) uint64 {
		switch {
		case len(ref) > 0 && rng.IntN(2) == 0:
			for k := range ref { // an id in use, mostly an old one
				return k
			}
		case rng.IntN(10) == 0:
			return rng.Uint64N(64) // anything, as a misbehaving peer sends
		}
		next++
		return next - 1
	})
}

// filled returns a Map with a ring of slots slots holding ids 1 to n.
func filled(t *testing.T, slots, n int) *Map[*val] {
	t.Helper()
	m := new(Map[*val])
	m.Init(slots)
	for id := uint64(1); id <= uint64(n); id++ {
		require.True(t, m.Add(id, &val{id}))
	}
	return m
}

// checkAgainstMap runs 20,000 random operations (Add, Take, Get and now
// and then RemoveIf) on a Map with a ring of slots slots and on a plain
// map, with ids from pick, and checks that they agree after every step.
func checkAgainstMap(t *testing.T, slots int, rng *rand.Rand, pick func(rng *rand.Rand, ref map[uint64]*val) uint64) {
	t.Helper()
	var m Map[*val]
	m.Init(slots)
	ref := map[uint64]*val{}
	for step := range 20_000 {
		id := pick(rng, ref)
		switch rng.IntN(8) {
		case 0, 1, 2:
			_, present := ref[id]
			v := &val{id}
			require.Equal(t, !present, m.Add(id, v), "slots %d step %d: add %d", slots, step, id)
			if !present {
				ref[id] = v
			}
		case 3, 4:
			require.Same(t, ref[id], m.Take(id), "slots %d step %d: take %d", slots, step, id)
			delete(ref, id)
		case 5, 6:
			require.Same(t, ref[id], m.Get(id), "slots %d step %d: get %d", slots, step, id)
		case 7:
			bit := rng.Uint64N(2)
			got := m.RemoveIf(nil, func(id uint64, v *val) bool {
				require.Same(t, ref[id], v, "RemoveIf sees %d under its own id", id)
				return id%2 == bit
			})
			want := 0
			for id := range ref {
				if id%2 == bit {
					delete(ref, id)
					want++
				}
			}
			require.Len(t, got, want, "slots %d step %d: remove", slots, step)
			for _, v := range got {
				require.Nil(t, m.Get(v.id))
			}
		}
		require.Equal(t, len(ref), m.Len(), "slots %d step %d", slots, step)
		if m.overflow != nil {
			require.NotZero(t, len(m.overflow), "an empty overflow map is let go")
		}
	}
}

func BenchmarkAddTake(b *testing.B) {
	var m Map[*val]
	m.Init(64)
	v := &val{}
	const inFlight = 16
	for id := uint64(1); id <= inFlight; id++ {
		m.Add(id, v)
	}
	var id uint64
	for b.Loop() {
		id++
		m.Take(id)
		m.Add(id+inFlight, v)
	}
}
