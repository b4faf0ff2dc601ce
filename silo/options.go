package silo

import (
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/optcheck"
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
	// Limits bound what clients may ask of the silo.
	Limits Limits
}

// Limits bound what clients may ask of a silo, so that no client can
// starve the others. A request over a limit is answered at once with
// proxy.ErrOverloaded, which a caller may retry later; nothing else
// changes. Zero fields take their defaults.
type Limits struct {
	// MaxInFlight bounds the requests of one client connection that the
	// silo works on at once. Default 4096.
	MaxInFlight int
	// ActivationRate and ActivationBurst budget the new activations one
	// client connection's requests may create: ActivationBurst at once,
	// refilled at ActivationRate per second. Calls to grains already
	// active are not affected. Defaults 10 000 and 10 000; a negative
	// ActivationRate sets no budget.
	ActivationRate, ActivationBurst int
	// MaxActivations, when positive, bounds the activations alive on the
	// silo. Default 0: no bound.
	MaxActivations int
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
		o.CollectionAge = host.DefaultCollectionAge
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
	c := optcheck.Checks{Prefix: "silo: "}
	if !o.DisableGateway {
		c.Address("GatewayAddress", o.GatewayAddress, 0)
	}
	c.Positive("ResponseTimeout", o.ResponseTimeout)
	c.Positive("CollectionAge", o.CollectionAge)
	c.NonNegative("CollectionQuantum", o.CollectionQuantum)
	c.Positive("FlushPeriod", o.FlushPeriod)
	c.Range("MaxFrameSize", o.MaxFrameSize, minFrameSize, transport.MaxFrameSizeLimit)
	c.Positive("TimeoutResolution", o.TimeoutResolution)
	c.Range("Limits.MaxInFlight", o.Limits.MaxInFlight, 0, 1<<30)
	c.Range("Limits.ActivationBurst", o.Limits.ActivationBurst, 0, 1<<30)
	c.Range("Limits.MaxActivations", o.Limits.MaxActivations, 0, 1<<30)
	return c.Err()
}

// minFrameSize leaves room for an envelope with a small payload.
const minFrameSize = 64

// clientEndpoint is how the silo's end of a client connection is set up.
func (o *Options) clientEndpoint() rpc.EndpointOptions {
	return rpc.EndpointOptions{
		SweepInterval: o.TimeoutResolution, MaxInFlight: o.Limits.MaxInFlight,
		ActivationRate: o.Limits.ActivationRate, ActivationBurst: o.Limits.ActivationBurst,
	}
}

// linkEndpoint is how the silo's end of a link to another silo is set up:
// it carries the calls of many clients, which their own gateways budget.
func (o *Options) linkEndpoint() rpc.EndpointOptions {
	return rpc.EndpointOptions{SweepInterval: o.TimeoutResolution, MaxInFlight: linkMaxInFlight, ActivationRate: -1}
}

// linkMaxInFlight bounds the requests in flight on a link between silos.
const linkMaxInFlight = 1 << 16

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
