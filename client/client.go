package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/proxy"
)

// ErrClosed is returned by calls on a closed client.
var ErrClosed = errors.New("client: closed")

// Client reaches grains through a gateway silo. It implements proxy.Caller,
// so generated references are built on it (NewCounterRef(c, key)). It is
// safe for concurrent use.
type Client struct {
	opts Options
	deps deps

	// live is the current connection, read without a lock on every call
	// and written only under mu. dialing holds a token while a call dials:
	// one dials at a time, and the others wait within their own context.
	live    atomic.Pointer[rpc.Endpoint]
	dialing chan struct{}
	mu      struct {
		sync.Mutex
		closed bool
		next   int // the gateway to try first on the next dial
	}
}

var _ proxy.Caller = (*Client)(nil)

// New returns a client. It does no I/O: Connect does, and so does a call
// on a client that is not connected.
func New(opts Options, optFns ...Option) (*Client, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.Gateways = append([]string(nil), opts.Gateways...)
	c := &Client{opts: opts, dialing: make(chan struct{}, 1)}
	for _, fn := range optFns {
		fn(&c.deps)
	}
	if c.deps.log == nil {
		c.deps.log = slog.Default()
	}
	if c.deps.clock == nil {
		c.deps.clock = clock.Real{}
	}
	c.mu.next = rand.IntN(len(opts.Gateways))
	return c, nil
}

// Options returns the client's settings, defaults filled in.
func (c *Client) Options() Options { return c.opts }

// Connect dials a gateway unless the client is connected already. It tries
// each gateway once, starting with the next in turn, and returns the last
// failure when none answers.
func (c *Client) Connect(ctx context.Context) error {
	_, err := c.endpoint(ctx)
	return err
}

// Gateway returns the address of the gateway the client is connected to,
// or "" when it is not connected.
func (c *Client) Gateway() string {
	if ep := c.open(); ep != nil {
		return ep.Conn().RemoteAddr().String()
	}
	return ""
}

// endpoint returns the live connection, dialling when there is none. One
// call dials at a time; the others wait for it within their own ctx.
func (c *Client) endpoint(ctx context.Context) (*rpc.Endpoint, error) {
	if ep := c.open(); ep != nil {
		return ep, nil
	}
	select {
	case c.dialing <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: client: waiting for a gateway: %w", proxy.ErrUnavailable, ctx.Err())
	}
	defer func() { <-c.dialing }()
	if ep := c.open(); ep != nil { // another call dialled meanwhile
		return ep, nil
	}
	var errs []error
	for range c.opts.Gateways {
		c.mu.Lock()
		if c.mu.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		addr := c.opts.Gateways[c.mu.next]
		c.mu.next = (c.mu.next + 1) % len(c.opts.Gateways)
		c.mu.Unlock()
		ep, err := c.dial(ctx, addr)
		if err == nil {
			c.mu.Lock()
			closed := c.mu.closed
			if !closed {
				c.live.Store(ep)
			}
			c.mu.Unlock()
			if closed { // Close ran while this dialled
				_ = ep.Conn().Close()
				return nil, ErrClosed
			}
			return ep, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("%w: client: no gateway answered: %w", proxy.ErrUnavailable, errors.Join(errs...))
}

// endpointWithin is endpoint for a call: connecting counts against the
// call's response timeout, which is left with what remains. Without that
// bound a call whose gateway accepted the connection but never answered
// the handshake (a silo stalled or on its way out) waited DialTimeout for
// each gateway, however short its own timeout.
func (c *Client) endpointWithin(ctx context.Context, call *proxy.Call) (*rpc.Endpoint, error) {
	if ep := c.open(); ep != nil {
		return ep, nil
	}
	if call.Timeout <= 0 {
		return c.endpoint(ctx)
	}
	start := c.deps.clock.Now()
	dialCtx, cancel := context.WithTimeout(ctx, call.Timeout)
	defer cancel()
	ep, err := c.endpoint(dialCtx)
	if err != nil {
		return nil, err
	}
	left := call.Timeout - c.deps.clock.Now().Sub(start)
	if left <= 0 {
		return nil, fmt.Errorf("%w: %w: client: connecting to a gateway took the call's response timeout (%v)", rpc.ErrNotSent, proxy.ErrUnavailable, call.Timeout)
	}
	call.Timeout = left
	call.Budget = min(call.Budget, left)
	return ep, nil
}

func (c *Client) dial(ctx context.Context, addr string) (*rpc.Endpoint, error) {
	ep := rpc.NewEndpoint(rpc.EndpointOptions{SweepInterval: c.opts.TimeoutResolution}, nil, nil, c.deps.clock, c.deps.log)
	dialCtx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	opts := transport.Options{
		MaxFrameSize: c.opts.MaxFrameSize,
		Identity:     transport.Identity{Role: transport.RoleClient, ClusterID: c.opts.ClusterID},
		TLS:          c.opts.TLS,
	}
	if t := c.opts.Token; t != nil {
		opts.Token = &transport.Token{Name: t.Name, Secret: t.Secret}
	}
	conn, err := transport.Dial(dialCtx, addr, opts, ep, transport.WithLogger(c.deps.log))
	if err != nil {
		return nil, fmt.Errorf("dial gateway %s: %w", addr, err)
	}
	ep.Attach(conn)
	return ep, nil
}

// open returns the live connection unless there is none or it has ended.
func (c *Client) open() *rpc.Endpoint {
	ep := c.live.Load()
	if ep == nil {
		return nil
	}
	select {
	case <-ep.Conn().Done():
		return nil
	default:
		return ep
	}
}

// Call implements proxy.Caller. When the connection turns out to be closed
// before the request could be sent, the client dials again and sends it
// once more: a request that never left cannot have been acted on.
// Connecting, and waiting for another call that connects, count against
// the call's response timeout.
func (c *Client) Call(ctx context.Context, call proxy.Call, in, out proto.Message) error {
	ep, err := c.endpointWithin(ctx, &call)
	if err != nil {
		return err
	}
	err = ep.Call(ctx, call, in, out)
	if err == nil || !errors.Is(err, rpc.ErrNotSent) || !errors.Is(err, proxy.ErrUnavailable) {
		return err
	}
	select {
	case <-ep.Conn().Done(): // closing already; let it finish so endpoint redials
	case <-ctx.Done():
		return err
	}
	if ep, err = c.endpointWithin(ctx, &call); err != nil {
		return err
	}
	return ep.Call(ctx, call, in, out)
}

// ResponseTimeout implements proxy.Caller.
func (c *Client) ResponseTimeout() time.Duration { return c.opts.ResponseTimeout }

// OutgoingFilters lets references built on this client apply its filters.
func (c *Client) OutgoingFilters() []proxy.OutgoingFilter { return c.deps.outgoing }

// Stats are the counters of a client's connection, for tests and metrics.
type Stats struct {
	Pending       int     // calls waiting for their replies
	CancelWatches int64   // calls that watched their context, to send a cancel
	CancelsSent   int64   // cancels sent to the gateway
	Timeouts      int64   // calls failed by their response timeout
	Transport     Traffic // the connection's traffic
}

// Traffic counts what a connection carried.
type Traffic struct {
	FramesQueued       uint64 // frames queued to be sent
	FramesWritten      uint64 // frames handed to the socket
	BatchesWritten     uint64 // socket writes; each carries every frame queued while the previous one ran
	BytesWritten       uint64 // bytes handed to the socket, length prefixes and heartbeats included
	FramesRead         uint64 // frames read
	BytesRead          uint64 // body bytes read
	HeartbeatsSent     uint64 // heartbeats sent to the gateway
	HeartbeatsReceived uint64 // heartbeats the gateway sent
}

// Stats returns the counters of the current connection.
func (c *Client) Stats() Stats {
	ep := c.live.Load()
	if ep == nil {
		return Stats{}
	}
	st := ep.Stats()
	return Stats{
		Pending: st.Pending, CancelWatches: st.CancelWatches, CancelsSent: st.CancelsSent, Timeouts: st.Timeouts,
		// The same counters as the transport's, which a compile error
		// here would say had changed.
		Transport: Traffic(st.Transport),
	}
}

// Close closes the connection; waiting calls fail with
// proxy.ErrUnavailable. Safe to call twice.
func (c *Client) Close() error {
	c.mu.Lock()
	ep := c.live.Swap(nil)
	c.mu.closed = true
	c.mu.Unlock()
	if ep == nil {
		return nil
	}
	err := ep.Conn().Close()
	<-ep.Conn().Done()
	return err
}
