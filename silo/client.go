package silo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/proxy"
)

// ErrClientClosed is returned by calls on a closed client.
var ErrClientClosed = errors.New("silo: client closed")

// DefaultDialTimeout bounds connecting to a gateway.
const DefaultDialTimeout = 5 * time.Second

// ClientOptions are a client's data settings.
type ClientOptions struct {
	// Gateway is the host:port of a gateway silo, with a numeric port.
	// Required.
	Gateway string
	// ResponseTimeout is the default response timeout of calls. Bounded
	// methods get 80% of it as their budget. Default 30 s.
	ResponseTimeout time.Duration
	// DialTimeout bounds each connection attempt. Default 5 s.
	DialTimeout time.Duration
	// MaxFrameSize bounds one message on the wire. Default 4 MiB.
	MaxFrameSize int
	// TimeoutResolution is how often pending calls are checked against
	// their response timeouts. Default 10 ms.
	TimeoutResolution time.Duration
}

// EnsureDefaults fills zero fields with their defaults.
func (o *ClientOptions) EnsureDefaults() {
	if o.ResponseTimeout == 0 {
		o.ResponseTimeout = DefaultResponseTimeout
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.MaxFrameSize == 0 {
		o.MaxFrameSize = DefaultMaxFrameSize
	}
	if o.TimeoutResolution == 0 {
		o.TimeoutResolution = rpc.DefaultSweepInterval
	}
}

// Validate reports every invalid field.
func (o *ClientOptions) Validate() error {
	c := fieldChecks{prefix: "silo: client "}
	c.address("Gateway", o.Gateway, 1)
	c.positive("ResponseTimeout", o.ResponseTimeout)
	c.positive("DialTimeout", o.DialTimeout)
	c.frameSize("MaxFrameSize", o.MaxFrameSize)
	c.positive("TimeoutResolution", o.TimeoutResolution)
	return c.err()
}

// Client reaches grains through a gateway silo over one connection. It
// never listens: replies and cancels travel on the connection it dialled.
// It implements proxy.Caller, like the silo's own caller, so generated
// references work the same on both. It is safe for concurrent use.
type Client struct {
	opts ClientOptions
	deps deps

	// live is the current connection, read without a lock on every call
	// and written only under mu, which serialises dialling and closing.
	live atomic.Pointer[rpc.Endpoint]
	mu   struct {
		sync.Mutex
		closed bool
	}
}

var _ proxy.Caller = (*Client)(nil)

// NewClient returns a client. It does no I/O: Connect does, and a call
// connects too when the client is not connected. Of the Options, only
// WithLogger, WithClock and WithOutgoingFilters apply to clients.
func NewClient(opts ClientOptions, optFns ...Option) (*Client, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c := &Client{opts: opts}
	for _, fn := range optFns {
		fn(&c.deps)
	}
	if c.deps.log == nil {
		c.deps.log = slog.Default()
	}
	if c.deps.clock == nil {
		c.deps.clock = clock.Real{}
	}
	return c, nil
}

// Connect dials the gateway unless the client is connected already.
func (c *Client) Connect(ctx context.Context) error {
	_, err := c.endpoint(ctx)
	return err
}

// endpoint returns the live connection, dialling when there is none.
func (c *Client) endpoint(ctx context.Context) (*rpc.Endpoint, error) {
	if ep := c.open(); ep != nil {
		return ep, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, ErrClientClosed
	}
	if ep := c.open(); ep != nil { // another call dialled meanwhile
		return ep, nil
	}
	ep := rpc.NewEndpoint(rpc.EndpointOptions{SweepInterval: c.opts.TimeoutResolution}, nil, nil, c.deps.clock, c.deps.log)
	dialCtx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	conn, err := transport.Dial(dialCtx, c.opts.Gateway, transport.Options{MaxFrameSize: c.opts.MaxFrameSize}, ep)
	if err != nil {
		return nil, fmt.Errorf("%w: dial gateway %s: %w", proxy.ErrUnavailable, c.opts.Gateway, err)
	}
	ep.Attach(conn)
	c.live.Store(ep)
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
func (c *Client) Call(ctx context.Context, call proxy.Call, in, out proto.Message) error {
	ep, err := c.endpoint(ctx)
	if err != nil {
		return err
	}
	err = ep.Call(ctx, call, in, out)
	if err == nil || !errors.Is(err, rpc.ErrNotSent) || !errors.Is(err, proxy.ErrUnavailable) {
		return err
	}
	<-ep.Conn().Done() // closing already; let it finish so endpoint redials
	if ep, err = c.endpoint(ctx); err != nil {
		return err
	}
	return ep.Call(ctx, call, in, out)
}

// ResponseTimeout implements proxy.Caller.
func (c *Client) ResponseTimeout() time.Duration { return c.opts.ResponseTimeout }

// OutgoingFilters lets references built on this client apply its filters.
func (c *Client) OutgoingFilters() []proxy.OutgoingFilter { return c.deps.outgoing }

// Stats returns the counters of the current connection.
func (c *Client) Stats() rpc.EndpointStats {
	ep := c.live.Load()
	if ep == nil {
		return rpc.EndpointStats{}
	}
	return ep.Stats()
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
