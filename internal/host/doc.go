// Package host keeps the activations of one silo: a Host creates an
// activation when the router says a grain belongs here, runs each on its
// own protoactor-go actor (one turn at a time, through a mailbox of its
// own), registers it in the grain directory before it loads state, and
// deactivates idle ones. An activation's life is a deterministic state
// machine (core.go) inside the actor shell (activation.go). Package actor
// is what grains see of it.
//
// Deactivations that the host asks for in bulk, idle collection and Stop,
// go through one pass at a time, in batches, with at most stopWindow under
// way, outside the host's lock; a grain whose state is at rest
// (CollectSoon) is collected at the next pass that finds it untouched.
// While the host stops, activations hand their final state writes to the
// store's writers (persistence.Record.CloseQueued).
package host
