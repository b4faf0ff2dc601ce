package silo

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/proxy"
)

// Defaults of Options.
const (
	DefaultGatewayAddress  = "127.0.0.1:30000"
	DefaultResponseTimeout = proxy.DefaultResponseTimeout
	DefaultFlushPeriod     = persistence.DefaultPeriod
	DefaultMaxFrameSize    = transport.DefaultMaxFrameSize
)

// Options are a silo's data settings. The zero value, after EnsureDefaults,
// is a working single silo with a loopback gateway and the memory store.
type Options struct {
	// Name identifies the silo in logs and, later, in the cluster.
	// Default "<hostname>-<pid>".
	Name string
	// GatewayAddress is where the gateway listens for clients, host:port
	// with a numeric port. Port 0 picks a free port (see Silo.GatewayAddr). Default
	// 127.0.0.1:30000: loopback only unless you say otherwise.
	GatewayAddress string
	// DisableGateway runs the silo without accepting clients.
	DisableGateway bool
	// ResponseTimeout is the default response timeout of calls made from
	// this silo (its grains and its hosted caller). Bounded methods get
	// 80% of it as their budget. Default 30 s.
	ResponseTimeout time.Duration
	// CollectionAge is how long an idle activation lives. Default 15 min.
	CollectionAge time.Duration
	// CollectionQuantum is how often idle activations are looked for.
	// Default 1 min (or CollectionAge/2 when shorter).
	CollectionQuantum time.Duration
	// FlushPeriod is how often dirty grain state is written. Default 50 ms.
	FlushPeriod time.Duration
	// MaxFrameSize bounds one message on the wire, in bytes; a peer that
	// sends a larger one is disconnected. Default 4 MiB.
	MaxFrameSize int
	// TimeoutResolution is how often pending calls are checked against
	// their response timeouts. Default 10 ms.
	TimeoutResolution time.Duration
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Name == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "silo"
		}
		o.Name = host + "-" + strconv.Itoa(os.Getpid())
	}
	if o.GatewayAddress == "" {
		o.GatewayAddress = DefaultGatewayAddress
	}
	if o.ResponseTimeout == 0 {
		o.ResponseTimeout = DefaultResponseTimeout
	}
	if o.CollectionAge == 0 {
		o.CollectionAge = actor.DefaultCollectionAge
	}
	if o.FlushPeriod == 0 {
		o.FlushPeriod = DefaultFlushPeriod
	}
	if o.MaxFrameSize == 0 {
		o.MaxFrameSize = DefaultMaxFrameSize
	}
	if o.TimeoutResolution == 0 {
		o.TimeoutResolution = rpc.DefaultSweepInterval
	}
}

// Validate reports every invalid field.
func (o *Options) Validate() error {
	c := fieldChecks{prefix: "silo: "}
	if !o.DisableGateway {
		c.address("GatewayAddress", o.GatewayAddress, 0)
	}
	c.positive("ResponseTimeout", o.ResponseTimeout)
	c.positive("CollectionAge", o.CollectionAge)
	c.nonNegative("CollectionQuantum", o.CollectionQuantum)
	c.positive("FlushPeriod", o.FlushPeriod)
	c.frameSize("MaxFrameSize", o.MaxFrameSize)
	c.positive("TimeoutResolution", o.TimeoutResolution)
	return c.err()
}

// fieldChecks collects every invalid field of an options struct, so that
// Validate reports them all at once.
type fieldChecks struct {
	prefix string
	errs   []error
}

func (c *fieldChecks) positive(name string, d time.Duration) {
	if d <= 0 {
		c.errs = append(c.errs, fmt.Errorf("%s%s must be positive, got %v", c.prefix, name, d))
	}
}

func (c *fieldChecks) nonNegative(name string, d time.Duration) {
	if d < 0 {
		c.errs = append(c.errs, fmt.Errorf("%s%s must not be negative, got %v", c.prefix, name, d))
	}
}

// address checks a host:port with a numeric port no lower than minPort:
// 0 for an address to listen on (any free port), 1 for one to dial.
func (c *fieldChecks) address(name, addr string, minPort int) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("%s%s %q: %w", c.prefix, name, addr, err))
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < minPort || n > 65535 {
		c.errs = append(c.errs, fmt.Errorf("%s%s %q: the port must be a number from %d to 65535", c.prefix, name, addr, minPort))
	}
}

// minFrameSize leaves room for an envelope with a small payload.
const minFrameSize = 64

func (c *fieldChecks) frameSize(name string, n int) {
	if n < minFrameSize || n > transport.MaxFrameSizeLimit {
		c.errs = append(c.errs, fmt.Errorf("%s%s must be between %d and %d bytes, got %d", c.prefix, name, minFrameSize, transport.MaxFrameSizeLimit, n))
	}
}

func (c *fieldChecks) err() error { return errors.Join(c.errs...) }

func (o *Options) transport() transport.Options {
	return transport.Options{MaxFrameSize: o.MaxFrameSize} // Listen fills in the other defaults
}

// Option injects behaviour into a Silo.
type Option func(*deps)

type deps struct {
	log      *slog.Logger
	clock    clock.Clock
	store    persistence.Store
	incoming []proxy.IncomingFilter
	outgoing []proxy.OutgoingFilter
	locator  rpc.Locator // where grains live; nil: all here
}

// WithLogger sets the silo's logger; its actor system logs through it too.
func WithLogger(l *slog.Logger) Option { return func(d *deps) { d.log = l } }

// WithClock sets the clock used for idle collection, timers, flushing and
// response timeouts. Tests pass a fake clock.
func WithClock(c clock.Clock) Option { return func(d *deps) { d.clock = c } }

// WithStore sets where grain state is stored. Default: a memory store.
func WithStore(s persistence.Store) Option { return func(d *deps) { d.store = s } }

// WithIncomingFilters adds filters that run around every grain method
// invoked on this silo, in order.
func WithIncomingFilters(f ...proxy.IncomingFilter) Option {
	return func(d *deps) { d.incoming = append(d.incoming, f...) }
}

// WithOutgoingFilters adds filters that run around every call made through
// this silo's caller, in order.
func WithOutgoingFilters(f ...proxy.OutgoingFilter) Option {
	return func(d *deps) { d.outgoing = append(d.outgoing, f...) }
}
