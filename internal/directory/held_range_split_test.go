package directory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/ring"
)

// ringOf is the ring of silos ids, each of generation 1.
func ringOf(ids ...string) *ring.Ring {
	var silos []ring.Silo
	for _, id := range ids {
		silos = append(silos, ring.Silo{ID: id, Generation: 1})
	}
	return ring.New(silos, 0)
}

// joinedBeside returns a cluster whose silos a and b see each other, and
// c, which joined from a view without b and is active in one that shows b
// when withB is set: c holds the ranges it gained from the live silos of
// its view. The clock is fake: no handoff wait ends.
func joinedBeside(t *testing.T, withB bool) (c *fakeCluster, a, b, j *fakeSilo) {
	t.Helper()
	c = newFakeCluster(t)
	c.clock = clock.NewFake(time.Unix(1000, 0))
	a, b, j = c.add("a", 1), c.add("b", 1), c.add("c", 1)
	ab := without(c.view(), nil, "c")
	a.dir.SetView(ab)
	b.dir.SetView(ab)
	ofC := func(v cluster.View) cluster.View {
		if withB {
			return v
		}
		return without(v, nil, "b")
	}
	j.dir.SetView(ofC(c.viewWith(map[string]cluster.Status{"c": cluster.StatusJoining})))
	j.dir.SetView(ofC(c.view()))
	require.Positive(t, j.dir.Stats().Held, "c holds what it gained")
	return c, a, b, j
}

// splitHoldGrain returns a grain that b owns among a and b, and c among
// a and c and once b joins, and its range in the ring of a and c, which
// begins with hashes b takes: the range c holds, waiting for a's handoff,
// when it becomes active among a and c is owned in part by b once c sees
// b, and b hands c the grain.
func splitHoldGrain(t *testing.T) (actor.GrainID, ring.Range) {
	t.Helper()
	alone, ab, ac, abc := ringOf("a"), ringOf("a", "b"), ringOf("a", "c"), ringOf("a", "b", "c")
	moves := ring.Diff(alone, ac)
	for i := range 10000 {
		id := grain(i)
		h := ring.Hash(id)
		if o, _ := ac.Owner(h); o.ID != "c" {
			continue
		}
		if o, _ := abc.Owner(h); o.ID != "c" {
			continue
		}
		if o, _ := ab.Owner(h); o.ID != "b" {
			continue
		}
		for _, m := range moves {
			if first, _ := abc.Owner(m.Range.First); m.Range.Contains(h) && first.ID == "b" {
				return id, m.Range
			}
		}
	}
	t.Fatal("no grain lies in a range of c that b splits")
	return actor.GrainID{}, ring.Range{}
}

// Silos b and c join a at once. c becomes active in a view without b and
// holds the ranges it gained from a, waiting for a's handoff; its next
// view brings b, which takes the first part of such a range. The part c
// still owns had its hold ended with the rest: c served it with no
// entries, placed a grain there whose activation b already ran
// (registered where a and b, not yet seeing c, had its entry), and the
// handoff that came later found two activations of one grain.
//
// The part a silo still owns stays held until its entries come. The
// clock is fake: no handoff wait ends, so only a handoff releases it.
func TestTheStillOwnedPartOfAHeldRangeStaysHeldWhenAJoinerTakesTheRest(t *testing.T) {
	c, a, b, j := joinedBeside(t, false)
	id, _ := splitHoldGrain(t)
	require.Empty(t, register(t, b, id), "b runs the grain, registered among a and b")
	all := c.view()
	j.dir.SetView(all)

	type answer struct {
		silo   string
		placed bool
	}
	located := make(chan answer, 1)
	j.dir.Locate(id, "", func(silo string, placed bool, err error) {
		assert.NoError(t, err)
		located <- answer{silo, placed}
	})
	select {
	case got := <-located:
		t.Fatalf("c answered before any handoff: %+v", got)
	default:
	}
	a.dir.SetView(all)
	b.dir.SetView(all)
	select {
	case got := <-located:
		assert.Equal(t, answer{"b", false}, got, "the lookup waited for the entry and found b's activation")
	case <-time.After(10 * time.Second):
		t.Fatal("the lookup was not answered after the handoffs")
	}
}

// The same joins in another order: b sees c active first and hands it the
// part of c's held range that b owned, while c's view does not show b
// yet. That part has its entries: its lookups are answered at once, and
// the rest of the range stays held.
func TestAHandoffOfPartOfAHeldRangeReleasesThatPart(t *testing.T) {
	c, _, b, j := joinedBeside(t, false)
	id, held := splitHoldGrain(t)
	require.Empty(t, register(t, b, id))
	// rest lies in the same held range, in the part b keeps once it sees c.
	var rest actor.GrainID
	abc := ringOf("a", "b", "c")
	for i := 0; rest == (actor.GrainID{}); i++ {
		require.Less(t, i, 100000, "no grain in the part b keeps")
		if o, _ := abc.OwnerOf(grain(i)); held.Contains(ring.Hash(grain(i))) && o.ID == "b" {
			rest = grain(i)
		}
	}
	parked := make(chan string, 1)
	j.dir.Locate(rest, "", func(silo string, _ bool, err error) {
		assert.NoError(t, err)
		parked <- silo
	})
	all := c.view()
	b.dir.SetView(all)
	require.Eventually(t, func() bool { return j.dir.Stats().HandoffsReceived > 0 }, 10*time.Second, time.Millisecond, "b hands c its part")
	assert.Equal(t, "b", locate(t, j, id, ""), "the part b handed over is served")
	select {
	case silo := <-parked:
		t.Fatalf("a lookup in the rest of the held range was answered (%q) with nothing handed over for it", silo)
	default:
	}
	j.dir.SetView(all)
	select {
	case <-parked: // the view gave that part to b: the lookup went on there
	case <-time.After(10 * time.Second):
		t.Fatal("the lookup was not answered once the view gave its part to b")
	}
}

// A handoff that would cut a hold into more than maxHoldPieces pieces
// leaves it whole: a peer's many small ranges cannot grow the hold list
// that every request scans.
func TestAHandoffCutTooFineLeavesTheHoldWhole(t *testing.T) {
	_, _, _, j := joinedBeside(t, false)
	_, held := splitHoldGrain(t)
	before := j.dir.Stats().Held
	require.Greater(t, held.Last-held.First, uint64(4*maxHoldPieces))
	var fine []ring.Range
	for i := range uint64(maxHoldPieces + 1) {
		h := held.First + 1 + 2*i
		fine = append(fine, ring.Range{First: h, Last: h})
	}
	j.dir.release(fine)
	assert.Equal(t, before, j.dir.Stats().Held, "the hold stays whole")
	j.dir.release(fine[:maxHoldPieces-1])
	assert.Equal(t, before+maxHoldPieces-1, j.dir.Stats().Held, "a cut within the bound is made")
}

func TestClipIsThePartsOfRangesWithinARange(t *testing.T) {
	const top = ^uint64(0)
	rs := []ring.Range{{First: 0, Last: 4}, {First: 10, Last: 20}, {First: 30, Last: top}}
	for _, tc := range []struct {
		r    ring.Range
		want []ring.Range
	}{
		{ring.Range{First: 5, Last: 9}, nil},
		{ring.Range{First: 2, Last: 12}, []ring.Range{{First: 2, Last: 4}, {First: 10, Last: 12}}},
		{ring.Range{First: 0, Last: top}, rs},
		{ring.Range{First: 20, Last: 30}, []ring.Range{{First: 20, Last: 20}, {First: 30, Last: 30}}},
		{ring.Range{First: top, Last: top}, []ring.Range{{First: top, Last: top}}},
	} {
		assert.Equal(t, tc.want, clip(tc.r, rs), "%v", tc.r)
	}
	assert.Empty(t, clip(ring.Range{First: 0, Last: top}, nil))
}

func TestOutsideIsWhatARangeHasBeyondItsParts(t *testing.T) {
	const top = ^uint64(0)
	for _, tc := range []struct {
		r    ring.Range
		in   []ring.Range
		want []ring.Range
	}{
		{ring.Range{First: 10, Last: 20}, nil, []ring.Range{{First: 10, Last: 20}}},
		{ring.Range{First: 10, Last: 20}, []ring.Range{{First: 10, Last: 20}}, nil},
		{ring.Range{First: 10, Last: 20}, []ring.Range{{First: 12, Last: 14}, {First: 17, Last: 20}},
			[]ring.Range{{First: 10, Last: 11}, {First: 15, Last: 16}}},
		{ring.Range{First: 10, Last: 20}, []ring.Range{{First: 10, Last: 11}}, []ring.Range{{First: 12, Last: 20}}},
		{ring.Range{First: 0, Last: top}, []ring.Range{{First: 5, Last: top}}, []ring.Range{{First: 0, Last: 4}}},
		{ring.Range{First: 0, Last: top}, []ring.Range{{First: 0, Last: 5}}, []ring.Range{{First: 6, Last: top}}},
	} {
		assert.Equal(t, tc.want, outside(tc.r, tc.in), "%v without %v", tc.r, tc.in)
	}
}
