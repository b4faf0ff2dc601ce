// Package turn lets package actor and the call path ask a grain method's
// context about the turn it runs in: the call's budget and deadline, how
// much of the budget is left, and a way to say that the turn is about to
// wait for another call.
package turn

import (
	"context"
	"time"
)

// Key is the context value key under which a grain method's context
// answers with its Info.
type Key struct{}

// Info is what a grain method's context tells about its turn.
type Info interface {
	// CallBudget returns the call's budget; ok is false for a call
	// without one.
	CallBudget() (budget time.Duration, ok bool)
	// BudgetDeadline returns when the budget runs out, fixing it on first
	// use. (Not Deadline: the context's own Deadline stays what its
	// parent says, since nothing cancels it when the budget runs out.)
	BudgetDeadline() (deadline time.Time, ok bool)
	// TimeLeft returns how much of the call's budget is left, by the
	// host's clock; ok is false for a call without a budget.
	TimeLeft() (left time.Duration, ok bool)
}

// Of returns the Info of ctx, or nil when ctx is not (derived from) a grain
// method's context with a budget or a cancellable caller.
func Of(ctx context.Context) Info {
	info, _ := ctx.Value(Key{}).(Info)
	return info
}

// CallerKey is the context value key under which a grain method's context
// answers with its caller's identity (an *actor.Identity), and
// MetadataKey the one under which it answers with the call's metadata
// (a []string of key and value pairs). Neither is set when the call has
// none.
type (
	CallerKey   struct{}
	MetadataKey struct{}
)

// OutgoingKey is the context value key of the metadata that calls made
// with a context carry (a []string of key and value pairs), set by
// actor.WithMetadata.
type OutgoingKey struct{}

// Outgoing returns the metadata that calls made with ctx carry.
func Outgoing(ctx context.Context) []string {
	md, _ := ctx.Value(OutgoingKey{}).([]string)
	return md
}
