package testgrain

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/proxy"
)

// Grain is the Counter grain: a number that survives deactivation through
// the silo's state store.
type Grain struct {
	gc       *actor.Context
	value    int64
	gate     *Gate
	callerOf func(*actor.Context) proxy.Caller
	held     []*actor.Deferred // calls to Never, held until deactivation
}

// Compile-time checks of the interfaces the runtime looks for.
var (
	_ CounterGrain    = (*Grain)(nil)
	_ actor.Activator = (*Grain)(nil)
	_ actor.Stateful  = (*Grain)(nil)
)

// New returns the grain of a new activation. gate (may be nil) lets tests
// see and release calls to Block.
func New(gate *Gate) func(actor.GrainID) CounterGrain { return NewCalling(gate, nil) }

// NewCalling is New for grains that call other grains (Relay, Nest)
// through the caller callerOf gives them, such as silo.CallerOf.
func NewCalling(gate *Gate, callerOf func(*actor.Context) proxy.Caller) func(actor.GrainID) CounterGrain {
	return func(actor.GrainID) CounterGrain { return &Grain{gate: gate, callerOf: callerOf} }
}

// OnActivate keeps the grain context.
func (g *Grain) OnActivate(_ context.Context, gc *actor.Context) error {
	g.gc = gc
	return nil
}

// LoadState restores the value written by SaveState.
func (g *Grain) LoadState(data []byte) error {
	v, n := protowire.ConsumeVarint(data)
	if n < 0 {
		return errors.New("counter: corrupt state")
	}
	g.value = int64(v)
	return nil
}

// SaveState encodes the value.
func (g *Grain) SaveState() ([]byte, error) {
	return protowire.AppendVarint(nil, uint64(g.value)), nil
}

// Add adds delta to the value and marks the state dirty; the silo writes
// it within one flush period.
func (g *Grain) Add(ctx context.Context, in *AddRequest) (*AddReply, error) {
	g.value += in.Delta
	g.gc.MarkDirty()
	return &AddReply{Value: g.value, BudgetNanos: budgetNanos(ctx)}, nil
}

// Get returns the value.
func (g *Grain) Get(ctx context.Context, _ *GetRequest) (*GetReply, error) {
	return &GetReply{Value: g.value, BudgetNanos: budgetNanos(ctx)}, nil
}

// Block holds its turn until the call is cancelled, the gate releases it,
// or its budget runs out. Real grains must not block a turn; this method
// exists to test cancellation of running and queued calls.
func (g *Grain) Block(ctx context.Context, in *BlockRequest) (*BlockReply, error) {
	var release <-chan struct{}
	if g.gate != nil {
		release = g.gate.enter(in.Tag)
	}
	var expired <-chan time.Time
	if deadline, ok := actor.Deadline(ctx); ok {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	reply := &BlockReply{}
	select {
	case <-ctx.Done():
		reply.Cancelled = true
	case <-release:
	case <-expired:
	}
	if g.gate != nil {
		g.gate.exited <- BlockExit{Tag: in.Tag, Cancelled: reply.Cancelled}
	}
	return reply, nil
}

// Panic panics.
func (g *Grain) Panic(context.Context, *PanicRequest) (*PanicReply, error) {
	panic("counter: asked to panic")
}

// Never keeps the call's reply and never answers it: the caller's response
// timeout ends the call.
func (g *Grain) Never(context.Context, *NeverRequest) (*NeverReply, error) {
	d, err := g.gc.Defer()
	if err != nil {
		return nil, err
	}
	g.held = append(g.held, d)
	return nil, nil
}

// Fail returns the error the request describes.
func (g *Grain) Fail(_ context.Context, in *FailRequest) (*FailReply, error) {
	if in.GetPlain() {
		return nil, errors.New(in.GetMessage())
	}
	err := proxy.NewError(in.GetCode(), in.GetMessage())
	if in.GetDetail() != "" {
		return nil, must(err.WithDetails(wrapperspb.String(in.GetDetail())))
	}
	return nil, err
}

func must(err *proxy.Error, bad error) error {
	if bad != nil {
		return bad
	}
	return err
}

// Relay calls Add on another Counter grain with this call's context.
func (g *Grain) Relay(ctx context.Context, in *RelayRequest) (*RelayReply, error) {
	r, err := NewCounterRef(g.callerOf(g.gc), in.GetKey()).Add(ctx, &AddRequest{Delta: in.GetDelta()})
	if err != nil {
		return nil, err
	}
	return &RelayReply{Value: r.GetValue(), OuterBudgetNanos: budgetNanos(ctx), InnerBudgetNanos: r.GetBudgetNanos()}, nil
}

// Nest calls Block on another Counter grain with this call's context, so
// that cancelling this call cancels that one.
func (g *Grain) Nest(ctx context.Context, in *NestRequest) (*BlockReply, error) {
	return NewCounterRef(g.callerOf(g.gc), in.GetKey()).Block(ctx, &BlockRequest{Tag: in.GetTag()})
}

func budgetNanos(ctx context.Context) int64 {
	b, ok := actor.Budget(ctx)
	if !ok {
		return 0
	}
	return int64(b)
}

// BlockExit reports how a call to Block ended.
type BlockExit struct {
	Tag       string
	Cancelled bool
}

// Gate lets a test observe calls to Block and release them.
type Gate struct {
	entered chan string
	exited  chan BlockExit
	mu      sync.Mutex
	waiters map[string]chan struct{}
	open    bool // every Block call returns at once
}

// NewGate returns a gate that reports up to buffer entered and exited calls
// without blocking.
func NewGate(buffer int) *Gate {
	return &Gate{entered: make(chan string, buffer), exited: make(chan BlockExit, buffer), waiters: make(map[string]chan struct{})}
}

// Exited delivers how each call to Block ended.
func (g *Gate) Exited() <-chan BlockExit { return g.exited }

func (g *Gate) enter(tag string) <-chan struct{} {
	ch := make(chan struct{})
	g.mu.Lock()
	if g.open {
		close(ch)
	} else {
		g.waiters[tag] = ch
	}
	g.mu.Unlock()
	g.entered <- tag
	return ch
}

// Entered delivers the tag of each call to Block as it starts.
func (g *Gate) Entered() <-chan string { return g.entered }

// Open lets every Block call return, those waiting and those to come.
func (g *Gate) Open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = true
	for tag, ch := range g.waiters {
		close(ch)
		delete(g.waiters, tag)
	}
}

// Release lets the Block call with the given tag return.
func (g *Gate) Release(tag string) {
	g.mu.Lock()
	ch := g.waiters[tag]
	delete(g.waiters, tag)
	g.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}
