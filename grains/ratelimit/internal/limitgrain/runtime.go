package limitgrain

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
)

// runtime is what a grain uses of its activation: the methods of
// actor.Context it calls. The grain only ever runs on an *actor.Context
// (through activation); the interface lets its tests drive it turn by
// turn, with a clock of their own, without a silo.
type runtime interface {
	ID() actor.GrainID
	Now() time.Time
	MarkDirty()
	WriteState(ctx context.Context) error
	ClearState(ctx context.Context) error
	CollectSoon()
	SetStateTTL(d time.Duration)
	Defer() (deferred, error)
	AfterFunc(d time.Duration, fn func()) timer
}

// deferred is what a grain uses of an actor.Deferred.
type deferred interface {
	Reply(reply proto.Message, err error) bool
	Deadline() (time.Time, bool)
	OnCancel(fn func())
	Cancellable() bool
	Context() context.Context
}

// timer is what a grain uses of an actor.Timer.
type timer interface {
	Stop()
}

// activation adapts an actor.Context to runtime.
type activation struct{ *actor.Context }

func (a activation) Defer() (deferred, error) {
	d, err := a.Context.Defer()
	if err != nil {
		return nil, err
	}
	return d, nil
}

func (a activation) AfterFunc(d time.Duration, fn func()) timer { return a.Context.AfterFunc(d, fn) }
