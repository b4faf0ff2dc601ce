package ring

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
)

// naivePoint and naiveOwner are the model the ring is checked against: every
// position listed, the owner found by a linear scan.
type naivePoint struct {
	hash uint64
	silo Silo
}

func naivePoints(silos []Silo, vnodes int) []naivePoint {
	var pts []naivePoint
	for _, s := range silos {
		for i := range vnodes {
			pts = append(pts, naivePoint{pointHash(s.ID, i), s})
		}
	}
	return pts
}

// before orders positions as the ring documents: by hash, then silo id.
func (p naivePoint) before(q naivePoint) bool {
	return p.hash < q.hash || p.hash == q.hash && p.silo.ID < q.silo.ID
}

func naiveOwner(pts []naivePoint, h uint64) (Silo, bool) {
	var best, lowest *naivePoint
	for i := range pts {
		p := &pts[i]
		if lowest == nil || p.before(*lowest) {
			lowest = p
		}
		if p.hash >= h && (best == nil || p.before(*best)) {
			best = p
		}
	}
	if best == nil {
		best = lowest
	}
	if best == nil {
		return Silo{}, false
	}
	return best.silo, true
}

func randomSilos(rng *rand.Rand, n int) []Silo {
	silos := make([]Silo, n)
	for i := range silos {
		silos[i] = Silo{ID: fmt.Sprintf("silo-%d-%x", i, rng.Uint32()), Generation: rng.Int64N(1 << 40)}
	}
	return silos
}

// probes are hashes worth checking on a ring: every position and its
// neighbours, both ends of the hash space, and random hashes.
func probes(rng *rand.Rand, pts []naivePoint) []uint64 {
	hs := []uint64{0, 1, math.MaxUint64, math.MaxUint64 - 1}
	for _, p := range pts {
		hs = append(hs, p.hash-1, p.hash, p.hash+1)
	}
	for range 200 {
		hs = append(hs, rng.Uint64())
	}
	return hs
}

func TestOwnerMatchesNaiveModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 100 {
		silos := randomSilos(rng, rng.IntN(8))
		vnodes := 1 + rng.IntN(40)
		r := New(silos, vnodes)
		pts := naivePoints(silos, vnodes)
		for _, h := range probes(rng, pts) {
			want, wantOK := naiveOwner(pts, h)
			got, ok := r.Owner(h)
			require.Equal(t, wantOK, ok, "round %d hash %#x", round, h)
			require.Equal(t, want, got, "round %d hash %#x", round, h)
		}
	}
}

// TestOwnerResolvesTiedAndExtremePositions builds rings whose positions tie
// and sit at both ends of the hash space, which hashed silo ids almost never
// produce, and checks owners and ranges against the model.
func TestOwnerResolvesTiedAndExtremePositions(t *testing.T) {
	a, b, c := Silo{"a", 1}, Silo{"b", 2}, Silo{"c", 3}
	cases := []struct {
		name string
		pts  []naivePoint
	}{
		{"tie in the middle", []naivePoint{{10, a}, {50, b}, {50, c}, {90, a}}},
		{"tie at zero", []naivePoint{{0, c}, {0, b}, {70, a}}},
		{"position at the maximum", []naivePoint{{20, b}, {math.MaxUint64, a}}},
		{"tie at the maximum", []naivePoint{{math.MaxUint64, c}, {math.MaxUint64, b}}},
		{"one position", []naivePoint{{1234, a}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ringFromPoints(tc.pts)
			probe := []uint64{0, 1, math.MaxUint64}
			for _, p := range tc.pts {
				probe = append(probe, p.hash-1, p.hash, p.hash+1)
			}
			for _, h := range probe {
				want, _ := naiveOwner(tc.pts, h)
				got, ok := r.Owner(h)
				require.True(t, ok)
				assert.Equal(t, want, got, "hash %#x", h)
			}
			assertRangesPartition(t, r)
		})
	}
}

// ringFromPoints builds a Ring with the given positions instead of hashed ones.
func ringFromPoints(pts []naivePoint) *Ring {
	pts = slices.Clone(pts)
	sort.Slice(pts, func(i, j int) bool { return pts[i].before(pts[j]) })
	r := &Ring{vnodes: 1}
	index := map[string]int32{}
	var ids []Silo
	for _, p := range pts {
		if _, ok := index[p.silo.ID]; !ok {
			index[p.silo.ID] = 0
			ids = append(ids, p.silo)
		}
	}
	slices.SortFunc(ids, func(x, y Silo) int { return cmp.Compare(x.ID, y.ID) })
	for i, s := range ids {
		index[s.ID] = int32(i)
	}
	r.silos = ids
	for _, p := range pts {
		r.points = append(r.points, p.hash)
		r.owners = append(r.owners, index[p.silo.ID])
	}
	r.index()
	return r
}

// assertRangesPartition checks that the silos' ranges tile the hash space
// exactly once and that each range's ends belong to its silo.
func assertRangesPartition(t *testing.T, r *Ring) {
	t.Helper()
	type owned struct {
		Range
		id string
	}
	var all []owned
	for _, s := range r.Silos() {
		rs := r.Ranges(s.ID)
		for i, x := range rs {
			require.LessOrEqual(t, x.First, x.Last)
			if i > 0 {
				require.Greater(t, x.First, rs[i-1].Last+1, "adjacent ranges of %s are not merged", s.ID)
			}
			all = append(all, owned{x, s.ID})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].First < all[j].First })
	require.NotEmpty(t, all)
	assert.Equal(t, uint64(0), all[0].First)
	assert.Equal(t, uint64(math.MaxUint64), all[len(all)-1].Last)
	for i, x := range all {
		if i > 0 {
			assert.Equal(t, all[i-1].Last+1, x.First, "gap or overlap before %#x", x.First)
		}
		for _, h := range []uint64{x.First, x.Last} {
			got, _ := r.Owner(h)
			assert.Equal(t, x.id, got.ID, "hash %#x", h)
		}
	}
}

func TestRangesPartitionTheHashSpace(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100 {
		r := New(randomSilos(rng, 1+rng.IntN(8)), 1+rng.IntN(40))
		assertRangesPartition(t, r)
	}
	assert.Nil(t, New(randomSilos(rng, 3), 0).Ranges("no such silo"))
}

// findMove returns the move whose range contains h.
func findMove(moves []Move, h uint64) (Move, bool) {
	i := sort.Search(len(moves), func(i int) bool { return moves[i].Range.Last >= h })
	if i < len(moves) && moves[i].Range.Contains(h) {
		return moves[i], true
	}
	return Move{}, false
}

// churn returns a variation of silos: some removed, some added, some
// restarted with a new generation.
func churn(rng *rand.Rand, silos []Silo) []Silo {
	var out []Silo
	for _, s := range silos {
		switch rng.IntN(4) {
		case 0: // removed
		case 1:
			out = append(out, Silo{s.ID, s.Generation + 1}) // restarted
		default:
			out = append(out, s)
		}
	}
	return append(out, randomSilos(rng, rng.IntN(3))...)
}

func TestDiffMatchesNaiveModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 100 {
		vnodes := 1 + rng.IntN(30)
		before := randomSilos(rng, rng.IntN(7))
		after := churn(rng, before)
		moves := Diff(New(before, vnodes), New(after, vnodes))

		for i, m := range moves {
			require.LessOrEqual(t, m.Range.First, m.Range.Last)
			require.NotEqual(t, m.From, m.To)
			if i > 0 {
				prev := moves[i-1]
				require.Greater(t, m.Range.First, prev.Range.Last, "moves overlap or are out of order")
				if prev.Range.Last+1 == m.Range.First {
					require.False(t, prev.From == m.From && prev.To == m.To, "adjacent moves are not merged")
				}
			}
		}

		oldPts, newPts := naivePoints(before, vnodes), naivePoints(after, vnodes)
		for _, h := range probes(rng, append(slices.Clone(oldPts), newPts...)) {
			from, _ := naiveOwner(oldPts, h)
			to, _ := naiveOwner(newPts, h)
			m, moved := findMove(moves, h)
			require.Equal(t, from != to, moved, "round %d hash %#x", round, h)
			if moved {
				require.Equal(t, from, m.From, "round %d hash %#x", round, h)
				require.Equal(t, to, m.To, "round %d hash %#x", round, h)
			}
		}
	}
}

func TestDiffOfTheSameMembershipIsEmpty(t *testing.T) {
	silos := randomSilos(rand.New(rand.NewPCG(7, 8)), 5)
	reversed := slices.Clone(silos)
	slices.Reverse(reversed)
	assert.Empty(t, Diff(New(silos, 0), New(reversed, 0)))
}

func TestDiffFromAnEmptyRingMovesEverythingFromNobody(t *testing.T) {
	s := Silo{"only", 1}
	moves := Diff(New(nil, 0), New([]Silo{s}, 0))
	assert.Equal(t, []Move{{Range{0, math.MaxUint64}, Silo{}, s}}, moves)
	moves = Diff(New([]Silo{s}, 0), New(nil, 0))
	assert.Equal(t, []Move{{Range{0, math.MaxUint64}, s, Silo{}}}, moves)
}

func TestRemovingASiloMovesOnlyItsRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	silos := randomSilos(rng, 6)
	full := New(silos, 0)
	for i, gone := range silos {
		rest := slices.Delete(slices.Clone(silos), i, i+1)
		moves := Diff(full, New(rest, 0))
		require.NotEmpty(t, moves)
		var moved []Range
		for _, m := range moves {
			assert.Equal(t, gone, m.From, "a range moved that %s did not own", gone.ID)
			moved = append(moved, m.Range)
		}
		assert.Equal(t, full.Ranges(gone.ID), mergeRanges(moved), "exactly %s's ranges move", gone.ID)

		// Adding it back is the mirror image.
		for _, m := range Diff(New(rest, 0), full) {
			assert.Equal(t, gone, m.To)
		}
	}
}

func mergeRanges(rs []Range) []Range {
	var out []Range
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].Last+1 == r.First {
			out[n-1].Last = r.Last
			continue
		}
		out = append(out, r)
	}
	return out
}

func TestARestartedSiloTakesBackItsRangesAsANewIncarnation(t *testing.T) {
	old := []Silo{{"a", 1}, {"b", 1}, {"c", 1}}
	restarted := []Silo{{"a", 1}, {"b", 2}, {"c", 1}}
	before, after := New(old, 0), New(restarted, 0)
	assert.Equal(t, before.Ranges("b"), after.Ranges("b"), "positions depend on the id alone")
	moves := Diff(before, after)
	require.NotEmpty(t, moves)
	for _, m := range moves {
		assert.Equal(t, Silo{"b", 1}, m.From)
		assert.Equal(t, Silo{"b", 2}, m.To)
	}
}

func TestNewIgnoresOrderDuplicatesAndEmptyIDs(t *testing.T) {
	r := New([]Silo{{"b", 1}, {"a", 5}, {"b", 3}, {"", 9}, {"b", 2}}, 4)
	assert.Equal(t, []Silo{{"a", 5}, {"b", 3}}, r.Silos())
	assert.Equal(t, 2, r.Len())
	assert.Equal(t, 4, r.VirtualNodes())
	assert.Equal(t, DefaultVirtualNodes, New(nil, 0).VirtualNodes())

	id := actor.GrainID{Type: "t", Key: "k"}
	same := New([]Silo{{"a", 5}, {"b", 3}}, 4)
	got, ok := r.OwnerOf(id)
	require.True(t, ok)
	want, _ := same.OwnerOf(id)
	assert.Equal(t, want, got)
}

func TestAnEmptyRingHasNoOwner(t *testing.T) {
	_, ok := New(nil, 0).OwnerOf(actor.GrainID{Type: "t", Key: "k"})
	assert.False(t, ok)
}
