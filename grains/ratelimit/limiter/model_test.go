package limiter

// Property tests: random operation sequences run against each algorithm
// and against a naive model written straight from limiter-semantics.md.
// The model keeps only live waiters in a plain slice, keeps bucket tokens
// as exact rationals, and ticks on every period like a periodic timer,
// while the real core is ticked only when NextTick asks for it; agreement
// also shows that skipping the ticks of a full limiter changes nothing.

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type config struct {
	alg      algorithm
	limit    int64
	queue    int64
	order    QueueOrder
	tpp      int64 // bucket
	segments int64 // sliding
	period   time.Duration
	manual   bool
}

func (c config) String() string {
	return fmt.Sprintf("%+v", struct {
		A             algorithm
		L, QL, TPP, S int64
		O             QueueOrder
		P             time.Duration
		M             bool
	}{c.alg, c.limit, c.queue, c.tpp, c.segments, c.order, c.period, c.manual})
}

func (c config) newCore(now time.Time) (Core, error) {
	switch c.alg {
	case algorithmConcurrency:
		return NewConcurrency(ConcurrencyOptions{PermitLimit: c.limit, QueueLimit: c.queue, QueueOrder: c.order}, now)
	case algorithmFixedWindow:
		return NewFixedWindow(FixedWindowOptions{PermitLimit: c.limit, QueueLimit: c.queue, QueueOrder: c.order,
			Window: c.period, ManualReplenishment: c.manual}, now)
	case algorithmSlidingWindow:
		return NewSlidingWindow(SlidingWindowOptions{PermitLimit: c.limit, SegmentsPerWindow: c.segments, QueueLimit: c.queue,
			QueueOrder: c.order, Window: c.period * time.Duration(c.segments), ManualReplenishment: c.manual}, now)
	default:
		return NewTokenBucket(TokenBucketOptions{TokenLimit: c.limit, TokensPerPeriod: c.tpp, QueueLimit: c.queue,
			QueueOrder: c.order, ReplenishmentPeriod: c.period, ManualReplenishment: c.manual}, now)
	}
}

func randomConfig(r *rand.Rand, alg algorithm) config {
	c := config{alg: alg, order: QueueOrder(r.IntN(2)), manual: r.IntN(2) == 0, period: time.Duration(1+r.IntN(5)) * time.Millisecond}
	if alg == algorithmConcurrency {
		c.manual = true
	}
	c.limit = 1 + r.Int64N(8)
	c.queue = r.Int64N(12)
	c.tpp = 1 + r.Int64N(4)
	c.segments = 1 + r.Int64N(4)
	if r.IntN(6) == 0 { // the int limits
		c.limit = math.MaxInt64 - r.Int64N(2)
		c.queue = math.MaxInt64 - r.Int64N(2)
		c.tpp = []int64{1, 3, math.MaxInt64}[r.IntN(3)]
	}
	return c
}

// randomCount picks a permit count, mostly small, sometimes at or past the
// limits.
func randomCount(r *rand.Rand, limit int64) int64 {
	switch r.IntN(20) {
	case 0:
		return -1
	case 1:
		return limit
	case 2:
		if limit < math.MaxInt64 {
			return limit + 1
		}
		return math.MaxInt64
	case 3:
		return 0
	case 4:
		return max(limit-1, 0)
	}
	return min(r.Int64N(4), limit)
}

// model is the naive reference.
type model struct {
	cfg       config
	available int64    // all but the bucket
	tokens    *big.Rat // bucket
	waiters   []*modelWaiter
	succeeded int64
	failed    int64
	closed    bool
	segments  []int64
	current   int
	last      time.Time
	grid      time.Time // the next periodic tick
	idle      bool
	idleSince time.Time
	completed []*modelWaiter // completions of the current operation, in order
	served    bool           // the queue was served during the current operation
}

type modelWaiter struct {
	n       int64
	outcome Outcome
	real    *Waiter
}

type modelLease struct {
	acquired   bool
	permits    int64
	retryAfter time.Duration
	hasRetry   bool
	queueFull  bool
}

func newModel(c config, now time.Time) *model {
	m := &model{cfg: c, available: c.limit, tokens: new(big.Rat).SetInt64(c.limit), last: now, grid: now.Add(c.period),
		idle: true, idleSince: now}
	if c.alg == algorithmSlidingWindow {
		m.segments = make([]int64, c.segments)
	}
	return m
}

func (m *model) avail() int64 {
	if m.cfg.alg == algorithmTokenBucket {
		return new(big.Int).Quo(m.tokens.Num(), m.tokens.Denom()).Int64()
	}
	return m.available
}

func (m *model) queued() int64 {
	var q int64
	for _, w := range m.waiters {
		q += w.n
	}
	return q
}

func (m *model) take(n int64) {
	if m.cfg.alg == algorithmTokenBucket {
		m.tokens.Sub(m.tokens, new(big.Rat).SetInt64(n))
		return
	}
	m.available -= n
	if m.segments != nil {
		m.segments[m.current] += n
	}
}

func (m *model) argCheck(n int64) error {
	switch {
	case n < 0:
		return ErrNegativeCount
	case n > m.cfg.limit:
		return ErrCountExceedsLimit
	case m.closed:
		return ErrClosed
	}
	return nil
}

func (m *model) immediate(n int64) bool {
	if n == 0 {
		return m.tokens.Sign() > 0 && (m.cfg.alg == algorithmTokenBucket || m.available > 0)
	}
	if m.avail() >= n && (m.queued() == 0 || m.cfg.order == NewestFirst) {
		m.take(n)
		m.idle = false
		return true
	}
	return false
}

func (m *model) rejection(now time.Time, n int64, queueFull bool) modelLease {
	l := modelLease{}
	elapsed := now.Sub(m.last)
	if elapsed < 0 {
		elapsed = 0
	}
	switch m.cfg.alg {
	case algorithmConcurrency:
		l.queueFull = queueFull
		return l
	case algorithmFixedWindow:
		l.retryAfter = max(m.cfg.period-elapsed, 0)
	case algorithmSlidingWindow:
		deficit := max(n, 1) - m.available
		k := 1
		if deficit > 0 {
			var freed int64
			for k = 1; ; k++ {
				freed += m.segments[(m.current+k)%len(m.segments)]
				if freed >= deficit {
					break
				}
			}
		}
		l.retryAfter = max(time.Duration(k)*m.cfg.period-elapsed, 0)
	case algorithmTokenBucket:
		need := big.NewInt(n)
		need.Sub(need, big.NewInt(m.avail()))
		need.Add(need, big.NewInt(m.queued()))
		periods := need.Quo(need, big.NewInt(m.cfg.tpp))
		if periods.Sign() <= 0 {
			periods.SetInt64(1)
		}
		d := periods.Mul(periods, big.NewInt(int64(m.cfg.period)))
		if d.IsInt64() {
			l.retryAfter = time.Duration(d.Int64())
		} else {
			l.retryAfter = math.MaxInt64
		}
	}
	l.hasRetry = true
	return l
}

func (m *model) attempt(now time.Time, n int64) (modelLease, error) {
	if err := m.argCheck(n); err != nil {
		return modelLease{}, err
	}
	if m.immediate(n) {
		m.succeeded++
		return modelLease{acquired: true, permits: n}, nil
	}
	m.failed++
	return m.rejection(now, n, false), nil
}

func (m *model) acquire(now time.Time, n int64, real *Waiter) (modelLease, *modelWaiter, error) {
	if err := m.argCheck(n); err != nil {
		return modelLease{}, nil, err
	}
	if m.immediate(n) {
		m.succeeded++
		return modelLease{acquired: true, permits: n}, nil, nil
	}
	fits := func() bool { return uint64(m.queued())+uint64(n) <= uint64(m.cfg.queue) }
	if !fits() {
		if m.cfg.order == OldestFirst || n > m.cfg.queue {
			m.failed++
			return m.rejection(now, n, true), nil, nil
		}
		for !fits() {
			w := m.waiters[0]
			m.waiters = m.waiters[1:]
			m.finish(w, OutcomeEvicted)
			m.failed++
		}
	}
	w := &modelWaiter{n: n, real: real}
	m.waiters = append(m.waiters, w)
	return modelLease{}, w, nil
}

func (m *model) finish(w *modelWaiter, o Outcome) {
	w.outcome = o
	m.completed = append(m.completed, w)
}

func (m *model) cancel(w *modelWaiter) bool {
	for i, x := range m.waiters {
		if x == w {
			m.waiters = append(m.waiters[:i:i], m.waiters[i+1:]...)
			m.finish(w, OutcomeCanceled)
			return true
		}
	}
	return false
}

func (m *model) next() (int, bool) {
	if len(m.waiters) == 0 {
		return 0, false
	}
	if m.cfg.order == OldestFirst {
		return 0, true
	}
	return len(m.waiters) - 1, true
}

func (m *model) serve(now time.Time) {
	m.served = true
	for {
		i, ok := m.next()
		if !ok || m.avail() < m.waiters[i].n {
			break
		}
		w := m.waiters[i]
		m.waiters = append(m.waiters[:i:i], m.waiters[i+1:]...)
		m.take(w.n)
		m.succeeded++
		m.finish(w, OutcomeGranted)
	}
	if m.avail() == m.cfg.limit {
		m.idle, m.idleSince = true, now
	}
}

func (m *model) release(now time.Time, n int64) error {
	switch {
	case m.closed:
		return nil
	case n < 0:
		return ErrNegativeCount
	case n > m.cfg.limit-m.available:
		return ErrOverRelease
	case n == 0:
		return nil
	}
	m.available += n
	m.serve(now)
	return nil
}

// replenish is ReplenishInternal; manual is false for timer ticks.
func (m *model) replenish(now time.Time, manual bool) {
	if m.closed {
		return
	}
	switch m.cfg.alg {
	case algorithmFixedWindow:
		if manual && now.Sub(m.last) < m.cfg.period {
			return
		}
		m.last = now
		if m.available >= m.cfg.limit {
			return
		}
		m.available = m.cfg.limit
	case algorithmSlidingWindow:
		if manual && now.Sub(m.last) < m.cfg.period {
			return
		}
		m.last = now
		m.current = (m.current + 1) % len(m.segments)
		freed := m.segments[m.current]
		m.segments[m.current] = 0
		if freed == 0 {
			return
		}
		m.available += freed
	case algorithmTokenBucket:
		limit := new(big.Rat).SetInt64(m.cfg.limit)
		if m.tokens.Cmp(limit) == 0 {
			return
		}
		add := new(big.Rat).SetInt64(m.cfg.tpp)
		if manual {
			elapsed := now.Sub(m.last)
			if elapsed < 0 {
				elapsed = 0
			}
			add.Mul(add, big.NewRat(int64(elapsed), int64(m.cfg.period)))
		}
		m.tokens.Add(m.tokens, add)
		if m.tokens.Cmp(limit) > 0 {
			m.tokens = limit
		}
		if now.After(m.last) {
			m.last = now
		}
	}
	m.serve(now)
}

func (m *model) close() {
	if m.closed {
		return
	}
	m.closed = true
	for len(m.waiters) > 0 {
		i, _ := m.next()
		w := m.waiters[i]
		m.waiters = append(m.waiters[:i:i], m.waiters[i+1:]...)
		m.finish(w, OutcomeClosed)
	}
}

// runner applies the same random operations to a core and to the model.
type runner struct {
	t        *testing.T
	r        *rand.Rand
	cfg      config
	core     Core
	model    *model
	now      time.Time
	byReal   map[*Waiter]*modelWaiter
	all      []*modelWaiter
	leases   []int64 // permits of outstanding concurrency leases
	lastID   uint64
	realDone []*Waiter
	step     int
}

func newRunner(t *testing.T, r *rand.Rand, cfg config) *runner {
	core, err := cfg.newCore(t0)
	require.NoError(t, err, "config %v", cfg)
	rn := &runner{t: t, r: r, cfg: cfg, core: core,
		model: newModel(cfg, t0), now: t0, byReal: map[*Waiter]*modelWaiter{}}
	core.SetCompletionHandler(func(w *Waiter) { rn.realDone = append(rn.realDone, w) })
	return rn
}

func (rn *runner) fail(format string, args ...any) {
	rn.t.Helper()
	rn.t.Fatalf("config %v step %d: %s", rn.cfg, rn.step, fmt.Sprintf(format, args...))
}

func (rn *runner) compareLease(got Lease, want modelLease) {
	rn.t.Helper()
	retry, hasRetry := got.RetryAfter()
	_, queueFull := got.ReasonPhrase()
	g := modelLease{acquired: got.Acquired(), permits: got.Permits(), retryAfter: retry, hasRetry: hasRetry, queueFull: queueFull}
	if g != want {
		rn.fail("lease %+v, model %+v", g, want)
	}
	if id := got.ID(); id != 0 {
		if id <= rn.lastID {
			rn.fail("lease id %d not increasing (last %d)", id, rn.lastID)
		}
		rn.lastID = id
	}
	if rn.cfg.alg == algorithmConcurrency && got.Acquired() && got.Permits() > 0 {
		if got.ID() == 0 {
			rn.fail("a concurrency lease holding permits has no id")
		}
		rn.leases = append(rn.leases, got.Permits())
	}
}

func (rn *runner) advance(d time.Duration) {
	rn.now = rn.now.Add(d)
	if rn.cfg.manual {
		return
	}
	// The model's timer fires on every period; the core is ticked only
	// when it asks, at the time it asks for, as a driver would.
	for !rn.model.grid.After(rn.now) {
		g := rn.model.grid
		if at, ok := rn.core.NextTick(g); ok && !at.After(g) {
			if !at.Equal(g) {
				rn.fail("core wants a tick at %v, the schedule says %v", at, g)
			}
			rn.core.Tick(g)
		}
		rn.model.replenish(g, false)
		rn.model.grid = g.Add(rn.cfg.period)
		rn.checkCompletions()
	}
	if at, ok := rn.core.NextTick(rn.now); ok && !at.After(rn.now) {
		rn.fail("core wants an overdue tick at %v (now %v)", at, rn.now)
	}
}

func (rn *runner) operate() {
	r, c, m := rn.r, rn.core, rn.model
	switch op := r.IntN(100); {
	case op < 20:
		steps := []time.Duration{0, 1, rn.cfg.period / 2, rn.cfg.period, rn.cfg.period + 1, 3 * rn.cfg.period}
		rn.advance(steps[r.IntN(len(steps))])
		if r.IntN(40) == 0 {
			rn.advance(time.Duration(r.IntN(50)) * rn.cfg.period)
		}
	case op < 40:
		n := randomCount(r, rn.cfg.limit)
		got, err := c.AttemptAcquire(rn.now, n)
		want, werr := m.attempt(rn.now, n)
		if err != werr {
			rn.fail("AttemptAcquire(%d) error %v, model %v", n, err, werr)
		}
		rn.compareLease(got, want)
	case op < 65:
		n := randomCount(r, rn.cfg.limit)
		got, w, err := c.Acquire(rn.now, n)
		want, mw, werr := m.acquire(rn.now, n, w)
		if err != werr {
			rn.fail("Acquire(%d) error %v, model %v", n, err, werr)
		}
		if (w == nil) != (mw == nil) {
			rn.fail("Acquire(%d) queued %v, model %v", n, w != nil, mw != nil)
		}
		if w != nil {
			rn.byReal[w] = mw
			rn.all = append(rn.all, mw)
		} else {
			rn.compareLease(got, want)
		}
	case op < 75:
		if len(rn.all) == 0 {
			return
		}
		mw := rn.all[r.IntN(len(rn.all))]
		if got, want := c.Cancel(rn.now, mw.real), m.cancel(mw); got != want {
			rn.fail("Cancel %v, model %v", got, want)
		}
	case op < 88:
		if rn.cfg.alg == algorithmConcurrency {
			cc := c.(*Concurrency)
			var n int64
			if len(rn.leases) > 0 && r.IntN(10) != 0 {
				i := r.IntN(len(rn.leases))
				n = rn.leases[i]
				rn.leases = append(rn.leases[:i], rn.leases[i+1:]...)
			} else {
				n = randomCount(r, rn.cfg.limit) // sometimes too many
			}
			if err, werr := cc.Release(rn.now, n), m.release(rn.now, n); err != werr {
				rn.fail("Release(%d) error %v, model %v", n, err, werr)
			}
			return
		}
		rp := c.(interface{ TryReplenish(time.Time) bool })
		if got := rp.TryReplenish(rn.now); got != rn.cfg.manual {
			rn.fail("TryReplenish = %v with manual %v", got, rn.cfg.manual)
		}
		if rn.cfg.manual {
			m.replenish(rn.now, true)
		}
	case op < 89:
		if r.IntN(8) == 0 {
			c.Close(rn.now)
			m.close()
		}
	default:
		// Nothing but the checks below.
	}
}

func (rn *runner) checkCompletions() {
	rn.t.Helper()
	want := rn.model.completed
	if len(want) != len(rn.realDone) {
		rn.fail("%d completions, model %d", len(rn.realDone), len(want))
	}
	for i, w := range rn.realDone {
		mw := rn.byReal[w]
		if mw != want[i] {
			rn.fail("completion %d is a different waiter than the model's (order)", i)
		}
		if w.Outcome() != mw.outcome {
			rn.fail("waiter outcome %v, model %v", w.Outcome(), mw.outcome)
		}
		l := w.Lease()
		if l.Acquired() != (mw.outcome == OutcomeGranted) {
			rn.fail("waiter lease %v with outcome %v", l, mw.outcome)
		}
		if _, ok := l.RetryAfter(); ok {
			rn.fail("a completed waiter's lease carries RETRY_AFTER")
		}
		if _, ok := l.ReasonPhrase(); ok {
			rn.fail("a completed waiter's lease carries a reason")
		}
		if l.Acquired() {
			rn.compareLease(l, modelLease{acquired: true, permits: mw.n})
		}
	}
	rn.realDone = rn.realDone[:0]
	rn.model.completed = rn.model.completed[:0]
}

func (rn *runner) checkInvariants() {
	rn.t.Helper()
	rn.checkCompletions()
	e, m := engineOf(rn.core), rn.model
	st, err := rn.core.Statistics()
	if m.closed {
		if err != ErrClosed {
			rn.fail("Statistics after close: %v", err)
		}
	} else {
		want := Statistics{AvailablePermits: m.avail(), QueuedPermits: m.queued(), TotalFailedLeases: m.failed, TotalSuccessfulLeases: m.succeeded}
		if err != nil || st != want {
			rn.fail("statistics %+v (%v), model %+v", st, err, want)
		}
	}
	if e.available < 0 || e.available > e.limit {
		rn.fail("available %d outside [0, %d]", e.available, e.limit)
	}
	var live int64
	for i := 0; i < e.waiters.len(); i++ {
		if w := e.waiters.buf[(e.waiters.head+i)%len(e.waiters.buf)]; w.outcome == OutcomePending {
			live += w.permits
		}
	}
	if live != e.queued || e.queued > e.queueLimit || e.queued < 0 {
		rn.fail("Q %d, live waiters hold %d, QL %d", e.queued, live, e.queueLimit)
	}
	if e.segments != nil {
		sum := e.available
		for _, s := range e.segments {
			sum += s
		}
		if sum != e.limit {
			rn.fail("A + segments = %d, want L = %d", sum, e.limit)
		}
		if got, want := rn.core.(*SlidingWindow).State().Segments, m.canonicalSegments(); fmt.Sprint(got) != fmt.Sprint(want) {
			rn.fail("segments %v, model %v", got, want)
		}
	}
	if e.algorithm == algorithmTokenBucket && !m.closed {
		frac := new(big.Rat).Sub(m.tokens, new(big.Rat).SetInt64(m.avail()))
		got := big.NewRat(e.fraction, int64(e.period))
		if frac.Cmp(got) != 0 {
			rn.fail("fraction %v, model %v", got, frac)
		}
	}
	d, idle := rn.core.IdleDuration(rn.now)
	if idle != m.idle || (idle && d != max(rn.now.Sub(m.idleSince), 0)) {
		rn.fail("idle %v %v, model %v since %v", idle, d, m.idle, m.idleSince)
	}
	if _, need := rn.core.NextTick(rn.now); need != (!rn.cfg.manual && !m.closed && m.avail() < rn.cfg.limit) {
		rn.fail("NextTick need %v", need)
	}
	// Head of line: nothing that could be served is left waiting behind
	// the first waiter, which itself does not fit.
	// Only checked after the queue was served: a cancellation can
	// legitimately leave a fitting waiter at the head until then.
	if i, ok := m.next(); ok && m.served && m.waiters[i].n <= m.avail() {
		rn.fail("the first waiter (%d) fits in %d but was not served", m.waiters[i].n, m.avail())
	}
	m.served = false
}

func (m *model) canonicalSegments() []int64 {
	n := len(m.segments)
	out := make([]int64, n)
	for i := range out {
		out[i] = m.segments[(m.current+1+i)%n]
	}
	return out
}

func TestProperty_MatchesModel(t *testing.T) {
	algs := []algorithm{algorithmConcurrency, algorithmFixedWindow, algorithmSlidingWindow, algorithmTokenBucket}
	names := []string{"Concurrency", "FixedWindow", "SlidingWindow", "TokenBucket"}
	runs, steps := 300, 400
	if testing.Short() {
		runs = 50
	}
	for i, alg := range algs {
		t.Run(names[i], func(t *testing.T) {
			for seed := range uint64(runs) {
				cfgRand := rand.New(rand.NewPCG(seed, uint64(alg)))
				rn := newRunner(t, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), randomConfig(cfgRand, alg))
				for rn.step = 0; rn.step < steps; rn.step++ {
					rn.operate()
					rn.checkInvariants()
				}
			}
		})
	}
}
