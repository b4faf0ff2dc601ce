package idmap

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEdgeIDs covers the ids a misbehaving peer may send: 0, whose slot's
// empty entry also carries id 0, and the largest, which selects the last
// slot.
func TestEdgeIDs(t *testing.T) {
	var m Map[*val]
	m.Init(4)
	assert.Nil(t, m.Get(0), "an empty slot holds no entry under id 0")
	assert.Nil(t, m.Take(0))
	assert.Zero(t, m.Len(), "taking from an empty slot changes no count")

	zero, top := &val{0}, &val{math.MaxUint64}
	require.True(t, m.Add(0, zero))
	require.True(t, m.Add(math.MaxUint64, top))
	require.True(t, m.Add(4, &val{4}), "4 shares slot 0 with id 0")
	require.True(t, m.Add(math.MaxUint64-4, &val{math.MaxUint64 - 4}), "and this one the last slot")
	assert.Equal(t, 2, m.Overflowed())
	assert.False(t, m.Add(0, &val{0}))
	assert.False(t, m.Add(math.MaxUint64, &val{math.MaxUint64}))
	assert.Same(t, zero, m.Take(0))
	assert.Nil(t, m.Get(0))
	assert.Same(t, top, m.Get(math.MaxUint64))
	assert.Same(t, top, m.Take(math.MaxUint64))
	assert.Equal(t, 2, m.Len())
}

// TestOverflowedIDStaysUniqueAfterItsSlotFrees: an id in the overflow map
// must not be added a second time into its slot once the slot's holder
// leaves, nor be shadowed by a newer id that takes the slot.
func TestOverflowedIDStaysUniqueAfterItsSlotFrees(t *testing.T) {
	var m Map[*val]
	m.Init(4)
	a, b := &val{1}, &val{5}
	require.True(t, m.Add(1, a))
	require.True(t, m.Add(5, b))
	assert.Same(t, a, m.Take(1))
	assert.False(t, m.Add(5, &val{5}), "5 is still present, in the overflow map")
	assert.Equal(t, 1, m.Len())

	c := &val{9}
	require.True(t, m.Add(9, c), "9 takes the free slot")
	assert.Equal(t, 1, m.Overflowed())
	assert.Same(t, b, m.Get(5), "5 is found behind the slot's new holder")
	assert.Same(t, b, m.Take(5))
	assert.Nil(t, m.overflow)
	assert.Same(t, c, m.Get(9))
	assert.Equal(t, 1, m.Len())
}

// TestRemoveIfLetsAnEmptiedOverflowGoWhileTheRingKeepsEntries: the cluster
// test that checked this through the call table now only reads the
// overflow count, which cannot tell an empty map from a released one.
func TestRemoveIfLetsAnEmptiedOverflowGoWhileTheRingKeepsEntries(t *testing.T) {
	m := filled(t, 2, 6)
	require.Equal(t, 4, m.Overflowed())
	out := m.RemoveIf([]*val{{99}}, func(id uint64, _ *val) bool { return id > 2 })
	assert.Len(t, out, 5, "appended to what out held")
	assert.Equal(t, 2, m.Len(), "out's earlier contents are not counted as removed")
	assert.Nil(t, m.overflow)
	assert.NotNil(t, m.Get(1))
	assert.NotNil(t, m.Get(2))
}

// TestAgainstAMapWithRemoveIf is TestAgainstAMap on tiny rings with ids
// that collide all the time, the extremes included.
func TestAgainstAMapWithRemoveIf(t *testing.T) {
	ids := []uint64{0, 1, 2, 3, 8, 9, 16, math.MaxUint64, math.MaxUint64 - 1, math.MaxUint64 - 8}
	for _, slots := range []int{1, 2, 8} {
		checkAgainstMap(t, slots, rand.New(rand.NewPCG(uint64(slots), 3)), func(rng *rand.Rand, _ map[uint64]*val) uint64 {
			return ids[rng.IntN(len(ids))]
		})
	}
}
