package rpc

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/cancel"
	"github.com/granary-go/granary/internal/delivery"
	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/proxy"
)

// LocalCaller calls grains hosted in this process without a connection. It
// keeps the semantics of a remote call: arguments and replies are copied
// through their encoding, response timeouts come from one coarse clock, and
// only callers that can cancel get a cancellable context on the grain side.
type LocalCaller struct {
	inbound Inbound
	timeout func() time.Duration
	calls   callTable
	cancels *cancel.Registry // contexts of cancellable calls, as on a connection
	caller  *delivery.Caller // who the calls are from: the silo; nil until Identified
}

var (
	_ proxy.Caller     = (*LocalCaller)(nil)
	_ delivery.Replier = (*LocalCaller)(nil)
)

// NewLocalCaller returns a caller that delivers to inbound. timeout supplies
// the default response timeout; it is read when a reference is used, so it
// may change after the caller is built.
func NewLocalCaller(inbound Inbound, timeout func() time.Duration, c clock.Clock, sweep time.Duration) *LocalCaller {
	if c == nil {
		c = clock.Real{}
	}
	if sweep <= 0 {
		sweep = DefaultSweepInterval
	}
	l := &LocalCaller{inbound: inbound, timeout: timeout, cancels: cancel.NewRegistry(c.Now)}
	l.calls.init(c, sweep)
	return l
}

// Identified makes the calls of l come from id (the silo), for grains that
// ask who calls them, and returns l. Call it before the first call.
func (l *LocalCaller) Identified(id actor.Identity) *LocalCaller {
	l.caller = delivery.NewCaller(id)
	return l
}

// ResponseTimeout implements proxy.Caller.
func (l *LocalCaller) ResponseTimeout() time.Duration { return l.timeout() }

// localReplySize is the room an in-process call's reply starts with. The
// hand codec appends field by field, and a reply of a few fields (a
// limiter's lease) grown from nil takes three or four allocations; most
// replies fit in this one.
const localReplySize = 64

// Call implements proxy.Caller.
func (l *LocalCaller) Call(ctx context.Context, call proxy.Call, in, out proto.Message) error {
	if err := givenUp(ctx, call); err != nil {
		return err
	}
	md, err := outgoingMetadata(ctx, call)
	if err != nil {
		return err
	}
	payload, err := proxy.AppendMessage(nil, in)
	if err != nil {
		return fmt.Errorf("%w: encode request: %w", proxy.ErrBadRequest, err)
	}
	p := getPending()
	p.call = call
	id, err := l.calls.add(p)
	if err != nil {
		putPending(p)
		return err
	}
	req := delivery.NewRequest()
	req.Target, req.CallID, req.MethodID = call.Target, id, call.Method.ID
	req.Payload, req.Budget, req.Reply = payload, call.Budget, l
	req.Hint, req.Timeout, req.FromSilo = call.PlacementHint, call.Timeout, true
	req.Caller, req.Metadata = l.caller, md
	if !call.Cancellable {
		l.inbound.Deliver(req)
		<-p.done
		return finish(p, out)
	}
	callCtx, err := l.cancels.Register(id)
	if err != nil { // call ids are never reused, so this cannot happen
		l.calls.take(id)
		putPending(p)
		return err
	}
	req.Ctx, req.Registered = callCtx, true
	l.inbound.Deliver(req)
	select {
	case <-p.done:
	case <-ctx.Done():
		if l.calls.take(id) != nil {
			putPending(p)
			l.cancels.Cancel(id)
			return ctx.Err()
		}
		<-p.done
	}
	return finish(p, out)
}

// Reply implements delivery.Replier. The reply is encoded inside the grain's
// turn, so the caller never shares a message with the grain, and an error
// goes through what a reply over a connection carries, so the caller gets
// the same error whether the grain is local or remote.
func (l *LocalCaller) Reply(req *delivery.Request, reply proto.Message, err error) {
	if req.Registered {
		l.cancels.Done(req.CallID)
	}
	p := l.calls.take(req.CallID)
	if p == nil {
		return
	}
	if err == nil && reply != nil {
		p.payload, err = proxy.AppendMessage(make([]byte, 0, localReplySize), reply)
	}
	p.err = sameAsRemote(err)
	p.done <- struct{}{}
}

// ReplyRaw implements originReplier, for calls of this caller that a
// silo link relayed.
func (l *LocalCaller) ReplyRaw(req *delivery.Request, reply wire.Envelope) {
	if req.Registered {
		l.cancels.Done(req.CallID)
	}
	p := l.calls.take(req.CallID)
	if p == nil {
		return
	}
	if p.err = errorOf(&reply); p.err == nil {
		p.payload = reply.Payload
	}
	p.done <- struct{}{}
}

// watch implements originReplier: a relayed call of a caller that can
// cancel ends when it does.
func (l *LocalCaller) watch(req *delivery.Request, fn func()) (stop func() bool) {
	if req.Ctx == nil {
		return nil
	}
	return afterCancel(req.Ctx, fn)
}

// Pending reports how many calls wait for replies.
func (l *LocalCaller) Pending() int { return l.calls.len() }

// Close fails waiting calls, refuses new ones and cancels the contexts of
// cancellable calls still running.
func (l *LocalCaller) Close() {
	l.calls.close(fmt.Errorf("%w: the silo's caller is closed", proxy.ErrUnavailable))
	l.cancels.CancelAll() // nobody waits for the calls' replies any more
}
