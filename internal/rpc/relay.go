package rpc

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/granary-go/granary/internal/delivery"
	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/proxy"
)

// A relay hands a request that arrived on one connection (its origin) to
// another connection (the link to the silo that hosts the grain), with
// the payload still encoded, and sends the reply back the way the request
// came. No goroutine waits for it: the relayed call is an entry in the
// link's call table, completed by the reply, by the link's response-time
// sweep, or by the link closing; and a watch on the origin ends it when
// the origin's caller cancels or the origin goes away, pushing a cancel on
// to the grain when its caller could cancel.

// originReplier is what a relay needs of the Replier a request came with.
// Endpoint and LocalCaller implement it.
type originReplier interface {
	delivery.Replier
	// ReplyRaw answers req with a reply as it arrived from the link:
	// status, error and payload, still encoded.
	ReplyRaw(req *delivery.Request, reply wire.Envelope)
	// watch calls fn once when req's caller cancels or the origin goes
	// away, until stop is called.
	watch(req *delivery.Request, fn func()) (stop func() bool)
}

// relayEntry is one relayed request in a link's call table.
type relayEntry struct {
	link      *Endpoint
	req       *delivery.Request
	stop      func() bool   // stops the watch on the origin
	id        atomic.Uint64 // the call id on the link, once known
	abandoned atomic.Bool   // the origin gave up before the id was known
}

// Relay sends req, a request for a grain that lives at the other end of
// e's connection, on over it, with one more hop. The reply, or the reason
// the call failed, goes to req.Reply, which then owns nothing of req: the
// relay releases it.
func (e *Endpoint) Relay(req *delivery.Request) {
	if req.Ctx != nil && req.Ctx.Err() != nil {
		req.Reply.Reply(req, nil, req.Ctx.Err()) // the caller gave up already: nothing is sent
		req.Release()
		return
	}
	cancellable := req.Ctx != nil
	entry := &relayEntry{link: e, req: req}
	if origin, ok := req.Reply.(originReplier); ok {
		entry.stop = origin.watch(req, entry.abandon)
	}
	p := getPending()
	p.relay = entry
	p.call.Target, p.call.Timeout = req.Target, req.Timeout
	if p.call.Timeout <= 0 {
		p.call.Timeout = proxy.DefaultResponseTimeout
	}
	// The frame is built before the call is in the table: from then on
	// the origin's watch may end the call and release req at any moment.
	o := outPool.Get().(*outFrame)
	o.env = wire.Envelope{
		Kind:      wire.KindRequest,
		GrainType: req.Target.Type, GrainKey: req.Target.Key, MethodID: req.MethodID,
		Payload: req.Payload, PlacementHint: req.Hint,
		Budget: req.Budget, Timeout: req.Timeout, Cancellable: cancellable,
		Hops: req.Hops + 1, FromSilo: req.FromSilo,
		Metadata: req.Metadata,
	}
	if req.Caller != nil {
		// The silo at the other end trusts this silo to name the caller,
		// whom this silo's own handshake (or the silo before it) proved.
		setWire(&o.caller, req.Caller.Identity())
		o.env.Caller = &o.caller
	}
	target := req.Target
	id, err := e.calls.add(p)
	if err != nil {
		putOut(o)
		entry.finish(fmt.Errorf("%w: relay to %v: %w", proxy.ErrUnavailable, e.remote(), err))
		putPending(p)
		return
	}
	entry.id.Store(id)
	if entry.abandoned.Load() {
		putOut(o)
		entry.abandon()
		return
	}
	o.env.CallID = id
	err = e.conn.Load().Send(o)
	putOut(o)
	if err != nil {
		if p := e.calls.take(id); p != nil {
			entry.fail(p, fmt.Errorf("%w: %w: relay %s to %v: %w", ErrNotSent, proxy.ErrUnavailable, target, e.remote(), err))
		}
	}
}

// peerSilo returns the name of the silo at the other end, or "".
func (e *Endpoint) peerSilo() string {
	if c := e.conn.Load(); c != nil {
		return c.Peer().SiloID
	}
	return ""
}

// remote names the link's peer for errors.
func (e *Endpoint) remote() any {
	if c := e.conn.Load(); c != nil {
		return c.RemoteAddr()
	}
	return "an unconnected peer"
}

// abandon ends the relayed call because its origin gave up: the call is
// taken from the link's table (once, whoever else tries), a cancel goes on
// to the grain when its caller could cancel, and the origin is answered
// with context.Canceled, which releases what it registered for the call.
func (r *relayEntry) abandon() {
	id := r.id.Load()
	if id == 0 {
		r.abandoned.Store(true)
		if id = r.id.Load(); id == 0 {
			return // Relay will see abandoned once it knows the id
		}
	}
	p := r.link.calls.take(id)
	if p == nil {
		return
	}
	if r.req.Ctx != nil {
		r.link.sendCancel(id)
	}
	r.fail(p, context.Canceled)
}

// reply completes the relayed call with the link's reply.
//
// The directory caches of the silos a request passes through are kept
// right here: a silo that relays a request another silo sent it (one that
// thought the grain lived here) names the silo that answered, or passes on
// the name it was given by a silo further on, and a silo told that
// corrects its cache. Only the grain's own answer names a silo: one that
// refused the call (stopping, overloaded, out of hops) does not host it.
func (r *relayEntry) reply(p *pending, env wire.Envelope) {
	r.stopWatch()
	answered := env.Status == wire.StatusOK || env.Status == wire.StatusAppError
	if !answered {
		env.MovedTo = ""
	}
	if env.MovedTo != "" && r.link.moved != nil {
		r.link.moved(r.req.Target, env.MovedTo)
	}
	switch {
	case r.req.Hops == 0:
		env.MovedTo = "" // the caller has no directory cache to correct
	case answered && env.MovedTo == "":
		env.MovedTo = r.link.peerSilo()
	}
	if origin, ok := r.req.Reply.(originReplier); ok {
		origin.ReplyRaw(r.req, env)
	} else {
		r.req.Reply.Reply(r.req, nil, &proxy.CallError{Code: proxy.CodeBadRequest, Message: "a relayed reply cannot reach this caller"})
	}
	r.req.Release()
	putPending(p)
}

// fail completes the relayed call with err.
func (r *relayEntry) fail(p *pending, err error) {
	r.finish(err)
	putPending(p)
}

// finish answers the origin with err and releases the request.
func (r *relayEntry) finish(err error) {
	r.stopWatch()
	r.req.Reply.Reply(r.req, nil, err)
	r.req.Release()
}

func (r *relayEntry) stopWatch() {
	if r.stop != nil {
		r.stop()
	}
}

// ReplyRaw implements originReplier: it sends a reply that came from a
// link back on this connection, its payload and failure as they arrived.
func (e *Endpoint) ReplyRaw(req *delivery.Request, reply wire.Envelope) {
	e.answered(req)
	if req.Registered {
		e.cancels.Done(req.CallID)
	}
	o := outPool.Get().(*outFrame)
	o.env = wire.Envelope{
		Kind: wire.KindReply, CallID: req.CallID, Payload: reply.Payload,
		Status: reply.Status, Error: reply.Error, ErrorCode: reply.ErrorCode, ErrorDetails: reply.ErrorDetails,
		MovedTo: reply.MovedTo,
	}
	if err := e.conn.Load().Send(o); err != nil {
		e.log.Debug("relayed reply not sent", slog.Uint64("call", req.CallID), slog.Any("err", err))
	}
	putOut(o)
}

// watch implements originReplier. A request its caller can cancel is
// watched through its context; any other is registered for the watch
// alone, so that this connection closing still ends the relayed call.
func (e *Endpoint) watch(req *delivery.Request, fn func()) (stop func() bool) {
	ctx := req.Ctx
	if ctx == nil {
		var err error
		if ctx, err = e.registry().Register(req.CallID); err != nil {
			return nil
		}
		req.Registered = true
	}
	return afterCancel(ctx, fn)
}

// afterCancel calls fn on its own goroutine once ctx is cancelled, like
// context.AfterFunc. The contexts of calls that came over a connection
// (internal/cancel's) run fn themselves: asking them directly spares a
// relayed call the three allocations of context.AfterFunc's wrapper and
// the Done channel it would make.
func afterCancel(ctx context.Context, fn func()) (stop func() bool) {
	if c, ok := ctx.(interface{ AfterFunc(func()) func() bool }); ok {
		return c.AfterFunc(fn)
	}
	return context.AfterFunc(ctx, fn)
}
