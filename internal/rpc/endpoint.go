package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/cancel"
	"github.com/granary-go/granary/internal/delivery"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/proxy"
)

// ErrNoInbound is the reply to a request sent to an endpoint that serves no
// grains (a client's connection). It matches proxy.ErrUnavailable.
var ErrNoInbound = fmt.Errorf("%w: this peer hosts no grains", proxy.ErrUnavailable)

// ErrNotSent marks a call that failed before its request left: the callee
// cannot have acted on it, so trying again cannot run it twice.
var ErrNotSent = errors.New("rpc: request not sent")

// Inbound receives the requests that arrive on an endpoint. The activation host is one.
type Inbound interface {
	Deliver(req *delivery.Request)
}

// EndpointOptions configure an Endpoint.
type EndpointOptions struct {
	// SweepInterval is the resolution of response timeouts: pending calls
	// are checked this often. Default 10 ms.
	SweepInterval time.Duration
	// MaxInFlight bounds the requests from the peer that this end works on
	// at once; one more is answered at once with proxy.ErrOverloaded.
	// Default DefaultMaxInFlight.
	MaxInFlight int
	// ActivationRate and ActivationBurst budget the new activations the
	// peer's requests may create (per second, and at once). Defaults
	// DefaultActivationRate and DefaultActivationBurst; a negative rate
	// means no budget (links between silos, which carry many clients'
	// calls).
	ActivationRate, ActivationBurst int
	// MaxKeyLength bounds the grain key of a request from the peer, in
	// bytes; a longer one is answered with proxy.ErrBadRequest. Default
	// DefaultMaxKeyLength; negative: no bound.
	MaxKeyLength int
	// Moved, when set, is told that a reply relayed over this endpoint
	// said the grain lives on another silo than the one at its other end:
	// the directory cache that chose this link was stale.
	Moved func(grain actor.GrainID, silo string)
	// Rejections counts and logs what the endpoint refuses of its peer. A
	// silo shares one among all its endpoints, so that its log throttle
	// holds however many connections a peer opens. Default: one of the
	// endpoint's own, on its logger and clock.
	Rejections *Rejections
	// Rights are what the peer's credential lets it do (a client token's
	// rights); a silo peer is never asked.
	Rights actor.Rights
	// Required, when set, gives the rights a method needs (zero: none); a
	// client's request for a method whose rights it lacks is answered with
	// proxy.ErrPermissionDenied before it reaches any grain. Nil: no
	// method needs a right.
	Required func(grainType string, method uint32) actor.Rights
	// Caller is who the peer is, as its handshake proved, when it is a
	// client: the identity its requests give their grains. A silo peer's
	// requests name the silo, or the caller of a request it relays.
	Caller *delivery.Caller
	// Shares, when set, divide the requests in flight and the new
	// activations under way between the endpoints that share them (a
	// silo's client connections) while several are busy. Nil: only
	// MaxInFlight and the activation budget bound the peer.
	Shares *Shares
	// ReaderRoute, when set, is asked on the reader goroutine where each
	// request goes (Router.FromReader, behind the silo's fence), with
	// whether set while the connection's new activations are shared: a
	// request it relayed has left, and one that may create an activation
	// takes a unit of the share then, or is refused at once when none is
	// left, before it costs more.
	ReaderRoute func(req *delivery.Request, whether bool) Where
}

// Endpoint is one end of a connection between peers (client and gateway, or
// two silos). Both ends can call and be called over the same connection:
// requests, replies and cancels are multiplexed by call id. Reader
// goroutines only decode and hand over: grain code runs in activations.
type Endpoint struct {
	// conn is set by Attach, or by the first frame when the connection's
	// reader runs before Attach (Dial starts it before returning), so it is
	// atomic: the reader goroutine and the dialling one both reach it.
	conn    atomic.Pointer[transport.Conn]
	inbound Inbound
	decoder *wire.Decoder // used only on the connection's reader goroutine
	log     *slog.Logger
	calls   callTable
	runner  *inboundRunner // nil unless inbound can run turns inline

	cancelsOnce sync.Once
	cancels     *cancel.Registry

	admit       admission
	shares      *Shares
	party       *party // the connection's client in shares, nil without shares
	readerRoute func(req *delivery.Request, whether bool) Where
	overShare   bool          // the request just read was refused over its share; only the reader touches it
	left        atomic.Bool   // the connection closed and left its party
	useful      atomic.Uint64 // requests and replies read (UsefulFrames)
	inFlight    atomic.Int64  // requests from the peer not yet answered
	moved       func(actor.GrainID, string)
	rights      actor.Rights
	required    func(grainType string, method uint32) actor.Rights
	caller      *delivery.Caller // a client peer's identity
	// Used only on the reader goroutine: the identity of a silo peer, and
	// that of the last caller it relayed for, so that a link's requests
	// share Callers instead of allocating one each.
	siloCaller    *delivery.Caller
	relayed       *wire.Identity
	relayedCaller *delivery.Caller

	cancelWatches, cancelsSent atomic.Int64
	rejections                 [numRejections]atomic.Int64
	logged                     [numRejections]atomic.Bool // each kind is logged once per connection
	shared                     *Rejections                // counts and throttles rejections with other endpoints
}

var (
	_ proxy.Caller      = (*Endpoint)(nil)
	_ delivery.Replier  = (*Endpoint)(nil)
	_ transport.Handler = (*Endpoint)(nil)
)

// NewEndpoint returns an endpoint that is not yet attached to a connection.
// inbound may be nil for a peer that hosts no grains; interner (may be nil)
// avoids allocating the names of known grain types. Attach it with Attach
// before the connection delivers frames, or pass it as the connection's
// handler and attach it when Dial returns.
func NewEndpoint(opts EndpointOptions, inbound Inbound, interner *wire.Interner, c clock.Clock, log *slog.Logger) *Endpoint {
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	if c == nil {
		c = clock.Real{}
	}
	if log == nil {
		log = slog.Default()
	}
	e := &Endpoint{inbound: inbound, decoder: wire.NewDecoder(interner), log: log, moved: opts.Moved, shared: opts.Rejections,
		rights: opts.Rights, required: opts.Required, caller: opts.Caller, shares: opts.Shares,
		readerRoute: opts.ReaderRoute}
	if e.shared == nil {
		e.shared = NewRejections(newRejectionLog(log, c))
	}
	if e.shares != nil {
		var id actor.Identity
		if opts.Caller != nil {
			id = opts.Caller.Identity()
		}
		e.party = e.shares.join(id)
	}
	e.calls.init(c, opts.SweepInterval)
	e.admit.init(opts, c)
	if in, ok := inbound.(InlineInbound); ok {
		e.runner = newInboundRunner(in)
	}
	return e
}

// Attach sets the connection that outgoing calls use.
func (e *Endpoint) Attach(c *transport.Conn) { e.conn.Store(c) }

// Conn returns the attached connection.
func (e *Endpoint) Conn() *transport.Conn { return e.conn.Load() }

// ResponseTimeout implements proxy.Caller; an endpoint has no default of its
// own, so references should be built on a client or silo caller instead.
func (e *Endpoint) ResponseTimeout() time.Duration { return proxy.DefaultResponseTimeout }

// outFrame is an outgoing envelope. A message with a generated codec is
// encoded as the envelope's payload straight into the connection's send
// buffer, once, instead of into a buffer of its own and then copied. Any
// other message goes through protobuf's slower codec, so prepare encodes it
// first, outside the connection's send lock, where a large one would hold
// up every other sender.
type outFrame struct {
	env wire.Envelope
	msg proto.Message // encoded in place when set
	buf *[]byte       // pooled buffer holding a payload prepare encoded
	// caller holds what env.Caller points to on a relayed request, so
	// that naming the caller allocates nothing.
	caller wire.Identity
}

// prepare sets m as the frame's payload: in place when it has a generated
// codec, otherwise encoded now.
func (o *outFrame) prepare(m proto.Message) error {
	if _, ok := m.(proxy.WireMessage); ok {
		o.msg = m
		return nil
	}
	buf := payloadPool.Get().(*[]byte)
	b, err := proxy.AppendMessage((*buf)[:0], m)
	*buf = b
	o.buf, o.env.Payload = buf, b
	return err
}

// AppendTo implements transport.Marshaler.
func (o *outFrame) AppendTo(b []byte) ([]byte, error) {
	if o.msg == nil {
		return o.env.AppendTo(b), nil
	}
	return o.env.AppendWithPayload(b, o)
}

// AppendPayload implements wire.PayloadAppender.
func (o *outFrame) AppendPayload(b []byte) ([]byte, error) { return proxy.AppendMessage(b, o.msg) }

// releasePayload drops the frame's payload: the message, and the pooled
// buffer prepare encoded it into, which goes back to its pool. The
// envelope stays; whoever reuses the frame overwrites it.
func (o *outFrame) releasePayload() {
	if o.buf != nil && cap(*o.buf) <= 64<<10 {
		payloadPool.Put(o.buf)
	}
	o.msg, o.buf, o.env.Payload = nil, nil, nil
}

// reset drops all the frame's references, returning its buffer, if any.
func (o *outFrame) reset() {
	o.releasePayload()
	*o = outFrame{}
}

var (
	outPool     = sync.Pool{New: func() any { return new(outFrame) }}
	payloadPool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}
)

func putOut(o *outFrame) {
	o.reset()
	outPool.Put(o)
}

// isTransportError tells the errors of transport.Conn.Send from those of
// a frame's own encoding, which Send returns as they are.
func isTransportError(err error) bool {
	return errors.Is(err, transport.ErrClosed) || errors.Is(err, transport.ErrSendQueueFull) ||
		errors.Is(err, transport.ErrFrameTooLarge)
}

// Call implements proxy.Caller: it sends the request and waits for the
// reply, the response timeout, or (only for callers that can cancel) the
// cancellation of ctx, which returns ctx.Err() at once and pushes a cancel
// to the callee.
func (e *Endpoint) Call(ctx context.Context, call proxy.Call, in, out proto.Message) error {
	if err := givenUp(ctx, call); err != nil {
		return err
	}
	md, err := outgoingMetadata(ctx, call)
	if err != nil {
		return err
	}
	p := getPending()
	p.call = call
	id, err := e.calls.add(p)
	if err != nil {
		putPending(p)
		return err
	}
	p.out.env = wire.Envelope{
		Kind: wire.KindRequest, CallID: id,
		GrainType: call.Target.Type, GrainKey: call.Target.Key, MethodID: call.Method.ID,
		PlacementHint: call.PlacementHint,
		Budget:        call.Budget, Timeout: call.Timeout, Cancellable: call.Cancellable,
		Metadata: md,
	}
	if err = p.out.prepare(in); err == nil {
		err = e.conn.Load().Send(&p.out)
	}
	p.out.releasePayload() // putPending clears the rest
	if err != nil {
		if e.calls.take(id) == nil {
			<-p.done // completed concurrently (connection closed); reclaim it
		}
		putPending(p)
		if !isTransportError(err) {
			return fmt.Errorf("%w: encode request: %w", proxy.ErrBadRequest, err)
		}
		return sendError(call, err)
	}

	if !call.Cancellable {
		// No cancellation machinery at all for callers that cannot cancel.
		<-p.done
	} else {
		e.cancelWatches.Add(1)
		select {
		case <-p.done:
		case <-ctx.Done():
			if e.calls.take(id) != nil {
				putPending(p)
				e.sendCancel(id)
				return ctx.Err()
			}
			<-p.done // the reply won the race: use it
		}
	}
	return finish(p, out)
}

// sendError explains a request that could not be queued. Nothing was sent,
// so the error matches ErrNotSent and the caller may safely try again. A
// closed connection reads as proxy.ErrUnavailable and a full send queue as
// proxy.ErrOverloaded; both still match the transport's own error.
func sendError(call proxy.Call, err error) error {
	switch {
	case errors.Is(err, transport.ErrClosed):
		return fmt.Errorf("%w: %w: %s: %w", ErrNotSent, proxy.ErrUnavailable, call.Method.FullName(), err)
	case errors.Is(err, transport.ErrSendQueueFull):
		return fmt.Errorf("%w: %w: %s: %w", ErrNotSent, proxy.ErrOverloaded, call.Method.FullName(), err)
	}
	return fmt.Errorf("%w: %s: %w", ErrNotSent, call.Method.FullName(), err)
}

// finish turns a completed pending call into the caller's result.
func finish(p *pending, out proto.Message) error {
	err := p.err
	if err == nil {
		if uerr := proxy.UnmarshalFresh(p.payload, out); uerr != nil {
			err = fmt.Errorf("%w: decode reply: %w", proxy.ErrBadRequest, uerr)
		}
	}
	putPending(p)
	return err
}

func (e *Endpoint) sendCancel(id uint64) {
	e.cancelsSent.Add(1)
	o := outPool.Get().(*outFrame)
	o.env = wire.Envelope{Kind: wire.KindCancel, CallID: id}
	if err := e.conn.Load().Send(o); err != nil {
		e.log.Debug("cancel not sent", slog.Uint64("call", id), slog.Any("err", err))
	}
	putOut(o)
}

// HandleFrame implements transport.Handler. It runs on the reader goroutine:
// it decodes and hands over, never running grain code.
func (e *Endpoint) HandleFrame(c *transport.Conn, body []byte) {
	if e.conn.Load() == nil {
		// A frame before Attach: a peer's request must be answered on the
		// connection it came from.
		e.conn.CompareAndSwap(nil, c)
	}
	var env wire.Envelope
	if err := e.decoder.Decode(body, &env); err != nil {
		if kind, id, ok := wire.Salvage(body); ok && kind == wire.KindRequest && id != 0 {
			// A well-formed request with bad contents (a key that is not
			// UTF-8, say) fails alone; the connection carries on.
			e.rejected(rejectBadRequest)
			e.refuse(id, fmt.Errorf("%w: %w", proxy.ErrBadRequest, err))
			return
		}
		e.rejectedFrame(rejectMalformedFrame, slog.Any("err", err))
		c.Close()
		return
	}
	switch env.Kind {
	case wire.KindReply:
		e.useful.Add(1)
		p := e.calls.take(env.CallID)
		if p == nil {
			return // timed out or abandoned: drop the late reply
		}
		if p.relay != nil {
			p.relay.reply(p, env) // by value: a pointer would put every frame's envelope on the heap
			return
		}
		if p.err = errorOf(&env); p.err == nil {
			p.payload = env.Payload
		}
		p.done <- struct{}{}
	case wire.KindRequest:
		e.useful.Add(1)
		e.onRequest(c, &env)
		if e.overShare {
			// The client asked for more than its share: this
			// connection's next frame waits a little, so that a peer
			// retrying at once spends the machine's CPU (its own
			// included, when it runs beside the silo) on its retries at
			// most about sharePause apart, however many connections it
			// opened. Real time, not the endpoint's clock: it paces
			// reading and decides no outcome.
			e.overShare = false
			time.Sleep(e.party.pause())
		}
	case wire.KindCancel:
		e.registry().Cancel(env.CallID)
	default:
		e.rejectedFrame(rejectUnknownFrameKind, slog.Any("kind", env.Kind))
		c.Close()
	}
}

func (e *Endpoint) registry() *cancel.Registry {
	e.cancelsOnce.Do(func() { e.cancels = cancel.NewRegistry(e.calls.clock.Now) })
	return e.cancels
}

func (e *Endpoint) onRequest(c *transport.Conn, env *wire.Envelope) {
	if n := len(env.GrainKey); n > e.admit.maxKeyLen && e.admit.maxKeyLen >= 0 {
		e.rejected(rejectBadRequest)
		e.refuse(env.CallID, keyTooLong(n, e.admit.maxKeyLen))
		return
	}
	if e.inFlight.Add(1) > e.admit.maxInFlight {
		e.inFlight.Add(-1)
		e.rejected(rejectInFlight)
		e.refuse(env.CallID, overloadedInFlight(e.admit.maxInFlight))
		return
	}
	if e.party != nil {
		busy := e.shares.arrive(e.party)
		n := e.party.inFlight.Add(1)
		if share := e.shares.inFlightShare(busy); share >= 0 && n > share {
			e.party.inFlight.Add(-1)
			e.inFlight.Add(-1)
			e.rejected(rejectInFlight)
			e.overShare = true
			e.refuse(env.CallID, overShare("calls in flight", share, busy))
			return
		}
	}
	req := delivery.NewRequest()
	req.Target = actor.GrainID{Type: env.GrainType, Key: env.GrainKey}
	req.CallID, req.MethodID = env.CallID, env.MethodID
	req.Payload, req.Budget, req.Reply = env.Payload, env.Budget, e
	req.Hint, req.Timeout = env.PlacementHint, env.Timeout
	req.Caller, req.Metadata = e.caller, env.Metadata
	if c != nil && c.Peer().Role == transport.RoleSilo {
		// Only a silo, as its handshake proved, may say that it forwarded
		// the call, address the silo itself (the directory), or name the
		// caller it relays for: what a client claims of any is ignored.
		req.Hops, req.FromSilo = env.Hops, true
		req.Caller = e.callerFromSilo(c, env.Caller)
	}
	if e.required != nil && !req.FromSilo {
		if need := e.required(env.GrainType, env.MethodID); !e.rights.Has(need) {
			e.Reply(req, nil, permissionDenied(need, e.rights)) // counted there
			return
		}
	}
	if e.inbound == nil {
		e.Reply(req, nil, ErrNoInbound)
		return
	}
	if env.Budget < 0 || env.Timeout < 0 {
		e.Reply(req, nil, fmt.Errorf("%w: negative budget or timeout", proxy.ErrBadRequest))
		return
	}
	if env.Cancellable {
		ctx, err := e.registry().Register(env.CallID)
		if err != nil {
			e.Reply(req, nil, fmt.Errorf("%w: %w", proxy.ErrBadRequest, err))
			return
		}
		req.Ctx, req.Registered = ctx, true
	}
	if e.readerRoute != nil {
		share := int64(-1)
		if e.shares != nil {
			share = e.shares.activationShare()
		}
		switch e.readerRoute(req, share >= 0) {
		case WhereRelayed:
			return
		case WhereNew:
			// The share is taken here, as the request is read: a batch
			// of requests read at once must not all pass a count that
			// only the host's admission, later, would raise.
			if e.party.activating.Add(1) > share {
				e.party.activating.Add(-1)
				e.overShare = true
				e.rejected(rejectActivationShare)
				e.Reply(req, nil, overShare("new activations under way", share, e.shares.busy()))
				return
			}
			req.Activating = true
		}
	}
	if e.runner != nil {
		e.runner.deliver(req)
		return
	}
	e.inbound.Deliver(req)
}

// callerFromSilo returns the Caller of a request from the silo at the
// other end of c: the caller the silo names when it relays a request, or
// else the silo itself. It runs on the reader goroutine, which alone
// touches the fields it caches.
func (e *Endpoint) callerFromSilo(c *transport.Conn, named *wire.Identity) *delivery.Caller {
	if named == nil {
		if e.siloCaller == nil {
			e.siloCaller = delivery.NewCaller(actor.Identity{Kind: actor.CallerSilo, Name: c.Peer().SiloID})
		}
		return e.siloCaller
	}
	if named != e.relayed { // the decoder shares an Identity that repeats
		e.relayed, e.relayedCaller = named, delivery.NewCaller(identityOf(named))
	}
	return e.relayedCaller
}

// Reply implements delivery.Replier: it sends the outcome of a request that
// arrived on this endpoint.
func (e *Endpoint) Reply(req *delivery.Request, reply proto.Message, err error) {
	e.answered(req)
	if err != nil {
		if k, ok := rejectionOf(err); ok {
			e.rejected(k)
		}
	}
	if req.Registered {
		e.cancels.Done(req.CallID)
	}
	o := outPool.Get().(*outFrame)
	defer putOut(o)
	conn := e.conn.Load()
	serr := o.setReply(req.CallID, reply, err)
	if serr == nil {
		serr = conn.Send(o)
	}
	switch {
	case serr == nil:
	case errors.Is(serr, transport.ErrFrameTooLarge):
		o.releasePayload()
		_ = o.setReply(req.CallID, nil, fmt.Errorf("%w: reply exceeds the maximum frame size", proxy.ErrBadRequest))
		serr = conn.Send(o)
	case !isTransportError(serr):
		o.releasePayload()
		_ = o.setReply(req.CallID, nil, fmt.Errorf("%w: encode reply: %w", proxy.ErrBadRequest, serr))
		serr = conn.Send(o)
	}
	if serr != nil {
		e.log.Debug("reply not sent", slog.Uint64("call", req.CallID), slog.Any("err", serr))
	}
}

// rejected counts a refusal of a request, of kind k, and logs the first of
// its kind on this connection, through the shared throttle, so that no peer
// can flood the log.
func (e *Endpoint) rejected(k rejection) {
	if e.count(k) {
		e.shared.log.Log(slog.LevelInfo, "rpc: request refused", slog.Any("peer", e.remote()),
			slog.String("reason", rejectionNames[k]),
			slog.String("note", "logged once per connection; see the silo's stats for the count"))
	}
}

// rejectedFrame counts a frame of kind k that closes the connection, and
// logs it through the shared throttle, with detail.
func (e *Endpoint) rejectedFrame(k rejection, detail slog.Attr) {
	if e.count(k) {
		e.shared.log.Log(slog.LevelWarn, "rpc: connection closed: "+rejectionNames[k], slog.Any("peer", e.remote()), detail)
	}
}

// count counts a rejection of kind k, here and in the shared counts, and
// reports whether it is this connection's first of its kind.
func (e *Endpoint) count(k rejection) bool {
	e.rejections[k].Add(1)
	e.shared.counts[k].Add(1)
	return !e.logged[k].Swap(true)
}

// refuse answers the request with call id at once with err, before
// anything was made of it.
func (e *Endpoint) refuse(id uint64, err error) {
	o := outPool.Get().(*outFrame)
	o.env = wire.Envelope{Kind: wire.KindReply, CallID: id}
	encodeError(err).setOn(&o.env)
	if serr := e.conn.Load().Send(o); serr != nil {
		e.log.Debug("refusal not sent", slog.Uint64("call", id), slog.Any("err", serr))
	}
	putOut(o)
}

// setReply makes o, which must carry no payload, the reply to call id: err's code
// and text when err is set, otherwise the reply message. It returns the
// message's encoding error.
func (o *outFrame) setReply(id uint64, reply proto.Message, err error) error {
	o.env = wire.Envelope{Kind: wire.KindReply, CallID: id}
	if err != nil {
		encodeError(err).setOn(&o.env)
		return nil
	}
	if reply == nil {
		return nil
	}
	return o.prepare(reply)
}

// HandleClose implements transport.Handler: calls waiting on this
// connection fail with proxy.ErrUnavailable, and calls it carried in are
// cancelled, since nobody waits for their replies any more.
func (e *Endpoint) HandleClose(c *transport.Conn, err error) {
	// A connection that closes before Attach (or any frame) still names
	// itself, so that the endpoint's final Stats count its traffic.
	e.conn.CompareAndSwap(nil, c)
	cause := err
	if cause == nil {
		cause = transport.ErrClosed
	}
	if e.party != nil && e.left.CompareAndSwap(false, true) {
		e.shares.leave(e.party)
	}
	e.calls.close(fmt.Errorf("%w: %w", proxy.ErrUnavailable, cause))
	e.registry().CancelAll()
	if e.runner != nil {
		e.runner.close()
	}
}

// Idle implements transport.Idler: no call is in flight either way.
func (e *Endpoint) Idle() bool { return e.inFlight.Load() == 0 && e.calls.len() == 0 }

// UsefulFrames implements transport.UsefulCounter: the requests and
// replies read, which a peer's cancels do not count among.
func (e *Endpoint) UsefulFrames() uint64 { return e.useful.Load() }

// EndpointStats are an endpoint's counters.
type EndpointStats struct {
	Pending       int   // outgoing calls waiting for replies
	CancelWatches int64 // outgoing calls that watched their context
	CancelsSent   int64 // cancels pushed to the callee
	Timeouts      int64 // outgoing calls failed by the response timeout
	InFlight      int64 // incoming requests not yet answered
	Overloaded    int64 // incoming requests refused: too many in flight
	Denied        int64 // incoming requests refused: a right the method needs is missing
	OverBudget    int64 // incoming requests refused: their new activation was over budget
	OverShare     int64 // incoming requests refused: their new activation was over the client's share
	BadRequests   int64 // incoming requests refused for contents that could not be read
	Inbound       cancel.Stats
	Transport     transport.Stats // the connection's traffic
}

// Add adds o's counters to s, to total several endpoints.
func (s *EndpointStats) Add(o EndpointStats) {
	s.Pending += o.Pending
	s.CancelWatches += o.CancelWatches
	s.CancelsSent += o.CancelsSent
	s.Timeouts += o.Timeouts
	s.InFlight += o.InFlight
	s.Overloaded += o.Overloaded
	s.OverBudget += o.OverBudget
	s.OverShare += o.OverShare
	s.BadRequests += o.BadRequests
	s.Denied += o.Denied
	s.Inbound.Add(o.Inbound)
	s.Transport.Add(o.Transport)
}

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() EndpointStats {
	var traffic transport.Stats
	if c := e.conn.Load(); c != nil { // nil until Attach, a first frame or the close
		traffic = c.Stats()
	}
	return EndpointStats{
		Pending: e.calls.len(), CancelWatches: e.cancelWatches.Load(), CancelsSent: e.cancelsSent.Load(),
		Timeouts: e.calls.timeouts.Load(), InFlight: e.inFlight.Load(),
		Overloaded: e.rejections[rejectInFlight].Load(), OverBudget: e.rejections[rejectActivationBudget].Load(),
		OverShare:   e.rejections[rejectActivationShare].Load(),
		BadRequests: e.rejections[rejectBadRequest].Load(), Denied: e.rejections[rejectPermissionDenied].Load(), Inbound: e.registry().Stats(), Transport: traffic,
	}
}
