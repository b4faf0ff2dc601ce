package quota

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// naiveFairShare is max-min fairness by the book: raise every unmet
// claim one permit at a time while capacity lasts.
func naiveFairShare(capacity int64, claims []int64) []int64 {
	got := make([]int64, len(claims))
	for capacity > 0 {
		raised := false
		for i := range claims {
			if got[i] < claims[i] && capacity > 0 {
				got[i]++
				capacity--
				raised = true
			}
		}
		if !raised {
			break
		}
	}
	return got
}

func TestFairShareIsMaxMinFairAmongTheClaims(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		claims := make([]int64, 1+rng.IntN(6))
		for i := range claims {
			claims[i] = int64(rng.IntN(40))
		}
		capacity := int64(rng.IntN(120))
		want := naiveFairShare(capacity, claims)
		var sum int64
		for _, c := range claims {
			sum += c
		}
		got := fairShare(capacity, claims[0], slices.Clone(claims[1:]))
		if sum <= capacity {
			// Every claim fits: claim 0 gets it and an even part of what
			// is left.
			require.Equal(t, claims[0]+(capacity-sum)/int64(len(claims)), got, "claims %v, capacity %d", claims, capacity)
			continue
		}
		// The naive split may hand the remainder of an uneven division
		// to any claim; water filling gives it to none.
		require.InDelta(t, want[0], got, 1, "claims %v, capacity %d", claims, capacity)
		require.LessOrEqual(t, got, want[0], "claims %v, capacity %d", claims, capacity)
	}
}

func TestAllocatorSharesAnIntervalAmongActiveHolders(t *testing.T) {
	var a Allocator
	// Four holders, known from the interval before, each wanting 100 per
	// interval, share 100.
	before := Interval{End: epoch, Length: time.Second}
	for h := range uint64(4) {
		a.Size(epoch.Add(-time.Millisecond), before, Request{Holder: h, Rate: 100, Need: 1}, 0)
	}
	iv := Interval{End: epoch.Add(time.Second), Length: time.Second}
	for h := range uint64(4) {
		n := a.Size(epoch, iv, Request{Holder: h, Rate: 100, Need: 1}, 100-int64(h)*25)
		require.Equal(t, int64(25), n, "holder %d", h)
		a.Granted(h, iv, n)
	}
	require.Equal(t, 4, a.Holders())
	// A holder that already had its share gets what it needs, no more,
	// while the others' claims are unmet.
	require.Equal(t, int64(1), a.Size(epoch, iv, Request{Holder: 0, Rate: 100, Need: 1}, 4))
	// In the next interval the claims start again.
	next := Interval{End: iv.End.Add(time.Second), Length: time.Second}
	require.Equal(t, int64(25), a.Size(iv.End, next, Request{Holder: 0, Rate: 100, Need: 1}, 100))
}

func TestAllocatorGivesAwayWhatNobodyClaimsWithinTheHorizon(t *testing.T) {
	var a Allocator
	iv := Interval{End: epoch.Add(100 * time.Millisecond), Length: 100 * time.Millisecond}
	a.Size(epoch, iv, Request{Holder: 1, Rate: 1000, Need: 1}, 1000)
	// Holder 2 claims 100 of 1000, holder 1 another 100: half of the 800
	// left would go to holder 2 as well, but a slice holds no more than
	// 250 ms of its demand.
	require.Equal(t, int64(250), a.Size(epoch, iv, Request{Holder: 2, Rate: 1000, Need: 1}, 1000))
}

func TestAllocatorKeepsALongIntervalForLaterHolders(t *testing.T) {
	var a Allocator
	iv := Interval{End: epoch.Add(time.Hour), Length: time.Hour}
	n := a.Size(epoch, iv, Request{Holder: 1, Rate: 1000, Need: 1}, 1<<40)
	require.Equal(t, int64(250), n, "a quarter second of demand")
	a.Granted(1, iv, n)
	require.Equal(t, int64(250), a.Size(epoch, iv, Request{Holder: 2, Rate: 1000, Need: 1}, 1<<40-n))
}

func TestAllocatorForgetsHoldersThatStoppedAsking(t *testing.T) {
	var a Allocator
	iv := Interval{End: epoch.Add(100 * time.Millisecond), Length: 100 * time.Millisecond}
	a.Size(epoch, iv, Request{Holder: 1, Rate: 1000, Need: 1}, 100)
	later := epoch.Add(250 * time.Millisecond)
	iv = Interval{End: later.Add(50 * time.Millisecond), Length: 100 * time.Millisecond}
	// Holder 1's claim lapsed two intervals after its last request.
	require.Equal(t, int64(100), a.Size(later, iv, Request{Holder: 2, Rate: 1000, Need: 1}, 100))
	require.Equal(t, 1, a.Holders())
}

func TestAllocatorKeepsAtMostMaxHolders(t *testing.T) {
	var a Allocator
	iv := Interval{End: epoch.Add(time.Hour), Length: time.Hour}
	for h := range uint64(MaxHolders + 10) {
		a.Size(epoch.Add(time.Duration(h)), iv, Request{Holder: h, Rate: 1, Need: 1}, 1<<40)
	}
	require.Equal(t, MaxHolders, a.Holders())
}

func TestAllocatorNeverSizesBeyondWhatIsFree(t *testing.T) {
	var a Allocator
	iv := Interval{End: epoch.Add(time.Second), Length: time.Second}
	require.Equal(t, int64(0), a.Size(epoch, iv, Request{Holder: 1, Rate: 1 << 62, Need: 1 << 62}, 0))
	require.Equal(t, int64(7), a.Size(epoch, iv, Request{Holder: 1, Rate: 1 << 62, Need: 1 << 62}, 7))
}

// hot makes h lease: enough demand within one rate period.
func hot(h *Holder, now time.Time) {
	for range 200 {
		h.Take(now, 1, false, false)
	}
}

func TestHolderCallsUntilItsDemandIsHigh(t *testing.T) {
	h := NewHolder(7, Options{MinRate: 1000}) // 100 per rate period
	for i := range 99 {
		a, _ := h.Take(epoch, 1, false, false)
		require.Equal(t, Call, a, "acquisition %d", i)
		_, ok := h.Refill(epoch, 1)
		require.False(t, ok)
	}
	a, _ := h.Take(epoch, 1, false, false)
	require.Equal(t, Wait, a)
	r, ok := h.Refill(epoch, 1)
	require.True(t, ok)
	require.Equal(t, uint64(7), r.Holder)
	require.True(t, h.Pending())
	_, again := h.Refill(epoch, 1)
	require.False(t, again, "one request on its way at a time")
}

func TestHolderAnswersFromItsSliceUntilItsDeadline(t *testing.T) {
	h := NewHolder(1, Options{MinRate: 100})
	hot(h, epoch)
	_, ok := h.Refill(epoch, 1)
	require.True(t, ok)
	now := epoch.Add(2 * time.Millisecond)
	h.Sliced(now, Slice{ID: 9, Permits: 3, ExpiresIn: 100 * time.Millisecond, Interval: 100 * time.Millisecond, IntervalID: 1})
	for range 3 {
		a, _ := h.Take(now, 1, false, false)
		require.Equal(t, Granted, a)
	}
	// The deadline counts from when the request was sent, less the
	// margin: 99 ms after epoch.
	h.Sliced(now, Slice{ID: 10, Permits: 5, ExpiresIn: 100 * time.Millisecond, Interval: 100 * time.Millisecond, IntervalID: 1})
	a, _ := h.Take(epoch.Add(99*time.Millisecond-1), 1, false, false)
	require.Equal(t, Granted, a)
	a, _ = h.Take(epoch.Add(99*time.Millisecond), 1, false, false)
	require.Equal(t, Wait, a, "the slice expired")
	require.Equal(t, []IntervalCount{{IntervalID: 1, Granted: 4}}, h.Intervals())
}

func TestHolderRejectsLocallyWhenTheIntervalIsExhausted(t *testing.T) {
	h := NewHolder(1, Options{MinRate: 100})
	hot(h, epoch)
	h.Refill(epoch, 1)
	h.Sliced(epoch, Slice{ID: 1, Permits: 1, ExpiresIn: 50 * time.Millisecond, Interval: 100 * time.Millisecond, IntervalID: 1, Exhausted: true})
	a, _ := h.Take(epoch, 1, false, false)
	require.Equal(t, Granted, a)
	a, retry := h.Take(epoch.Add(10*time.Millisecond), 1, false, false)
	require.Equal(t, Rejected, a)
	require.Equal(t, 50*time.Millisecond-500*time.Microsecond-10*time.Millisecond, retry)
	_, ok := h.Refill(epoch.Add(10*time.Millisecond), 1)
	require.False(t, ok, "nothing to ask for until the interval ends")
}

func TestHolderWithAQueueSendsWhatTheSliceCannotCoverToTheGrain(t *testing.T) {
	h := NewHolder(1, Options{MinRate: 100})
	hot(h, epoch)
	h.Refill(epoch, 1)
	h.Sliced(epoch, Slice{ID: 1, Permits: 0, ExpiresIn: 50 * time.Millisecond, Interval: 100 * time.Millisecond, IntervalID: 1, Exhausted: true, Queues: true})
	a, _ := h.Take(epoch, 1, false, false)
	require.Equal(t, Call, a, "an acquisition may wait in the queue")
	a, _ = h.Take(epoch, 1, true, false)
	require.Equal(t, Rejected, a, "an attempt never waits")
}

func TestHolderAcquiresPerCallAfterTheGrainRefusesSlices(t *testing.T) {
	h := NewHolder(1, Options{MinRate: 100})
	hot(h, epoch)
	h.Refill(epoch, 1)
	h.Sliced(epoch, Slice{Exact: true})
	a, _ := h.Take(epoch, 1, false, false)
	require.Equal(t, Call, a)
	_, ok := h.Refill(epoch, 1)
	require.False(t, ok)
	// After the pause it asks again.
	later := epoch.Add(coldPause)
	hot(h, later)
	_, ok = h.Refill(later, 1)
	require.True(t, ok)
}

func TestHolderThatWaitedAndStillCannotBeCoveredCalls(t *testing.T) {
	h := NewHolder(1, Options{MinRate: 100})
	hot(h, epoch)
	h.Refill(epoch, 1)
	h.Sliced(epoch, Slice{ID: 1, Permits: 2, ExpiresIn: 50 * time.Millisecond, Interval: 100 * time.Millisecond, IntervalID: 1})
	a, _ := h.Take(epoch, 3, false, true)
	require.Equal(t, Call, a)
}

func TestHolderGoesBackToCallsWhenTheKeyCools(t *testing.T) {
	h := NewHolder(1, Options{MinRate: 1000})
	hot(h, epoch)
	h.Refill(epoch, 1)
	h.Sliced(epoch, Slice{ID: 4, Permits: 50, ExpiresIn: time.Second, Interval: time.Second, IntervalID: 1})
	require.True(t, h.Leasing())
	_, _, ok := h.Unused(epoch, false)
	require.False(t, ok, "a leasing holder keeps its slice")
	// A whole rate period with almost no demand.
	quiet := epoch.Add(3 * ratePeriod)
	a, _ := h.Take(quiet, 1, false, false)
	require.Equal(t, Call, a)
	require.False(t, h.Leasing())
	id, n, ok := h.Unused(quiet, false)
	require.True(t, ok)
	require.Equal(t, uint64(4), id)
	require.Equal(t, int64(50), n)
	_, _, ok = h.Unused(quiet, false)
	require.False(t, ok, "given back once")
}

func TestHolderPausesWhenIntervalsAreTooShortForItsRoundTrips(t *testing.T) {
	h := NewHolder(1, Options{MinRate: 100})
	hot(h, epoch)
	h.Refill(epoch, 1)
	h.Sliced(epoch.Add(time.Millisecond), Slice{ID: 1, Permits: 5, ExpiresIn: 2 * time.Millisecond, Interval: 2 * time.Millisecond, IntervalID: 1})
	at := epoch.Add(1500 * time.Microsecond)
	a, _ := h.Take(at, 1, false, false)
	require.Equal(t, Granted, a, "the slice is still used")
	_, ok := h.Refill(epoch.Add(3*time.Millisecond), 1)
	require.False(t, ok, "no more slices for a while")
}

func TestHolderWithAHugeMinRateStaysCold(t *testing.T) {
	h := NewHolder(1, Options{MinRate: 1 << 62})
	hot(h, epoch)
	require.False(t, h.Leasing())
}
