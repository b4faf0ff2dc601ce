package ring

import (
	"cmp"
	"math"
	"slices"

	"github.com/granary-go/granary/actor"
)

// DefaultVirtualNodes is the number of ring positions each silo gets when
// New is given zero. docs/cluster.md gives the balance it was chosen for.
const DefaultVirtualNodes = 64

// Silo is one incarnation of a silo on the ring. Its ring positions depend on
// ID alone, so a silo that restarts under the same id takes back the same
// ranges; Generation tells the incarnations apart, so Diff reports those
// ranges as moving from the old incarnation (whose directory partition died
// with it) to the new one.
type Silo struct {
	ID         string
	Generation int64
}

// Ring is an immutable consistent-hash ring over a set of silos. The owner
// of a hash h is the silo of the first ring position at or after h, wrapping
// around past the largest position; positions that hash equally are ordered
// by silo id. A Ring is safe for concurrent use.
type Ring struct {
	silos  []Silo   // sorted by ID, one entry per ID
	points []uint64 // ring positions, ascending
	owners []int32  // owners[i] indexes silos: who sits at points[i]
	vnodes int

	// Owner is on the path of every first call to a grain, and a binary
	// search over the positions mispredicts a branch at nearly every step.
	// buckets splits the hash space into 2^bits equal slices and holds, for
	// each, the first position at or after its start, so a lookup starts
	// next to its answer and scans about one position.
	buckets []int32
	shift   uint // 64 - bits
}

// New returns the ring of silos with virtualNodes positions per silo (zero
// means DefaultVirtualNodes). When two entries share an ID, the one with the
// higher Generation is kept: a restarted silo replaces its old incarnation.
// Entries with an empty ID are ignored, because the zero Silo stands for "no
// owner" in a Move. The result depends only on the set of silos, not on
// their order.
func New(silos []Silo, virtualNodes int) *Ring {
	if virtualNodes <= 0 {
		virtualNodes = DefaultVirtualNodes
	}
	r := &Ring{vnodes: virtualNodes}
	for _, s := range silos {
		if s.ID != "" {
			r.silos = append(r.silos, s)
		}
	}
	slices.SortFunc(r.silos, func(a, b Silo) int {
		if c := cmp.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return cmp.Compare(b.Generation, a.Generation) // newest first
	})
	r.silos = slices.CompactFunc(r.silos, func(a, b Silo) bool { return a.ID == b.ID })

	type point struct {
		hash  uint64
		owner int32
	}
	points := make([]point, 0, len(r.silos)*virtualNodes)
	for s, silo := range r.silos {
		for i := range virtualNodes {
			points = append(points, point{pointHash(silo.ID, i), int32(s)})
		}
	}
	// Ties between positions go to the lower silo index, which is the lower
	// id, so every silo resolves them the same way.
	slices.SortFunc(points, func(a, b point) int {
		if c := cmp.Compare(a.hash, b.hash); c != 0 {
			return c
		}
		return cmp.Compare(a.owner, b.owner)
	})
	r.points = make([]uint64, len(points))
	r.owners = make([]int32, len(points))
	for i, p := range points {
		r.points[i], r.owners[i] = p.hash, p.owner
	}
	r.index()
	return r
}

// index builds buckets with about two per position.
func (r *Ring) index() {
	bits := uint(1)
	for 1<<bits < 2*len(r.points) {
		bits++
	}
	r.shift = 64 - bits
	r.buckets = make([]int32, 1<<bits)
	i := 0
	for b := range r.buckets {
		start := uint64(b) << r.shift
		for i < len(r.points) && r.points[i] < start {
			i++
		}
		r.buckets[b] = int32(i)
	}
}

// Silos returns the ring's silos sorted by ID.
func (r *Ring) Silos() []Silo { return slices.Clone(r.silos) }

// Len returns the number of silos on the ring.
func (r *Ring) Len() int { return len(r.silos) }

// VirtualNodes returns the number of ring positions per silo.
func (r *Ring) VirtualNodes() int { return r.vnodes }

// Owner returns the silo that owns hash h, or false when the ring is empty.
func (r *Ring) Owner(h uint64) (Silo, bool) {
	if len(r.points) == 0 {
		return Silo{}, false
	}
	i := int(r.buckets[h>>r.shift]) // no position between the bucket's start and h is skipped
	for i < len(r.points) && r.points[i] < h {
		i++
	}
	if i == len(r.points) {
		i = 0
	}
	return r.silos[r.owners[i]], true
}

// OwnerOf returns the silo that owns the directory entry of grain id, or
// false when the ring is empty.
func (r *Ring) OwnerOf(id actor.GrainID) (Silo, bool) { return r.Owner(Hash(id)) }

// Range is the set of hashes from First to Last, both included. A Range never
// wraps: the arc that crosses zero is split in two.
type Range struct {
	First, Last uint64
}

// Contains reports whether h lies in the range.
func (r Range) Contains(h uint64) bool { return r.First <= h && h <= r.Last }

// Ranges returns the hash ranges owned by the silo with the given id, in
// ascending order, adjacent ranges merged; nil when the silo is not on the ring.
func (r *Ring) Ranges(id string) []Range {
	var out []Range
	for _, s := range r.segments() {
		if s.owner >= 0 && r.silos[s.owner].ID == id {
			out = append(out, s.Range)
		}
	}
	return out
}

// segment is a maximal range with one owner; owner -1 means no owner (an
// empty ring).
type segment struct {
	Range
	owner int32
}

// segments partitions the whole hash space into ranges with one owner each,
// in ascending order, adjacent ranges of the same owner merged.
func (r *Ring) segments() []segment {
	if len(r.points) == 0 {
		return []segment{{Range{0, math.MaxUint64}, -1}}
	}
	out := make([]segment, 0, len(r.points)+1)
	add := func(first, last uint64, owner int32) {
		if n := len(out); n > 0 && out[n-1].owner == owner {
			out[n-1].Last = last
			return
		}
		out = append(out, segment{Range{first, last}, owner})
	}
	var first uint64
	for i, p := range r.points {
		if i > 0 && p == r.points[i-1] {
			continue // a tied position after the first owns nothing
		}
		add(first, p, r.owners[i])
		if p == math.MaxUint64 {
			return out
		}
		first = p + 1
	}
	add(first, math.MaxUint64, r.owners[0]) // the arc past the last position wraps to the first
	return out
}

// Move is a hash range whose owner differs between two rings. From or To is
// the zero Silo when the corresponding ring is empty.
type Move struct {
	Range    Range
	From, To Silo
}

// Diff returns the ranges whose owner differs between from and to, in
// ascending order, adjacent ranges with the same From and To merged. A silo
// whose Generation changed counts as a different owner. The directory uses
// it to know which entries to hand over when the view changes, and which
// ranges a new owner must rebuild when their old owner failed.
func Diff(from, to *Ring) []Move {
	a, b := from.segments(), to.segments()
	var out []Move
	var i, j int
	var first uint64
	for i < len(a) && j < len(b) {
		last := min(a[i].Last, b[j].Last)
		fromSilo, toSilo := from.silo(a[i].owner), to.silo(b[j].owner)
		if fromSilo != toSilo {
			if n := len(out); n > 0 && out[n-1].From == fromSilo && out[n-1].To == toSilo && out[n-1].Range.Last+1 == first {
				out[n-1].Range.Last = last
			} else {
				out = append(out, Move{Range{first, last}, fromSilo, toSilo})
			}
		}
		if a[i].Last == last {
			i++
		}
		if b[j].Last == last {
			j++
		}
		first = last + 1 // wraps to 0 only after the last segment of both
	}
	return out
}

func (r *Ring) silo(owner int32) Silo {
	if owner < 0 {
		return Silo{}
	}
	return r.silos[owner]
}
