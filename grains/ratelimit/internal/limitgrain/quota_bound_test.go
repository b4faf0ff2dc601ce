package limitgrain

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit/internal/quota"
	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
)

// The leased-quota bound, checked on the real grain and the real holder
// core: many holders with random, shifting demand acquire from one key
// through slices and per call, over a network with random latency; holders
// crash and are replaced, and the grain moves (its activation ends,
// gracefully or by a crash, and a new one starts from the stored state).
// Over every window of the limiter's own schedule the permits granted
// (locally, at the holder's time, and per call, at the grain's) stay
// within the algorithm's bound, with no overshoot. Per-call grants made
// after the last snapshot before a grain crash are left out: losing them
// is exact mode's documented snapshot loss, not leased quota's; slices are
// never left out, so a slice the new activation forgot would show.

// sim is one run.
type sim struct {
	t    *testing.T
	rng  *rand.Rand
	now  time.Time
	alg  simAlgorithm
	f    *fakeRuntime
	up   bool // the grain has an activation
	call simGrain

	holders []*simHolder
	toGrain []simMessage // slice requests on their way to the grain, by arrival
	grants  []simGrant
	ends    map[time.Time]bool // the interval ends the grain's schedule went through

	lastWrite int // f.writes when the ledger was last stored
	unstored  []int
	lost      int64 // per-call permits lost with a crash
	moves     int
}

// simGrain is what the simulation calls on the current activation.
type simGrain interface {
	LeaseQuota(context.Context, *pb.QuotaRequest) (*pb.QuotaReply, error)
	Acquire(context.Context, *pb.AcquireRequest) (*pb.LeaseMetadata, error)
	SaveState() ([]byte, error)
	intervalEnd(now time.Time) (time.Time, bool)
}

func (g *grain[O, P, R]) intervalEnd(now time.Time) (time.Time, bool) {
	return g.core.(intervaler).IntervalEnd(now)
}

type simAlgorithm struct {
	name  string
	start func(f *fakeRuntime, state []byte) simGrain
	check func(s *sim)
}

type simHolder struct {
	core    *quota.Holder
	level   int // acquisitions per millisecond
	waiting []int64
	reply   *simMessage // the slice reply on its way back
}

type simMessage struct {
	at      time.Time
	holder  *simHolder
	request quota.Request
	reply   quota.Slice
}

type simGrant struct {
	at      time.Time
	permits int64
	call    bool // per call, not from a slice
}

func TestLeasedQuotaStaysWithinTheAlgorithmsBound(t *testing.T) {
	algorithms := leasedAlgorithms()
	for _, alg := range algorithms {
		for seed := range uint64(8) {
			t.Run(fmt.Sprintf("%s/seed-%d", alg.name, seed), func(t *testing.T) {
				s := newSim(t, alg, seed)
				s.run(4 * time.Second)
				alg.check(s)
				local, calls := s.totals()
				t.Logf("granted %d locally and %d per call, %d grain moves, %d per-call permits lost with crashes", local, calls, s.moves, s.lost)
				require.Greater(t, local, 3*calls, "hot holders answer from slices")
				require.Positive(t, s.moves)
			})
		}
	}
}

func leasedAlgorithms() []simAlgorithm {
	return []simAlgorithm{
		{
			name: "fixed-window",
			start: func(f *fakeRuntime, state []byte) simGrain {
				return startGrain[limiter.FixedWindowOptions, *pb.FixedWindowOptions, *pb.FixedWindowAcquireRequest](f, fixedWindow,
					limiter.FixedWindowOptions{PermitLimit: 200, Window: 100 * time.Millisecond}, state)
			},
			check: func(s *sim) { s.checkWindows(100*time.Millisecond, 200) },
		},
		{
			name: "sliding-window",
			start: func(f *fakeRuntime, state []byte) simGrain {
				return startGrain[limiter.SlidingWindowOptions, *pb.SlidingWindowOptions, *pb.SlidingWindowAcquireRequest](f, slidingWindow,
					limiter.SlidingWindowOptions{PermitLimit: 200, Window: 100 * time.Millisecond, SegmentsPerWindow: 4}, state)
			},
			check: func(s *sim) { s.checkWindows(100*time.Millisecond, 200) },
		},
		{
			name: "token-bucket",
			start: func(f *fakeRuntime, state []byte) simGrain {
				return startGrain[limiter.TokenBucketOptions, *pb.TokenBucketOptions, *pb.TokenBucketAcquireRequest](f, tokenBucket,
					limiter.TokenBucketOptions{TokenLimit: 100, TokensPerPeriod: 20, ReplenishmentPeriod: 25 * time.Millisecond}, state)
			},
			check: func(s *sim) { s.checkBucket(100, 20) },
		},
	}
}

func newSim(t *testing.T, alg simAlgorithm, seed uint64) *sim {
	s := &sim{t: t, rng: rand.New(rand.NewPCG(seed, 26)), now: epoch, alg: alg, ends: make(map[time.Time]bool)}
	s.activate(nil)
	for range 8 {
		s.holders = append(s.holders, s.newHolder())
	}
	return s
}

func (s *sim) newHolder() *simHolder {
	return &simHolder{core: quota.NewHolder(s.rng.Uint64(), quota.Options{MinRate: 100}), level: s.rng.IntN(4)}
}

// activate starts an activation at s.now from state.
func (s *sim) activate(state []byte) {
	s.f = newRuntime(s.t, "limiter")
	s.f.now = s.now
	s.f.stored = state // the store outlives the activation
	s.call = s.alg.start(s.f, state)
	s.up = true
	s.lastWrite = s.f.writes
}

func (s *sim) run(d time.Duration) {
	const step = time.Millisecond
	downUntil := time.Time{}
	for end := s.now.Add(d); s.now.Before(end); {
		s.now = s.now.Add(step)
		if s.up {
			s.f.advance(step)
			if s.f.now.Sub(epoch)%(50*time.Millisecond) == 0 { // the flusher
				s.store()
			}
		} else if !s.now.Before(downUntil) {
			s.activate(s.f.stored)
		}
		if s.up {
			if end, ok := s.call.intervalEnd(s.now); ok {
				s.ends[end] = true
			}
		}
		s.deliver()
		for i, h := range s.holders {
			if s.rng.IntN(1000) == 0 { // a holder crashes; a new one takes its place
				s.holders[i] = s.newHolder()
				continue
			}
			if s.rng.IntN(200) == 0 {
				h.level = s.rng.IntN(4)
			}
			for range h.level {
				s.take(h, int64(1+s.rng.IntN(3)), false)
			}
		}
		if s.up && (s.rng.IntN(700) == 0 || s.moves == 0 && !s.now.Before(epoch.Add(d/2))) {
			s.move(&downUntil)
		}
	}
}

// store writes the grain's state, as the flusher does.
func (s *sim) store() {
	require.NoError(s.t, s.f.WriteState(context.Background()))
}

// move ends the activation, by a deactivation (which stores the state)
// or a crash (which keeps what was stored last), for up to a window.
func (s *sim) move(downUntil *time.Time) {
	s.moves++
	s.unstoredSince()
	if s.rng.IntN(2) == 0 {
		s.store()
	} else {
		// Per-call grants since the last write are lost with the crash.
		for _, i := range s.unstored {
			s.lost += s.grants[i].permits
			s.grants[i].permits = 0
		}
	}
	s.unstored = nil
	s.up = false
	down := time.Duration(0)
	if s.alg.name != "token-bucket" { // see checkBucket
		down = time.Duration(s.rng.IntN(150)) * time.Millisecond
	}
	*downUntil = s.now.Add(down)
	if down == 0 {
		s.activate(s.f.stored)
	}
}

// take runs one acquisition of holder h through its core, as the shell
// does.
func (s *sim) take(h *simHolder, n int64, waited bool) {
	answer, _ := h.core.Take(s.now, n, s.rng.IntN(2) == 0, waited)
	switch answer {
	case quota.Granted:
		if n > 0 {
			s.grants = append(s.grants, simGrant{at: s.now, permits: n})
		}
	case quota.Call:
		s.perCall(n)
	case quota.Wait:
		h.waiting = append(h.waiting, n)
	}
	if r, ok := h.core.Refill(s.now, n); ok {
		s.toGrain = append(s.toGrain, simMessage{at: s.now.Add(s.latency()), holder: h, request: r})
	}
}

func (s *sim) latency() time.Duration { return time.Duration(s.rng.IntN(2500)) * time.Microsecond }

// perCall acquires at the grain, at once (a call's latency does not
// change what the grain grants).
func (s *sim) perCall(n int64) {
	if !s.up {
		return // the call fails
	}
	md, err := s.call.Acquire(context.Background(), &pb.AcquireRequest{Permits: n})
	require.NoError(s.t, err)
	if md.Acquired {
		s.grants = append(s.grants, simGrant{at: s.now, permits: n, call: true})
		s.unstoredSince()
		s.unstored = append(s.unstored, len(s.grants)-1)
	}
}

// unstoredSince forgets the per-call grants a write has stored.
func (s *sim) unstoredSince() {
	if s.f.writes != s.lastWrite {
		s.unstored, s.lastWrite = s.unstored[:0], s.f.writes
	}
}

// deliver hands the grain the slice requests that arrived and the
// holders the replies that did.
func (s *sim) deliver() {
	if s.up {
		var later []simMessage
		for _, m := range s.toGrain {
			if m.at.After(s.now) {
				later = append(later, m)
				continue
			}
			s.unstoredSince()
			reply, err := s.call.LeaseQuota(context.Background(), &pb.QuotaRequest{Holder: m.request.Holder, Rate: m.request.Rate, Need: m.request.Need})
			require.NoError(s.t, err)
			s.unstoredSince()
			m.at, m.reply = s.now.Add(s.latency()), sliceOf(reply)
			m.holder.reply = &m
		}
		s.toGrain = later
	}
	for _, h := range s.holders {
		if h.reply == nil || h.reply.at.After(s.now) {
			continue
		}
		h.core.Sliced(s.now, h.reply.reply)
		h.reply = nil
		waiting := h.waiting
		h.waiting = nil
		for _, n := range waiting {
			s.take(h, n, true)
		}
	}
}

func sliceOf(r *pb.QuotaReply) quota.Slice {
	return quota.Slice{
		ID: r.SliceId, Permits: r.Permits, ExpiresIn: time.Duration(r.ExpiresInNanos), Interval: time.Duration(r.IntervalNanos),
		IntervalID: r.IntervalEndUnixNanos, Exhausted: r.Exhausted, Queues: r.Queues, Exact: r.Exact,
	}
}

func (s *sim) totals() (local, calls int64) {
	for _, g := range s.grants {
		if g.call {
			calls += g.permits
		} else {
			local += g.permits
		}
	}
	return local, calls
}

// granted sums the permits granted in [from, to).
func (s *sim) granted(from, to time.Time) int64 {
	var n int64
	for _, g := range s.grants {
		if !g.at.Before(from) && g.at.Before(to) {
			n += g.permits
		}
	}
	return n
}

// checkWindows checks the windows' bound: at most limit granted in every
// span of length window that ends where an interval of the schedule did
// (a fixed window's window, a sliding window's SegmentsPerWindow
// segments), and that the limit was reached, so that the bound was put to
// the test.
func (s *sim) checkWindows(window time.Duration, limit int64) {
	s.t.Helper()
	busiest := int64(0)
	for end := range s.ends {
		n := s.granted(end.Add(-window), end)
		require.LessOrEqual(s.t, n, limit, "granted in the window ending at %v", end.Sub(epoch))
		busiest = max(busiest, n)
	}
	require.GreaterOrEqual(s.t, busiest, limit*9/10, "some window was used up")
}

// checkBucket checks the bucket's bound between any two points of its
// schedule a < b: at most TokenLimit plus TokensPerPeriod for every point
// strictly between them. (Its restore rule counts the periods that passed
// while no activation ran from the snapshot; the run moves the bucket
// without a pause, so that every such period is a point seen here.)
func (s *sim) checkBucket(limit, perPeriod int64) {
	s.t.Helper()
	points := make([]time.Time, 0, len(s.ends))
	for end := range s.ends {
		points = append(points, end)
	}
	slices.SortFunc(points, func(a, b time.Time) int { return a.Compare(b) })
	busiest := int64(0)
	for i := range points {
		for j := i + 1; j < len(points) && j <= i+12; j++ {
			n := s.granted(points[i], points[j])
			bound := limit + perPeriod*int64(j-i-1)
			require.LessOrEqual(s.t, n, bound, "granted between %v and %v", points[i].Sub(epoch), points[j].Sub(epoch))
			if j == i+1 {
				busiest = max(busiest, n)
			}
		}
	}
	require.GreaterOrEqual(s.t, busiest, perPeriod, "some period used its tokens")
}
