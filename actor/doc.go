// Package actor is granary's grain programming model: grain identities,
// lifecycle hooks, the grain Context, deferred replies, timers, and the
// budget of a call. A silo (package silo) runs the activations.
//
// # Activations and turns
//
// A grain is addressed by a GrainID and activated on its first request. Each
// activation runs on its own protoactor-go actor and processes one message
// at a time (a turn): requests, timer ticks, cancel notifications and state
// flushes all arrive through the same mailbox, so grain state needs no
// locks. Turns are not re-entrant: a request starts only after the previous
// one returned.
//
// A grain method must not block its turn waiting for something else. Work
// that waits keeps a Deferred (Context.Defer) and answers from a later turn.
//
// # Budgets and cancellation
//
// Bounded methods receive a budget (Budget) measured from when the method
// starts. A budget is data, not a timer: a method that answers at once
// costs nothing, and only code that waits arms a deadline, typically with
// Context.AfterFunc. Calls from callers that can cancel carry a context
// that is cancelled when the caller gives up; a request still queued when
// that happens is dropped without running.
//
// # Who is calling, and call metadata
//
// IdentityOf tells a method (or an incoming filter, which gets the same
// context) who made the call: a client, named after the token or
// certificate its connection proved, with the Rights of that credential;
// or a silo, for calls between grains. It comes from the handshake of the
// connection the call came on, never from anything the caller wrote in
// the call, and a call relayed from silo to silo keeps it. A Deferred's
// context (Deferred.Context) tells the same to the later turn that
// answers.
//
// Metadata are string pairs a caller attaches with WithMetadata (a tenant,
// an end user, trace context), bounded by MaxMetadataEntries and
// MaxMetadataBytes, read with MetadataOf. They cross gateways and relays;
// they are not passed on to the calls a method makes unless it says so.
// A call that carries none costs what it did before they existed.
//
// # Lifecycle
//
// The first turn of an activation loads stored state (Stateful) and runs
// OnActivate (Activator). An activation idle for longer than the collection
// age (15 minutes by default) is deactivated: OnDeactivate (Deactivator)
// runs, dirty state is flushed, and messages that were already queued are
// re-delivered to the grain's next activation. A method that panics answers
// its caller with ErrPanic and deactivates the activation; the next call
// activates the grain again.
package actor
