package cancel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/internal/idmap"
)

// activeSlots is the ring size of a registry's calls in progress: a
// connection's call ids count up, so calls find their slots by index and
// only one whose slot a much older call still holds costs a map entry.
const activeSlots = 64

// ErrDuplicateCall is returned by Register for a call id that is still
// active.
var ErrDuplicateCall = errors.New("cancel: call id already active")

// Defaults of the cancellation registry.
const (
	// DefaultEarlyCancelTTL is how long a cancel that arrived before its
	// request is remembered.
	DefaultEarlyCancelTTL = time.Minute
	// DefaultMaxEarlyCancels bounds the remembered early cancels, so a peer
	// cannot grow the registry without limit.
	DefaultMaxEarlyCancels = 4096
)

// Registry is the server side of push cancellation for one
// connection: it maps the call ids of cancellable calls in progress to the
// cancel functions of fresh contexts, one per invocation and never reused.
//
// A cancel for a call in progress cancels its context (a request still
// queued is then dropped without running; a running one sees ctx.Done). A
// cancel for an id not yet registered is remembered for a while, so a cancel
// that overtakes its request is not lost. A cancel after the call finished
// is a no-op: call ids are never reused on a connection, so the remembered
// id matches nothing and expires. It is safe for concurrent use.
type Registry struct {
	now func() time.Time
	ttl time.Duration
	max int

	mu struct {
		sync.Mutex
		active idmap.Map[*invocationContext]
		early  map[uint64]time.Time
		// order holds the early cancels in arrival order, which is also
		// expiry order (one ttl for all): the oldest, expired or not, goes
		// first, in constant time, however many have arrived. An entry whose
		// id Register has consumed since is skipped when its turn comes.
		order     []earlyCancel
		orderHead int
		steps     int64 // entries looked at by eviction, for tests counting work
		// closed is set by CancelAll: the connection is gone, so a call
		// registered later (a relay that looked its grain up meanwhile)
		// starts cancelled.
		closed bool
	}
	registered, cancelled, earlyCancels atomic.Int64
}

type earlyCancel struct {
	id    uint64
	until time.Time
}

// NewRegistry returns an empty registry. now supplies the time used to
// expire early cancels; nil means time.Now.
func NewRegistry(now func() time.Time) *Registry {
	if now == nil {
		now = time.Now
	}
	r := &Registry{now: now, ttl: DefaultEarlyCancelTTL, max: DefaultMaxEarlyCancels}
	r.mu.active.Init(activeSlots)
	r.mu.early = make(map[uint64]time.Time)
	return r
}

// Register creates the fresh context of a cancellable call. The context is
// already cancelled when a cancel for id arrived first, or when CancelAll
// has been called. Registering an id that is still active fails with
// ErrDuplicateCall. Every successful
// Register must be followed by Done.
//
// The context costs one allocation and no goroutine; its Done channel is
// created only when somebody asks for it. It has no deadline and no values.
func (r *Registry) Register(id uint64) (context.Context, error) {
	ctx := new(invocationContext)
	r.mu.Lock()
	if !r.mu.active.Add(id, ctx) {
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: %d", ErrDuplicateCall, id)
	}
	early := false
	if len(r.mu.early) > 0 {
		if _, early = r.mu.early[id]; early {
			delete(r.mu.early, id)
		}
	}
	closed := r.mu.closed
	r.mu.Unlock()
	r.registered.Add(1)
	if early || closed {
		ctx.cancel()
	}
	return ctx, nil
}

// Done removes a finished call and releases its context.
func (r *Registry) Done(id uint64) {
	r.mu.Lock()
	ctx := r.mu.active.Take(id)
	r.mu.Unlock()
	if ctx != nil {
		ctx.cancel()
	}
}

// Cancel cancels the call with the given id. It reports whether a call in
// progress was cancelled; otherwise the id is remembered as an early cancel.
// Either way it costs constant time: remembering one more early cancel
// forgets the expired ones first, then, when the registry is full, the
// oldest.
func (r *Registry) Cancel(id uint64) bool {
	r.mu.Lock()
	ctx := r.mu.active.Get(id)
	ok := ctx != nil
	if !ok {
		r.rememberLocked(id, r.now())
	}
	r.mu.Unlock()
	if ok {
		r.cancelled.Add(1)
		ctx.cancel()
	}
	return ok
}

// rememberLocked records an early cancel for id.
func (r *Registry) rememberLocked(id uint64, now time.Time) {
	if _, dup := r.mu.early[id]; dup {
		return
	}
	for r.mu.orderHead < len(r.mu.order) {
		oldest := r.mu.order[r.mu.orderHead]
		if now.Before(oldest.until) && len(r.mu.order)-r.mu.orderHead < r.max {
			break
		}
		r.mu.steps++
		r.mu.order[r.mu.orderHead] = earlyCancel{}
		r.mu.orderHead++
		if until, ok := r.mu.early[oldest.id]; ok && until.Equal(oldest.until) {
			delete(r.mu.early, oldest.id)
		}
	}
	if r.mu.orderHead > 0 && 2*r.mu.orderHead >= len(r.mu.order) {
		// Move the live part down once the dead part is most of the queue,
		// so its array does not grow with every cancel ever remembered.
		n := copy(r.mu.order, r.mu.order[r.mu.orderHead:])
		clear(r.mu.order[n:])
		r.mu.order, r.mu.orderHead = r.mu.order[:n], 0
	}
	until := now.Add(r.ttl)
	r.mu.early[id] = until
	r.mu.order = append(r.mu.order, earlyCancel{id: id, until: until})
	r.earlyCancels.Add(1)
}

// CancelAll cancels every call in progress, for when the connection that
// carried them is gone and nobody waits for their replies. Calls
// registered afterwards start cancelled.
func (r *Registry) CancelAll() {
	r.mu.Lock()
	r.mu.closed = true
	ctxs := make([]*invocationContext, 0, r.mu.active.Len())
	r.mu.active.Range(func(_ uint64, ctx *invocationContext) { ctxs = append(ctxs, ctx) })
	r.mu.Unlock()
	for _, ctx := range ctxs {
		ctx.cancel()
	}
}

// Stats are a registry's counters.
type Stats struct {
	Active       int   // calls registered and not done
	Early        int   // early cancels remembered now
	Registered   int64 // calls ever registered
	Cancelled    int64 // calls in progress that were cancelled
	EarlyCancels int64 // cancels that arrived for an unknown id
}

// Add adds o's counters to s, to total several registries.
func (s *Stats) Add(o Stats) {
	s.Active += o.Active
	s.Early += o.Early
	s.Registered += o.Registered
	s.Cancelled += o.Cancelled
	s.EarlyCancels += o.EarlyCancels
}

// Stats returns the registry's counters.
func (r *Registry) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Stats{
		Active: r.mu.active.Len(), Early: len(r.mu.early),
		Registered: r.registered.Load(), Cancelled: r.cancelled.Load(), EarlyCancels: r.earlyCancels.Load(),
	}
}
