package limitgrain

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
)

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeRuntime runs a grain without a silo: the test is the mailbox. Each
// grain method call, timer and cancel the test triggers is one turn; the
// clock moves only when the test says.
type fakeRuntime struct {
	t   *testing.T
	id  actor.GrainID
	now time.Time
	// budget is given to the calls that defer their replies (0: none).
	budget      time.Duration
	cancellable bool

	dirty          int
	writes, clears int
	writeErr       error
	clearErr       error
	stored         []byte                 // the state as last written, nil after a clear
	save           func() ([]byte, error) // the grain's SaveState
	timers         []*fakeTimer
	timersArmed    int
	deferred       []*fakeDeferred
	collectSoon    int           // CollectSoon calls
	stateTTL       time.Duration // the latest SetStateTTL
}

func (f *fakeRuntime) CollectSoon()                { f.collectSoon++ }
func (f *fakeRuntime) SetStateTTL(d time.Duration) { f.stateTTL = d }

func newRuntime(t *testing.T, grainType string) *fakeRuntime {
	return &fakeRuntime{t: t, id: actor.GrainID{Type: grainType, Key: "k"}, now: epoch, budget: time.Second}
}

func (f *fakeRuntime) ID() actor.GrainID { return f.id }
func (f *fakeRuntime) Now() time.Time    { return f.now }
func (f *fakeRuntime) MarkDirty()        { f.dirty++ }

func (f *fakeRuntime) WriteState(context.Context) error {
	f.writes++
	if f.writeErr != nil {
		return f.writeErr
	}
	data, err := f.save()
	if err != nil {
		return err
	}
	f.stored = data
	return nil
}

func (f *fakeRuntime) ClearState(context.Context) error {
	f.clears++
	if f.clearErr != nil {
		return f.clearErr
	}
	f.stored = nil
	return nil
}

func (f *fakeRuntime) Defer() (deferred, error) {
	d := &fakeDeferred{ctx: context.Background()}
	if f.cancellable {
		d.ctx, d.cancel = context.WithCancel(context.Background())
	}
	if f.budget > 0 {
		d.deadline = f.now.Add(f.budget)
	}
	f.deferred = append(f.deferred, d)
	return d, nil
}

func (f *fakeRuntime) AfterFunc(d time.Duration, fn func()) timer {
	f.timersArmed++
	t := &fakeTimer{at: f.now.Add(d), fn: fn}
	f.timers = append(f.timers, t)
	return t
}

// advance moves the clock by d, running each timer that falls due as a
// turn of its own, in due order.
func (f *fakeRuntime) advance(d time.Duration) {
	target := f.now.Add(d)
	for {
		i := slices.IndexFunc(f.timers, func(t *fakeTimer) bool { return !t.stopped && !t.at.After(target) })
		if i < 0 {
			break
		}
		for j, t := range f.timers { // the earliest due
			if !t.stopped && t.at.Before(f.timers[i].at) {
				i = j
			}
		}
		t := f.timers[i]
		f.timers = slices.Delete(f.timers, i, i+1)
		if t.at.After(f.now) {
			f.now = t.at
		}
		t.stopped = true
		t.fn()
	}
	f.now = target
}

// pendingTimers counts the timers armed and not yet fired or stopped.
func (f *fakeRuntime) pendingTimers() int {
	n := 0
	for _, t := range f.timers {
		if !t.stopped {
			n++
		}
	}
	return n
}

type fakeTimer struct {
	at      time.Time
	fn      func()
	stopped bool
}

func (t *fakeTimer) Stop() { t.stopped = true }

type fakeDeferred struct {
	deadline time.Time
	ctx      context.Context
	cancel   context.CancelFunc
	onCancel func()
	watched  int // OnCancel calls

	replied bool
	reply   proto.Message
	err     error
}

func (d *fakeDeferred) Reply(reply proto.Message, err error) bool {
	if d.replied {
		return false
	}
	d.replied, d.reply, d.err = true, reply, err
	return true
}

func (d *fakeDeferred) Deadline() (time.Time, bool) { return d.deadline, !d.deadline.IsZero() }
func (d *fakeDeferred) OnCancel(fn func()) {
	d.watched++
	if d.cancel != nil {
		d.onCancel = fn
	}
}
func (d *fakeDeferred) Context() context.Context { return d.ctx }
func (d *fakeDeferred) Cancellable() bool        { return d.cancel != nil }

// cancelCall cancels the call as its caller would: the context ends, and
// the cancel notification runs in a later turn, unless the reply went
// first.
func (d *fakeDeferred) cancelCall() {
	d.cancel()
	if d.onCancel != nil && !d.replied {
		d.onCancel()
	}
}

// lease returns the lease a deferred call was answered with.
func (d *fakeDeferred) lease(t *testing.T) *pb.LeaseMetadata {
	t.Helper()
	require.True(t, d.replied, "the call was answered")
	require.NoError(t, d.err)
	md, ok := d.reply.(*pb.LeaseMetadata)
	require.True(t, ok, "answered with %T", d.reply)
	return md
}

// outcome is what a grain method did with a call: answered in its turn,
// or kept its reply.
type outcome struct {
	reply    proto.Message
	err      error
	deferred *fakeDeferred
}

// turn runs one grain method as a request turn.
func turn[M proto.Message](f *fakeRuntime, method func() (M, error)) outcome {
	before := len(f.deferred)
	reply, err := method()
	if len(f.deferred) > before {
		return outcome{deferred: f.deferred[len(f.deferred)-1]}
	}
	var msg proto.Message
	if any(reply) != nil && !isNil(reply) {
		msg = reply
	}
	return outcome{reply: msg, err: err}
}

func isNil(m proto.Message) bool { return m == nil || !m.ProtoReflect().IsValid() }

func (o outcome) lease(t *testing.T) *pb.LeaseMetadata {
	t.Helper()
	require.Nil(t, o.deferred, "the call was answered in its turn")
	require.NoError(t, o.err)
	md, ok := o.reply.(*pb.LeaseMetadata)
	require.True(t, ok, "answered with %T", o.reply)
	return md
}

func (o outcome) waiting(t *testing.T) *fakeDeferred {
	t.Helper()
	require.NotNil(t, o.deferred, "the call waits")
	require.False(t, o.deferred.replied, "not answered yet")
	return o.deferred
}

// Grains of each algorithm on a fake runtime.
type (
	concurrencyGrain = grain[limiter.ConcurrencyOptions, *pb.ConcurrencyOptions, *pb.ConcurrencyAcquireRequest]
	fixedGrain       = grain[limiter.FixedWindowOptions, *pb.FixedWindowOptions, *pb.FixedWindowAcquireRequest]
	slidingGrain     = grain[limiter.SlidingWindowOptions, *pb.SlidingWindowOptions, *pb.SlidingWindowAcquireRequest]
	tokenGrain       = grain[limiter.TokenBucketOptions, *pb.TokenBucketOptions, *pb.TokenBucketAcquireRequest]
)

func startGrain[O comparable, P proto.Message, R acquireRequest[P]](f *fakeRuntime, alg *algorithm[O, P], defaults O, state []byte) *grain[O, P, R] {
	f.t.Helper()
	g := newGrain[O, P, R](alg, defaults, nil)
	f.save = g.SaveState
	if state != nil {
		require.NoError(f.t, g.LoadState(state))
	}
	g.start(f)
	return g
}

func newConcurrency(f *fakeRuntime, o limiter.ConcurrencyOptions) *concurrencyGrain {
	return startGrain[limiter.ConcurrencyOptions, *pb.ConcurrencyOptions, *pb.ConcurrencyAcquireRequest](f, concurrency, o, nil)
}

func newFixed(f *fakeRuntime, o limiter.FixedWindowOptions) *fixedGrain {
	return startGrain[limiter.FixedWindowOptions, *pb.FixedWindowOptions, *pb.FixedWindowAcquireRequest](f, fixedWindow, o, nil)
}

func acquire[O comparable, P proto.Message, R acquireRequest[P]](f *fakeRuntime, g *grain[O, P, R], permits int64) outcome {
	return turn(f, func() (*pb.LeaseMetadata, error) {
		return g.Acquire(context.Background(), &pb.AcquireRequest{Permits: permits})
	})
}

func stats[O comparable, P proto.Message, R acquireRequest[P]](t *testing.T, g *grain[O, P, R]) *pb.StatisticsReply {
	t.Helper()
	st, err := g.Statistics(context.Background(), &pb.StatisticsRequest{})
	require.NoError(t, err)
	return st
}

func reason(md *pb.LeaseMetadata) string {
	for _, e := range md.Metadata {
		if e.Name == limiter.MetadataReasonPhrase {
			return e.Value
		}
	}
	return ""
}
