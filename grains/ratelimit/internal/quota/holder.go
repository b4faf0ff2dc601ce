package quota

import "time"

// Answer is the holder's decision on one acquisition.
type Answer uint8

const (
	// Granted: answered from the slice, with no call.
	Granted Answer = iota + 1
	// Rejected: answered locally: the interval's quota is gone (the grain
	// said so), and the acquisition would not wait in a queue.
	Rejected
	// Call: acquire through the grain, per call, with today's exact
	// semantics: the key is cold, the limiter grants no slices now, or
	// the acquisition may wait in the limiter's queue.
	Call
	// Wait: a slice is on its way; wait for it (Refill's reply), then
	// Take again with waited set.
	Wait
)

// Slice is the grain's answer to a Request.
type Slice struct {
	// ID names the slice for a return of its unused permits.
	ID uint64
	// Permits is how many permits the slice holds (0: none were free).
	Permits int64
	// ExpiresIn is how long the slice may be used, from when the grain
	// answered: what is left of its interval.
	ExpiresIn time.Duration
	// Interval is the length of the replenishment interval.
	Interval time.Duration
	// IntervalID tells intervals apart (the grain's end of it, in its
	// clock's nanoseconds).
	IntervalID int64
	// Exhausted says the interval has no permits left.
	Exhausted bool
	// Queues says the limiter has a queue: an acquisition the slice
	// cannot cover goes to the grain, where it may wait.
	Queues bool
	// Exact says the grain grants no slices now (waiters are queued,
	// options differ, replenishment is manual): acquire per call.
	Exact bool
}

// Options tune a Holder.
type Options struct {
	// MinRate is the demand, in permits asked for per second, from which
	// the holder asks for slices; below half of it, it goes back to
	// calls.
	MinRate int64
}

// The holder's fixed tuning.
const (
	// ratePeriod is the holder's demand measurement period.
	ratePeriod = 100 * time.Millisecond
	// coldPause is how long a holder acquires per call after the grain
	// refused a slice, or a slice request failed, before it asks again.
	coldPause = time.Second
	// marginDivisor: a slice is used until 1/marginDivisor of its time
	// before its deadline, for clocks that run at different rates.
	marginDivisor = 100
	// minRoundTrips is how many slice round trips an interval must hold
	// for slices to pay for themselves.
	minRoundTrips = 4
	// initialRTT is the round trip assumed before one was measured.
	initialRTT = time.Millisecond
	// historyLen is how many past intervals Intervals reports.
	historyLen = 64
)

// IntervalCount is how many permits a holder granted locally from its
// slices of one interval.
type IntervalCount struct {
	IntervalID int64
	Granted    int64
}

// Holder is the holder side of leased quota for one limiter. It is not
// safe for concurrent use: its shell holds a mutex around every call.
type Holder struct {
	opts Options
	id   uint64

	leasing bool // demand is high enough: acquisitions go through slices
	pending bool // a slice request is on its way
	sentAt  time.Time
	rtt     time.Duration // smoothed round trip of slice requests
	// coldUntil is when the holder may ask for a slice again after a
	// refusal or failure.
	coldUntil time.Time

	slice struct {
		id         uint64
		remaining  int64
		deadline   time.Time // local; zero: no slice
		intervalID int64
		interval   time.Duration
		exhausted  bool
		queues     bool
		granted    int64 // permits granted locally in this interval
	}

	// Demand: permits asked for in the current and the previous rate
	// period (granted or not).
	periodStart time.Time
	cur, prev   int64

	history []IntervalCount
	stats   Stats
}

// Stats count a holder's answers.
type Stats struct {
	// Local counts acquisitions granted from slices.
	Local int64
	// LocalRejected counts acquisitions rejected locally.
	LocalRejected int64
	// Calls counts acquisitions sent to the grain.
	Calls int64
	// Slices counts slice requests answered.
	Slices int64
}

// NewHolder returns the core of a holder identified by id (random, so
// that the grain tells holders apart).
func NewHolder(id uint64, o Options) *Holder {
	if o.MinRate <= 0 {
		o.MinRate = 1
	}
	return &Holder{id: id, opts: o, rtt: initialRTT}
}

// ID returns the holder's identity.
func (h *Holder) ID() uint64 { return h.id }

// Take decides an acquisition of n permits at now. try says the
// acquisition never waits in the limiter's queue (an attempt); waited
// says the caller already waited once for a slice. A Rejected answer
// comes with the time until the holder asks for the next interval's
// slice.
func (h *Holder) Take(now time.Time, n int64, try, waited bool) (Answer, time.Duration) {
	if !waited { // counted when it first came
		h.count(now, n)
	}
	if !h.leasing {
		h.stats.Calls++
		return Call, 0
	}
	s := &h.slice
	live := !s.deadline.IsZero() && now.Before(s.deadline)
	switch {
	case live && s.remaining >= n && (n > 0 || s.remaining > 0): // zero permits: something must be free
		s.remaining -= n
		s.granted += n
		h.stats.Local++
		return Granted, 0
	case live && s.exhausted && (try || !s.queues):
		h.stats.LocalRejected++
		return Rejected, s.deadline.Sub(now)
	case live && s.exhausted, waited && live, !h.pending && now.Before(h.coldUntil):
		// A slice that came and cannot cover the acquisition: the grain
		// decides it, exactly. (One that came already expired, asked for
		// just before the grain's interval ended, is followed by the
		// next interval's: wait for that.)
		h.stats.Calls++
		return Call, 0
	}
	return Wait, 0
}

// count adds n to the demand and moves between calls and slices as the
// demand crosses MinRate.
func (h *Holder) count(now time.Time, n int64) {
	if h.periodStart.IsZero() {
		h.periodStart = now
	}
	threshold := max(h.opts.MinRate/int64(time.Second/ratePeriod), 1)
	if elapsed := now.Sub(h.periodStart); elapsed >= ratePeriod {
		if elapsed >= 2*ratePeriod {
			h.prev = 0 // a whole period passed without demand
		} else {
			h.prev = h.cur
		}
		h.cur, h.periodStart = 0, now
		if h.leasing && 2*h.prev < threshold {
			h.leasing = false // the key cooled: back to calls
		}
	}
	h.cur = satAdd(h.cur, max(n, 1))
	if !h.leasing && max(h.cur, h.prev) >= threshold {
		h.leasing = true
	}
}

// Rate returns the demand in permits per second.
func (h *Holder) Rate() int64 {
	per := max(h.cur, h.prev)
	return satMul(per, int64(time.Second/ratePeriod))
}

// Refill reports whether to send a slice request now, and the request:
// when leasing, with none on its way and not paused, and the slice has
// expired, cannot cover need, or runs low (less than two round trips of
// demand left) while its interval still has permits. The holder counts
// the request as sent at now.
func (h *Holder) Refill(now time.Time, need int64) (Request, bool) {
	if !h.leasing || h.pending || now.Before(h.coldUntil) {
		return Request{}, false
	}
	s := &h.slice
	live := !s.deadline.IsZero() && now.Before(s.deadline)
	low := max(satMul(h.Rate(), int64(2*h.rtt))/int64(time.Second), 1)
	if live && (s.exhausted || s.remaining >= max(need, low)) {
		return Request{}, false
	}
	h.pending, h.sentAt = true, now
	// The acquisitions that arrive while the request is on its way wait
	// for its slice: it needs them too, or they would go per call.
	return Request{Holder: h.id, Rate: h.Rate(), Need: satAdd(max(need, 1), low)}, true
}

// Sliced applies the grain's answer to the request Refill made, at now.
func (h *Holder) Sliced(now time.Time, r Slice) {
	h.pending = false
	h.stats.Slices++
	sample, before := max(now.Sub(h.sentAt), 0), h.rtt
	if sample > 0 {
		// Smoothed as TCP smooths its round trip, so that one slow
		// answer (a grain that moved) does not stop leasing.
		h.rtt += (sample - h.rtt) / 8
	}
	if r.Exact {
		h.pause(now)
		return
	}
	if r.Interval < minRoundTrips*min(before, sample) {
		// Slices die before they pay for their round trips (as the
		// last answer and those before it both say).
		h.pause(now)
	}
	deadline := h.sentAt.Add(r.ExpiresIn - r.ExpiresIn/marginDivisor)
	s := &h.slice
	if s.deadline.IsZero() || s.intervalID != r.IntervalID {
		h.closeInterval()
		s.intervalID, s.remaining, s.granted = r.IntervalID, 0, 0
		s.deadline = deadline
	}
	s.id = r.ID
	s.remaining = satAdd(s.remaining, r.Permits)
	s.deadline = minTime(s.deadline, deadline)
	s.interval = r.Interval
	s.exhausted = r.Exhausted
	s.queues = r.Queues
}

// Failed records that the slice request failed at now: the holder
// acquires per call for a while.
func (h *Holder) Failed(now time.Time) {
	h.pending = false
	h.pause(now)
}

// pause stops slices for coldPause.
func (h *Holder) pause(now time.Time) { h.coldUntil = now.Add(coldPause) }

// Unused takes the slice's unused permits for a return to the grain, when
// the slice is still live and the holder stopped leasing (or closes,
// with all set): its id and count, or false when there is nothing to give
// back. The slice holds nothing afterwards.
func (h *Holder) Unused(now time.Time, all bool) (uint64, int64, bool) {
	s := &h.slice
	if (h.leasing && !all) || s.deadline.IsZero() || !now.Before(s.deadline) || s.remaining <= 0 {
		return 0, 0, false
	}
	n := s.remaining
	s.remaining = 0
	return s.id, n, true
}

// Leasing reports whether acquisitions go through slices.
func (h *Holder) Leasing() bool { return h.leasing }

// Pending reports whether a slice request is on its way.
func (h *Holder) Pending() bool { return h.pending }

// Stats returns the holder's counters.
func (h *Holder) Stats() Stats { return h.stats }

// Intervals returns the local grants of the holder's past intervals,
// oldest first, and of the current one last.
func (h *Holder) Intervals() []IntervalCount {
	out := append([]IntervalCount(nil), h.history...)
	if !h.slice.deadline.IsZero() {
		out = append(out, IntervalCount{IntervalID: h.slice.intervalID, Granted: h.slice.granted})
	}
	return out
}

// closeInterval files the current interval's local grants.
func (h *Holder) closeInterval() {
	s := &h.slice
	if s.deadline.IsZero() {
		return
	}
	if len(h.history) == historyLen {
		h.history = append(h.history[:0], h.history[1:]...)
	}
	h.history = append(h.history, IntervalCount{IntervalID: s.intervalID, Granted: s.granted})
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > (1<<63-1)/b {
		return 1<<63 - 1
	}
	return a * b
}
