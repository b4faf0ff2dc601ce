// Package grainrt links package actor, the grain programming model users
// see, to the activation host behind it (internal/host), which imports
// actor: it holds what actor's handles (Context, Deferred, Timer) call,
// typed, without a package variable, an init() or a method in actor's API.
//
// Each of actor's handles embeds a Handle under an unexported alias, so the
// field's name is unexported and the Handle, which has no exported field or
// method, shows nowhere in actor's API. Its one method is unexported too,
// and it is what lets the host reach the Handle inside a handle: only a
// type that embeds a Handle implements Embedding. The host builds a
// handle's zero value and binds it to its runtime (Bind); actor's methods
// call what their handle was bound to (Runtime); and silo.CallerOf reaches
// an activation's owner through the host (RuntimeOf).
//
// This package cannot import actor, which imports it, so the runtime
// interfaces name actor's types (actor.GrainID, *actor.Deferred,
// *actor.Timer) through type parameters. For the same reason a hook that
// actor set in an init() could not be typed: its type could name neither
// actor's handles nor the host's runtime, and was any until this package
// took its place.
package grainrt

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"
)

// Context is what an actor.Context calls: the activation host's runtime
// behind a grain's handle on its activation. G is actor.GrainID, D
// *actor.Deferred and T *actor.Timer. actor.Context documents each
// method.
type Context[G, D, T any] interface {
	ID() G
	Now() time.Time
	MarkDirty()
	WriteState(ctx context.Context) error
	ClearState(ctx context.Context) error
	DeactivateOnIdle()
	CollectSoon()
	SetStateTTL(d time.Duration)
	Defer() (D, error)
	RegisterTimer(due, period time.Duration, fn func()) T
}

// Deferred is what an actor.Deferred calls: a reply the grain keeps.
// actor.Deferred documents each method.
type Deferred interface {
	Context() context.Context
	Deadline() (deadline time.Time, ok bool)
	Cancellable() bool
	OnCancel(fn func())
	Answered() bool
	Reply(reply proto.Message, err error) bool
}

// Timer is what an actor.Timer calls.
type Timer interface {
	Stop()
}

// Handle holds the runtime R that one of actor's handles calls. The zero
// value holds the zero R; Bind sets it.
type Handle[R any] struct {
	rt R
}

func (h *Handle[R]) handle() *Handle[R] { return h }

// Embedding is implemented by a pointer to a type that embeds a
// Handle[R], and only by such a pointer: *actor.Context, *actor.Deferred
// and *actor.Timer.
type Embedding[R any] interface{ handle() *Handle[R] }

// Bind makes the handle e call rt. The host binds each handle once, as it
// builds it, before a grain sees it.
func Bind[R any](e Embedding[R], rt R) { e.handle().rt = rt }

// RuntimeOf returns what the handle e calls: the zero R when it was never
// bound.
func RuntimeOf[R any](e Embedding[R]) R { return e.handle().rt }

// Runtime returns what h calls, for the methods of the handle that embeds
// h: RuntimeOf without the interface.
func Runtime[R any](h *Handle[R]) R { return h.rt }
