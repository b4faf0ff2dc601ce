package host

// Stress tests of activations' mailboxes and of the host around them,
// written to break them: concurrent posters, escalated panics and
// restarts, deactivation and Stop racing with deliveries, inline runs on
// other goroutines, and the queue's compaction. Each was checked to fail
// with the mechanism it guards broken on purpose.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
)

// ---------------------------------------------------------------------------
// Helpers

// advMsg is a message of poster p with sequence s.
type advMsg struct {
	p, s int
	sys  bool
	boom bool
}

// goDispatcher runs each schedule on a new goroutine, tracked by wg.
type goDispatcher struct{ wg sync.WaitGroup }

func (d *goDispatcher) Schedule(fn func()) {
	d.wg.Add(1)
	go func() { defer d.wg.Done(); fn() }()
}
func (d *goDispatcher) Throughput() int { return mailboxThroughput }

// checkingInvoker checks one-at-a-time, exactly-once and per-poster FIFO.
type checkingInvoker struct {
	t        *testing.T
	inFlight atomic.Int32
	mu       sync.Mutex
	lastUser map[int]int
	lastSys  map[int]int
	seen     map[[3]int]int
	total    atomic.Int64
	escal    atomic.Int64
}

func newCheckingInvoker(t *testing.T) *checkingInvoker {
	return &checkingInvoker{t: t, lastUser: map[int]int{}, lastSys: map[int]int{}, seen: map[[3]int]int{}}
}

func (c *checkingInvoker) record(msg any, sys bool) {
	if n := c.inFlight.Add(1); n != 1 {
		c.t.Errorf("%d invocations at once", n)
	}
	defer c.inFlight.Add(-1)
	m := msg.(advMsg)
	c.mu.Lock()
	last := c.lastUser
	k := 0
	if sys {
		last, k = c.lastSys, 1
	}
	if prev, ok := last[m.p]; ok && prev >= m.s {
		c.t.Errorf("poster %d (sys=%v): %d after %d", m.p, sys, m.s, prev)
	}
	last[m.p] = m.s
	c.seen[[3]int{m.p, m.s, k}]++
	c.mu.Unlock()
	c.total.Add(1)
	if m.boom {
		panic("boom")
	}
}

func (c *checkingInvoker) InvokeSystemMessage(msg any)     { c.record(msg, true) }
func (c *checkingInvoker) InvokeUserMessage(msg any)       { c.record(msg, false) }
func (c *checkingInvoker) EscalateFailure(reason, msg any) { c.escal.Add(1) }
func waitFor(t *testing.T, cond func() bool, msg string, a ...any) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, 100*time.Microsecond, fmt.Sprintf(msg, a...))
}

// countReplier counts its replies and keeps the first.
type countReplier struct {
	n     atomic.Int32
	done  chan struct{}
	reply proto.Message
	err   error
	panic atomic.Bool // panic in Reply (after counting)
}

func newCountReplier() *countReplier { return &countReplier{done: make(chan struct{})} }

func (c *countReplier) Reply(_ *Request, reply proto.Message, err error) {
	if c.n.Add(1) == 1 {
		c.reply, c.err = reply, err
		close(c.done)
	}
	if c.panic.Load() {
		panic("replier bug")
	}
}

func (c *countReplier) value() int64 {
	if c.reply == nil {
		return -1
	}
	return c.reply.(*wrapperspb.Int64Value).Value
}

func (f *fixture) req(key string, method uint32, v int64) (*Request, *countReplier) {
	payload, err := proto.Marshal(wrapperspb.Int64(v))
	require.NoError(f.t, err)
	rc := newCountReplier()
	return &Request{Target: actor.GrainID{Type: testType, Key: key}, MethodID: method, Payload: payload, Reply: rc}, rc
}

// awaitAll waits for every replier, failing on those never answered.
func awaitAll(t *testing.T, rcs []*countReplier, d time.Duration) (lost int) {
	t.Helper()
	deadline := time.After(d)
	for i, rc := range rcs {
		select {
		case <-rc.done:
		case <-deadline:
			for _, rc := range rcs[i:] {
				select {
				case <-rc.done:
				default:
					lost++
				}
			}
			t.Errorf("%d of %d requests never answered", lost, len(rcs))
			return lost
		}
	}
	return 0
}

// ---------------------------------------------------------------------------
// Mailbox alone

// Many posters through every entry point, racing with processing on
// dispatcher goroutines and on the posters' own: exactly once, one at a
// time, FIFO per poster and per queue; panics escalated and processing
// goes on.
func TestStressMailboxConcurrentPosters(t *testing.T) {
	m, inv, d := &mailbox{}, newCheckingInvoker(t), &goDispatcher{}
	m.RegisterHandlers(inv, d)
	const posters, each = 8, 3000
	var wg sync.WaitGroup
	var booms atomic.Int64
	for p := range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(p), 7))
			us, ss := 0, 0
			for range each {
				switch k := r.IntN(10); {
				case k < 4:
					m.PostUserMessage(advMsg{p: p, s: us})
					us++
				case k < 6:
					boom := r.IntN(50) == 0
					if boom {
						booms.Add(1)
					}
					m.PostSystemMessage(advMsg{p: p, s: ss, sys: true, boom: boom})
					ss++
				case k < 8:
					if m.post(advMsg{p: p, s: us}, false) {
						m.process() // the poster runs it
					}
					us++
				default:
					if m.post(advMsg{p: p, s: us}, false) {
						d.Schedule(m.process) // handed to someone else
					}
					us++
				}
			}
		}()
	}
	wg.Wait()
	waitFor(t, func() bool { return inv.total.Load() == posters*each }, "processed %d of %d", inv.total.Load(), posters*each)
	d.wg.Wait()
	for k, n := range inv.seen {
		if n != 1 {
			t.Errorf("message %v processed %d times", k, n)
		}
	}
	assert.Len(t, inv.seen, posters*each)
	assert.Equal(t, booms.Load(), inv.escal.Load())
	assert.True(t, m.post(advMsg{p: 99}, false), "idle at the end")
	assert.Zero(t, m.UserMessageCount()-1)
}

// A model test of take: random pushes and pops on both queues, with bursts
// that trigger compaction and release, against a plain slice; slots outside
// the live part never hold a message.
func TestStressTakeModel(t *testing.T) {
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 1))
		m, _, _ := newTestMailbox()
		var want []int
		next := 0
		for step := 0; step < 6000; step++ {
			popPct := 30 // phases that fill the queue and phases that drain it
			if (step/500)%2 == 1 {
				popPct = 75
			}
			switch k := r.IntN(1000); {
			case k < 3: // burst
				for range r.IntN(3 * queueKeep) {
					m.post(next, false)
					want = append(want, next)
					next++
				}
			case k < 1000-popPct*10:
				m.post(next, false)
				want = append(want, next)
				next++
			default:
				msg, sys, ok := m.next()
				if len(want) == 0 {
					require.False(t, ok)
					continue
				}
				require.True(t, ok)
				require.False(t, sys)
				require.Equal(t, want[0], msg, "seed %d step %d", seed, step)
				want = want[1:]
			}
			require.Equal(t, len(want), m.UserMessageCount())
			if step%16 != 0 {
				continue
			}
			q := m.mu.user
			full := q[:cap(q)]
			for i := range full {
				if (i < m.mu.userHead || i >= len(q)) && full[i] != nil {
					t.Fatalf("seed %d step %d: stale message %v at %d (head %d len %d cap %d)",
						seed, step, full[i], i, m.mu.userHead, len(q), cap(q))
				}
			}
		}
	}
}

// A long backlog that is processed while posters keep it from draining,
// with suspensions in between: order across compactions is kept and the
// array stays bounded.
func TestStressCompactionUnderSuspension(t *testing.T) {
	m, inv, d := newTestMailbox()
	_ = inv
	posted := 0
	for range 3 * queueKeep {
		m.PostUserMessage(posted)
		posted++
	}
	want := 0
	for round := range 2000 {
		if round%7 == 0 {
			m.PostSystemMessage(&protoactor.SuspendMailbox{})
		}
		for range 2 {
			m.PostUserMessage(posted)
			posted++
		}
		for range 2 {
			msg, sys, ok := m.next()
			if !ok {
				// suspended: resume
				m.post(&protoactor.ResumeMailbox{}, true)
				msg, sys, ok = m.next()
			}
			require.True(t, ok)
			require.False(t, sys)
			require.Equal(t, want, msg)
			want++
		}
		require.LessOrEqual(t, cap(m.mu.user), 4*3*queueKeep, "O(live part): live is 3*queueKeep")
		q := m.mu.user
		for i, v := range q[:cap(q)] {
			if (i < m.mu.userHead || i >= len(q)) && v != nil {
				t.Fatalf("round %d: stale message %v at %d (head %d len %d)", round, v, i, m.mu.userHead, len(q))
			}
		}
	}
	m.PostSystemMessage(&protoactor.ResumeMailbox{})
	for {
		msg, _, ok := m.next()
		if !ok {
			break
		}
		require.Equal(t, want, msg)
		want++
	}
	require.Equal(t, posted, want)
	_ = d
}

// ---------------------------------------------------------------------------
// Mailbox in a real protoactor actor: escalation, suspension, restart.

type advActor struct {
	t          *testing.T
	failed     atomic.Bool // between a panic and the restart
	restarts   atomic.Int64
	mu         sync.Mutex
	seen       map[[2]int]int
	last       map[int]int
	total      atomic.Int64
	whileFail  atomic.Int64
	stoppedMsg atomic.Bool
}

func (a *advActor) Receive(c protoactor.Context) {
	switch msg := c.Message().(type) {
	case *protoactor.Restarting:
		a.restarts.Add(1)
		a.failed.Store(false)
	case *protoactor.Stopped:
		a.stoppedMsg.Store(true)
	case advMsg:
		if a.failed.Load() {
			a.whileFail.Add(1)
		}
		a.mu.Lock()
		a.seen[[2]int{msg.p, msg.s}]++
		if prev, ok := a.last[msg.p]; ok && prev >= msg.s {
			a.t.Errorf("poster %d: %d after %d", msg.p, msg.s, prev)
		}
		a.last[msg.p] = msg.s
		a.mu.Unlock()
		a.total.Add(1)
		if msg.boom {
			a.failed.Store(true)
			panic("actor bug")
		}
	}
}

func TestStressMailboxEscalationRestartRealActor(t *testing.T) {
	sys := protoactor.NewActorSystem(protoactor.WithLoggerFactory(func(*protoactor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	disp := newWorkerDispatcher()
	defer func() { sys.Shutdown(); disp.close() }()
	act := &advActor{t: t, seen: map[[2]int]int{}, last: map[int]int{}}
	mb := &mailbox{}
	props := protoactor.PropsFromProducer(func() protoactor.Actor { return act },
		protoactor.WithDispatcher(disp), protoactor.WithMailbox(func() protoactor.Mailbox { return mb }))
	pid := sys.Root.Spawn(props)

	const posters, each, booms = 6, 2000, 6 // fewer than the 10 restarts the default strategy allows
	var wg sync.WaitGroup
	var inlineRuns sync.WaitGroup
	for p := range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range each {
				boom := p == 0 && s%(each/booms) == each/booms/2
				msg := advMsg{p: p, s: s, boom: boom}
				if s%2 == 0 {
					sys.Root.Send(pid, msg)
				} else if mb.post(msg, false) {
					if s%4 == 1 {
						mb.process()
					} else {
						inlineRuns.Add(1)
						go func() { defer inlineRuns.Done(); mb.process() }()
					}
				}
			}
		}()
	}
	wg.Wait()
	waitFor(t, func() bool { return act.total.Load() == posters*each }, "processed %d of %d", act.total.Load(), posters*each)
	inlineRuns.Wait()
	waitFor(t, func() bool { return act.restarts.Load() == booms }, "restarts %d", act.restarts.Load())
	assert.Zero(t, act.whileFail.Load(), "user messages processed between a panic and the restart")
	for k, n := range act.seen {
		require.Equal(t, 1, n, "message %v", k)
	}
	assert.Len(t, act.seen, posters*each)
	assert.False(t, act.stoppedMsg.Load())
}

// ---------------------------------------------------------------------------
// Host: panics escaping the actor (a Replier that panics)

// waitIdle waits until a's mailbox is neither running nor scheduled.
func waitIdle(t *testing.T, a *activation) {
	waitFor(t, func() bool {
		a.mb.mu.Lock()
		defer a.mb.mu.Unlock()
		return !a.mb.mu.scheduled
	}, "mailbox never idle")
}

func (f *fixture) activation(key string) *activation {
	f.host.mu.RLock()
	defer f.host.mu.RUnlock()
	return f.host.mu.acts.get(actor.GrainID{Type: testType, Key: key})
}

// A panic escaping a turn (here: the Replier's) restarts the actor; the
// requests queued behind it, through Deliver and DeliverInline from several
// goroutines, are each answered once and run on the same activation.
func TestStressHostEscapingPanicKeepsQueuedRequests(t *testing.T) {
	f := newFixture(t, HostOptions{})
	_, err := f.call("a", mGet, 0)
	require.NoError(t, err)
	blk := f.send(context.Background(), "a", mBlock, 0, 0)
	<-f.started

	bad, badRC := f.req("a", mAdd, 1000)
	badRC.panic.Store(true)
	f.host.Deliver(bad)

	var mu sync.Mutex
	var rcs []*countReplier
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				r, rc := f.req("a", mAdd, 1)
				mu.Lock()
				rcs = append(rcs, rc)
				mu.Unlock()
				if (g+i)%2 == 0 {
					f.host.Deliver(r)
				} else if run := f.host.DeliverInline([]*Request{r}); run != nil {
					t.Errorf("the mailbox is busy: no run to hand back")
					run()
				}
			}
		}()
	}
	wg.Wait()
	f.release <- struct{}{}
	require.NoError(t, (<-blk).err)
	awaitAll(t, rcs, 5*time.Second)
	<-badRC.done
	seen := map[int64]bool{}
	for _, rc := range rcs {
		require.NoError(t, rc.err)
		require.EqualValues(t, 1, rc.n.Load())
		seen[rc.value()] = true
	}
	assert.Len(t, seen, 200, "each add applied once")
	v, err := f.call("a", mGet, 0)
	require.NoError(t, err)
	assert.EqualValues(t, 1200, v)
	assert.EqualValues(t, 1, badRC.n.Load())
	assert.EqualValues(t, 1, f.activated.Load(), "restarted in place, not reactivated")
}

// Several goroutines call a few grains through Deliver and DeliverInline
// (running the handed-back processing themselves or on another goroutine)
// while grains ask to leave, the host deactivates them, and the idle
// collector runs: every request is answered exactly once and every add is
// applied exactly once.
func TestStressDeactivationRaceNoLossNoDuplicate(t *testing.T) {
	f := newFixture(t, HostOptions{CollectionAge: 2 * time.Second, CollectionQuantum: time.Second})
	keys := []string{"k0", "k1", "k2"}
	const goroutines, each = 6, 300
	type sent struct {
		key    string
		method uint32
		rc     *countReplier
	}
	var mu sync.Mutex
	var all []sent
	var wg, runs sync.WaitGroup
	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Add(1)
	go func() { // deactivations and idle collection
		defer churn.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			f.host.Deactivate(actor.GrainID{Type: testType, Key: keys[i%len(keys)]})
			f.clock.Advance(time.Second)
			runtime.Gosched() // let requests through between deactivations
		}
	}()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 3))
			for i := 0; i < each; {
				key := keys[r.IntN(len(keys))]
				n := 1 + r.IntN(3)
				var batch []*Request
				for range n {
					method := mAdd
					if r.IntN(20) == 0 {
						method = mLeave
					}
					req, rc := f.req(key, method, 1)
					batch = append(batch, req)
					mu.Lock()
					all = append(all, sent{key, method, rc})
					mu.Unlock()
					i++
				}
				if r.IntN(2) == 0 {
					for _, req := range batch {
						f.host.Deliver(req)
					}
					continue
				}
				if run := f.host.DeliverInline(batch); run != nil {
					if r.IntN(2) == 0 {
						run()
					} else {
						runs.Add(1)
						go func() { defer runs.Done(); run() }()
					}
				}
			}
		}()
	}
	wg.Wait()
	rcs := make([]*countReplier, len(all))
	for i, s := range all {
		rcs[i] = s.rc
	}
	awaitAll(t, rcs, 10*time.Second)
	close(stop)
	churn.Wait()
	runs.Wait()
	adds := map[string][]int64{}
	for _, s := range all {
		require.EqualValues(t, 1, s.rc.n.Load(), "replies")
		require.NoError(t, s.rc.err)
		if s.method == mAdd {
			adds[s.key] = append(adds[s.key], s.rc.value())
		}
	}
	for _, key := range keys {
		seen := map[int64]bool{}
		for _, v := range adds[key] {
			require.False(t, seen[v], "key %s: total %d seen twice: an add applied twice or lost", key, v)
			seen[v] = true
		}
		v, err := f.call(key, mGet, 0)
		require.NoError(t, err)
		assert.EqualValues(t, len(adds[key]), v, "key %s: every add applied once", key)
	}
	t.Logf("activations %d deactivations %d", f.activated.Load(), f.deactivated.Load())
}

// ---------------------------------------------------------------------------
// Host: Stop with queued requests and timers

func TestStressStopWithQueuedRequestsAndTimers(t *testing.T) {
	f := newFixture(t, HostOptions{})
	for _, k := range []string{"a", "b"} {
		_, err := f.call(k, mGet, 0)
		require.NoError(t, err)
	}
	// deferred replies with timers on b
	var rcs []*countReplier
	for range 5 {
		r, rc := f.req("b", mDefer, 60_000)
		f.host.Deliver(r)
		rcs = append(rcs, rc)
	}
	a := f.activation("b")
	tick := make(chan struct{})
	a.post(turnFunc(func() { a.gc.RegisterTimer(time.Second, time.Second, func() {}); close(tick) }))
	<-tick

	blk := f.send(context.Background(), "a", mBlock, 0, 0)
	<-f.started
	var wg sync.WaitGroup
	var mu sync.Mutex
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				key := []string{"a", "b"}[(g+i)%2]
				method := mAdd
				if i%5 == 0 {
					method = mDefer
				}
				r, rc := f.req(key, method, 60_000)
				mu.Lock()
				rcs = append(rcs, rc)
				mu.Unlock()
				if i%2 == 0 {
					f.host.Deliver(r)
				} else if run := f.host.DeliverInline([]*Request{r}); run != nil {
					run()
				}
			}
		}()
	}
	wg.Wait()
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stopped <- f.host.Stop(ctx)
	}()
	// more requests race with Stop
	late := map[*countReplier]bool{}
	for range 20 {
		r, rc := f.req("a", mAdd, 1)
		rcs = append(rcs, rc)
		late[rc] = true
		if run := f.host.DeliverInline([]*Request{r}); run != nil {
			run()
		}
	}
	f.clock.Advance(2 * time.Second) // timers fire during the stop
	f.release <- struct{}{}
	require.NoError(t, (<-blk).err)
	require.NoError(t, <-stopped)
	awaitAll(t, rcs, 5*time.Second)
	for _, rc := range rcs {
		assert.EqualValues(t, 1, rc.n.Load())
		if rc.err != nil && late[rc] {
			assert.ErrorIs(t, rc.err, actor.ErrStopping)
		} else if rc.err != nil {
			assert.ErrorIs(t, rc.err, actor.ErrDeactivated, "only deferred replies fail")
		}
	}
	assert.Zero(t, f.host.Stats().Active)
	// after Stop, an inline delivery is refused, not lost
	r, rc := f.req("a", mAdd, 1)
	assert.Nil(t, f.host.DeliverInline([]*Request{r}))
	<-rc.done
	assert.ErrorIs(t, rc.err, actor.ErrStopping)
}

// ---------------------------------------------------------------------------
// Host: runner-style inline processing with a grain that checks order

const ordType = "ord.Grain"

type ordGrain struct {
	t        *testing.T
	inFlight *atomic.Int32
	last     map[int64]int64
	n        *atomic.Int64
}

type ordDispatcher struct{}

func (ordDispatcher) Dispatch(_ context.Context, grain any, _ uint32, payload []byte) (proto.Message, error) {
	g := grain.(*ordGrain)
	if n := g.inFlight.Add(1); n != 1 {
		g.t.Errorf("%d turns at once", n)
	}
	defer g.inFlight.Add(-1)
	in := &wrapperspb.Int64Value{}
	if err := proto.Unmarshal(payload, in); err != nil {
		return nil, err
	}
	p, s := in.Value>>32, in.Value&0xffffffff
	if prev, ok := g.last[p]; ok && prev >= s {
		g.t.Errorf("poster %d: %d after %d", p, s, prev)
	}
	g.last[p] = s
	g.n.Add(1)
	return wrapperspb.Int64(in.Value), nil
}

// Runner goroutines deliver inline and run the handed-back processing on
// yet another goroutine, sometimes late, while other goroutines Deliver:
// one turn at a time, FIFO per poster, each answered once.
func TestStressInlineRunOnOtherGoroutineKeepsOrder(t *testing.T) {
	var inFlight atomic.Int32
	var total atomic.Int64
	kind := &Kind{Type: ordType, Dispatcher: ordDispatcher{}, New: func(actor.GrainID) any {
		return &ordGrain{t: t, inFlight: &inFlight, last: map[int64]int64{}, n: &total}
	}}
	h, err := NewHost(HostOptions{}, []*Kind{kind}, WithClock(clock.NewFake(time.Unix(1, 0))),
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	require.NoError(t, h.Start(context.Background()))
	defer func() { require.NoError(t, h.Stop(context.Background())) }()

	const posters, each = 6, 1000
	var wg, runs sync.WaitGroup
	var mu sync.Mutex
	var rcs []*countReplier
	mk := func(p, s int) (*Request, *countReplier) {
		payload, _ := proto.Marshal(wrapperspb.Int64(int64(p)<<32 | int64(s)))
		rc := newCountReplier()
		mu.Lock()
		rcs = append(rcs, rc)
		mu.Unlock()
		return &Request{Target: actor.GrainID{Type: ordType, Key: "x"}, MethodID: 1, Payload: payload, Reply: rc}, rc
	}
	r0, rc0 := mk(99, 0)
	h.Deliver(r0)
	<-rc0.done
	handed := make(chan func(), 64)
	runs.Add(1)
	go func() { // the "runner": runs handed-back processing, sometimes late
		defer runs.Done()
		for run := range handed {
			runtime.Gosched()
			run()
		}
	}()
	for p := range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := 0; s < each; {
				if p%2 == 0 {
					r, _ := mk(p, s)
					h.Deliver(r)
					s++
					continue
				}
				n := min(1+s%4, each-s)
				batch := make([]*Request, n)
				for i := range n {
					batch[i], _ = mk(p, s+i)
				}
				s += n
				if run := h.DeliverInline(batch); run != nil {
					if s%3 == 0 {
						run()
					} else {
						handed <- run
					}
				}
			}
		}()
	}
	wg.Wait()
	close(handed)
	runs.Wait()
	awaitAll(t, rcs, 5*time.Second)
	for _, rc := range rcs {
		require.EqualValues(t, 1, rc.n.Load())
	}
	assert.EqualValues(t, posters*each+1, total.Load())
}

// A panic escaping one request of an inline batch: the requests after it in
// the chain must still be answered.
func TestStressHostEscapingPanicInBatchKeepsRestOfBatch(t *testing.T) {
	f := newFixture(t, HostOptions{})
	_, err := f.call("a", mGet, 0)
	require.NoError(t, err)
	var reqs []*Request
	var rcs []*countReplier
	for i := range 4 {
		r, rc := f.req("a", mAdd, 1)
		if i == 1 {
			rc.panic.Store(true)
		}
		reqs, rcs = append(reqs, r), append(rcs, rc)
	}
	waitIdle(t, f.activation("a"))
	run := f.host.DeliverInline(reqs)
	require.NotNil(t, run)
	run()
	awaitAll(t, rcs, 2*time.Second)
}

// More escaping panics than protoactor's default supervisor would restart
// (10 in 10 s, then it stops the actor): activations restart every time,
// so requests for the grain are not lost and Stop does not hang.
func TestStressHostSupervisorStopDoesNotLoseRequests(t *testing.T) {
	f := newFixture(t, HostOptions{})
	h := f.host

	for i := range 12 {
		r, rc := f.req("a", mAdd, 1)
		rc.panic.Store(true)
		h.Deliver(r)
		select {
		case <-rc.done:
		case <-time.After(2 * time.Second):
			t.Errorf("panicking request %d never ran (the actor was stopped by its supervisor)", i)
		}
	}
	var rcs []*countReplier
	for i := range 4 {
		r, rc := f.req("a", mGet, 0)
		rcs = append(rcs, rc)
		if i%2 == 0 {
			h.Deliver(r)
		} else if run := h.DeliverInline([]*Request{r}); run != nil {
			run()
		}
	}
	awaitAll(t, rcs, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	require.NoError(t, h.Stop(ctx), "Stop must not hang")
}

// A panic escaping deactivation (a deferred reply's Replier panics when the
// deactivation fails it): deactivation must still finish, the other
// deferred replies must be answered, and Stop must not hang.
func TestStressHostEscapingPanicDuringDeactivation(t *testing.T) {
	f := newFixture(t, HostOptions{})
	h := f.host
	var rcs []*countReplier
	for i := range 3 {
		r, rc := f.req("a", mDefer, 60_000)
		rc.panic.Store(i == 0)
		h.Deliver(r)
		rcs = append(rcs, rc)
	}
	waitFor(t, func() bool { return h.Stats().Deferred == 3 }, "deferred")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	require.NoError(t, h.Stop(ctx), "Stop must not hang")
	assert.EqualValues(t, 1, f.deactivated.Load(), "OnDeactivate ran")
	awaitAll(t, rcs, 100*time.Millisecond)
}
