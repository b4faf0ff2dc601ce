package quota

import (
	"math"
	"slices"
	"time"
)

// MaxHolders bounds the holders an allocator keeps claims for. Holder
// identities come from the network, so a caller that invents them must
// not grow the grain without end: past the bound, the holder seen least
// recently is forgotten.
const MaxHolders = 1024

// Request is a holder's ask for a slice.
type Request struct {
	// Holder identifies the holder (random, chosen by the holder).
	Holder uint64
	// Rate is the holder's recent demand in permits per second, granted
	// or not.
	Rate int64
	// Need is the permits of the acquisition that made the holder ask;
	// a slice holds at least that many when they are free.
	Need int64
}

// Interval is the replenishment interval a slice is charged in: it ends
// at End and lasts Length.
type Interval struct {
	End    time.Time
	Length time.Duration
}

// claim is what the allocator knows of one holder.
type claim struct {
	want    int64     // permits per interval, from the holder's rate
	granted int64     // granted in the interval ending at end
	end     time.Time // the interval granted counts for
	seen    time.Time // the holder's last request
}

// Allocator sizes slices by fair share. It is not safe for concurrent
// use: the grain's turns drive it.
type Allocator struct {
	claims  map[uint64]claim
	scratch []int64
}

// Size returns how many of the available permits the holder of r may have
// now, in interval iv: what brings it to its max-min fair share of the
// interval's quota (the permits available plus those already granted in
// it) among the claims of the holders active in the last two intervals,
// but no more than its demand over SliceHorizon; at least r.Need when that
// many are free, at most available. It records
// r's claim, not the grant: call Granted with what was charged.
func (a *Allocator) Size(now time.Time, iv Interval, r Request, available int64) int64 {
	mine, had := a.note(now, iv, r)
	if available <= 0 {
		return 0
	}
	others := a.scratch[:0]
	capacity := satAdd(available, had)
	lapse := 2 * iv.Length
	for id, c := range a.claims {
		if id == r.Holder {
			continue
		}
		if now.Sub(c.seen) > lapse {
			delete(a.claims, id)
			continue
		}
		others = append(others, c.want)
		if c.end.Equal(iv.End) {
			capacity = satAdd(capacity, c.granted)
		}
	}
	a.scratch = others
	share := min(fairShare(capacity, mine, others)-had, perInterval(r.Rate, SliceHorizon))
	return min(max(share, min(max(r.Need, 1), available)), available)
}

// SliceHorizon bounds a slice to the holder's demand over this long: a
// holder comes back for more at least this often, so that what it did
// not ask for yet stays in the grain for the holders that come later in
// a long interval.
const SliceHorizon = 250 * time.Millisecond

// note records r's claim and returns the holder's claim on iv (at least
// what it had plus what it needs now) and what it had in iv already.
func (a *Allocator) note(now time.Time, iv Interval, r Request) (claimed, had int64) {
	if a.claims == nil {
		a.claims = make(map[uint64]claim)
	}
	c, ok := a.claims[r.Holder]
	if !ok && len(a.claims) >= MaxHolders {
		a.forgetOldest()
	}
	c.want = perInterval(r.Rate, iv.Length)
	c.seen = now
	if !c.end.Equal(iv.End) {
		c.end, c.granted = iv.End, 0
	}
	a.claims[r.Holder] = c
	return max(c.want, satAdd(c.granted, r.Need)), c.granted
}

// Granted records n permits charged to holder h in iv.
func (a *Allocator) Granted(h uint64, iv Interval, n int64) {
	if c, ok := a.claims[h]; ok && c.end.Equal(iv.End) {
		c.granted = satAdd(c.granted, n)
		a.claims[h] = c
	}
}

// Returned records n permits that holder h gave back in iv.
func (a *Allocator) Returned(h uint64, iv Interval, n int64) {
	if c, ok := a.claims[h]; ok && c.end.Equal(iv.End) {
		c.granted = max(c.granted-n, 0)
		a.claims[h] = c
	}
}

// Holders returns how many holders the allocator keeps claims for.
func (a *Allocator) Holders() int { return len(a.claims) }

// Reset forgets every claim: the limiter started afresh.
func (a *Allocator) Reset() { clear(a.claims) }

func (a *Allocator) forgetOldest() {
	var oldest uint64
	var at time.Time
	first := true
	for id, c := range a.claims {
		if first || c.seen.Before(at) {
			oldest, at, first = id, c.seen, false
		}
	}
	delete(a.claims, oldest)
}

// perInterval turns a rate in permits per second into permits per
// interval of length d, saturating.
func perInterval(rate int64, d time.Duration) int64 {
	if rate <= 0 || d <= 0 {
		return 0
	}
	f := float64(rate) * d.Seconds()
	if f >= math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(math.Ceil(f))
}

// fairShare is mine's part of capacity under max-min fairness among mine
// and others (water filling): claims below the water level are met in
// full, the rest get the level. When every claim fits, the capacity left
// beyond the claims is split evenly among all of them, so that a claim
// that was too low still gets a part of what nobody claims. others is
// sorted in place.
func fairShare(capacity, mine int64, others []int64) int64 {
	slices.Sort(others)
	left, count := capacity, int64(len(others)+1)
	placed := false // whether mine has been met below the level
	for _, c := range others {
		if !placed && mine <= c {
			if mine > left/count {
				return left / count
			}
			left, count, placed = left-mine, count-1, true
		}
		if c > left/count {
			if placed {
				return mine
			}
			return left / count
		}
		left, count = left-c, count-1
	}
	if !placed {
		if mine > left { // count is 1 here
			return left
		}
		left -= mine
	}
	// Every claim fits: share what nobody claims.
	return satAdd(mine, left/int64(len(others)+1))
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
