// Package cluster connects silos and clients. Today it holds the call
// layer that rides on each connection: an Endpoint multiplexes requests,
// replies and cancels in both directions over one transport.Conn, and a
// LocalCaller gives the same call semantics to code in the silo's own
// process. Membership, the grain directory and silo-to-silo routing build
// on these endpoints.
//
// # The call path
//
// A caller's request gets a call id and a pending entry; the reply
// completes it. Response timeouts are enforced by one coarse clock per
// connection (EndpointOptions.SweepInterval), armed only while calls are
// pending, so no call arms a timer of its own. A reply that arrives after
// its call timed out is dropped.
//
// Callers whose context cannot be cancelled (ctx.Done() == nil) wait on the
// reply alone and send no cancellation flag. Callers that can cancel also
// watch their context; when it ends, Call returns ctx.Err() at once and
// pushes a cancel frame. The receiving end keeps a cancel.Registry per
// connection that turns the cancel into the cancellation of a fresh
// per-invocation context.
//
// Reader goroutines only decode frames and hand requests to the silo's
// activations (Inbound); grain code never runs on them.
package rpc
