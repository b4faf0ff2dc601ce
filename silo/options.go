package silo

import (
	"crypto/tls"
	"log/slog"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/directory"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/optcheck"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/placement"
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
	// CollectionAges overrides CollectionAge for the grain types it names
	// (as registered: the contract's service name, such as
	// "granary.ratelimit.TokenBucketLimiter"). A grain whose state is at
	// rest (actor.Context.CollectSoon) goes sooner whatever its age.
	CollectionAges map[string]time.Duration
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
	// Security says who may connect: the cluster's name and secret, and
	// TLS.
	Security Security
	// Cluster makes the silo a member of a cluster when Cluster.Enabled is
	// set; otherwise the silo stands alone.
	Cluster ClusterOptions
}

// Security says who may connect to a silo. Every connection, a client's or
// another silo's, starts with a handshake that checks the cluster id and
// the peer's credential, proved by an HMAC over the handshake and never
// sent. Silos and clients hold different kinds of credential: silos the
// cluster secret (or a silo certificate), clients tokens of their own (or a
// client certificate), which never let them act as a silo. The gateway
// admits clients only and the listener for other silos silos only.
// docs/security.md has the details.
type Security struct {
	// ClusterID names the cluster; a peer that names another is refused.
	// Default "granary".
	ClusterID string
	// Secret, when set, is the silos' credential: every silo that links to
	// this one proves it, and it encrypts the cluster's gossip. Clients
	// never prove it (give them ClientTokens). At least 16 bytes; 32 random
	// bytes are a good choice. A silo of a cluster needs it unless LinkTLS
	// asks the other silos for certificates.
	Secret []byte
	// ClientTokens, when set, are the credentials of the clients: the
	// gateway then admits only a client that proves one of them (or shows
	// a TLS client certificate that TLS verified), and the token's Rights
	// go with every call the client makes. Empty (the default) admits every
	// client, with no rights.
	ClientTokens []ClientToken
	// ClientCertificates grant rights to clients that show, over mutual
	// TLS (TLS with ClientAuth VerifyClientCertIfGiven or
	// RequireAndVerifyClientCert), a certificate TLS verified whose name
	// is listed. A verified certificate not listed is a client with no
	// rights; its name still reaches grains (actor.IdentityOf).
	ClientCertificates []ClientCertificate
	// TLS, when set, is the server configuration of the gateway and, unless
	// LinkTLS is set, of the listener for other silos; for mutual TLS, set
	// ClientAuth and ClientCAs.
	TLS *tls.Config
	// LinkTLS, when set, is the server configuration of the listener for
	// other silos instead of TLS: mutual TLS between silos while clients
	// need no certificate, say, or a CA of the silos' own.
	LinkTLS *tls.Config
	// DialTLS, when set, is the client configuration this silo dials other
	// silos with (for mutual TLS between silos, with Certificates). A silo
	// of a cluster whose link listener uses TLS (LinkTLS, or else TLS)
	// sets DialTLS, and one whose link listener does not leaves it unset.
	DialTLS *tls.Config
}

// ClientToken is a client's credential: the client proves Secret in the
// handshake under Name (client.Options.Token), and its calls carry Rights.
type ClientToken struct {
	// Name identifies the token, in logs and to grains. 1 to 128 bytes of
	// UTF-8, unique among the tokens.
	Name string
	// Secret is what the client proves: 16 to 1024 bytes; 32 random bytes
	// are a good choice.
	Secret []byte
	// Rights are what the client may do beyond calling grains; see
	// actor.Rights. None by default.
	Rights actor.Rights
}

// ClientCertificate grants rights to a client that shows a TLS
// certificate of this name (see Security.ClientCertificates).
type ClientCertificate struct {
	// Name is the certificate's name: its subject common name or, when it
	// has none, its first DNS name. Unique among the entries.
	Name string
	// Rights are what the client may do beyond calling grains.
	Rights actor.Rights
}

// clientToken looks up a token's secret for the gateway's handshake.
func (s *Security) clientToken(name string) ([]byte, bool) {
	for i := range s.ClientTokens {
		if t := &s.ClientTokens[i]; t.Name == name {
			return t.Secret, true
		}
	}
	return nil, false
}

// linkServerTLS is the server configuration of the listener for other
// silos.
func (s *Security) linkServerTLS() *tls.Config {
	if s.LinkTLS != nil {
		return s.LinkTLS
	}
	return s.TLS
}

// ClusterOptions make a silo a member of a cluster: it finds the others
// through gossip (hashicorp/memberlist), links to each of them, takes its
// part of the grain directory, and places new activations.
type ClusterOptions struct {
	// Enabled makes the silo join a cluster.
	Enabled bool
	// SiloAddress is where the silo listens for links from other silos,
	// host:port; port 0 picks a free port. Default 127.0.0.1:0.
	SiloAddress string
	// AdvertiseAddress is the address other silos dial for SiloAddress,
	// when it differs from the address bound (binding 0.0.0.0, NAT).
	AdvertiseAddress string
	// GossipAddress is where memberlist listens, IP:port; port 0 picks a
	// free port. Default 127.0.0.1:0.
	GossipAddress string
	// AdvertiseGossipAddress is the address other silos gossip to, when it
	// differs from GossipAddress.
	AdvertiseGossipAddress string
	// Seeds are gossip addresses of silos to join; give every silo every
	// seed, itself included. A silo with no seed (or only itself) starts a
	// new cluster; one that names another waits in Start until one answers
	// (see cluster.Options.Seeds).
	Seeds []string
	// Bootstrap lets a silo that names other seeds form a new cluster when
	// none answers at once: for rebuilding a cluster whose other silos are
	// gone for good. Dangerous on a restart: see cluster.Options.Bootstrap.
	Bootstrap bool
	// Timings tune failure detection and gossip; zero fields take
	// cluster.LANTimings, and cluster.FastTimings is a profile for tests
	// on one machine.
	Timings cluster.Timings
	// Placement chooses where a new activation of a grain type goes;
	// placement.Random for types it does not name.
	Placement map[string]placement.Strategy
	// DirectoryTimeout bounds a request to another silo's part of the
	// directory, retries included; asking a silo what it hosts, or to
	// deactivate a duplicate, goes on in rounds of this bound until the
	// silo answers or leaves. Default 5 s.
	DirectoryTimeout time.Duration
	// HandoffWait is how long a silo that gains part of the directory from
	// a silo that is still alive waits for its entries before rebuilding
	// them. Default 3 s.
	HandoffWait time.Duration
	// DeathGrace is how long after a silo leaves the view its grains wait
	// before they are placed again: a silo declared dead while alive (too
	// starved to refute a suspicion in time) serves what it runs until it
	// hears the verdict, and one that refutes it within the grace keeps
	// its grains, with no second activation beside them. It delays by as
	// much the recovery of a crashed silo's grains; a silo that was
	// shutting down, or is seen restarted, has none. Default
	// SuspicionMult probe intervals of Timings (4 s with the LAN timings,
	// 200 ms with the fast ones); negative: none.
	DeathGrace time.Duration
	// KeepaliveInterval and KeepaliveTimeout watch links between silos: a
	// heartbeat after KeepaliveInterval without traffic, and a link that
	// heard nothing for KeepaliveTimeout is closed. Defaults 1 s and 10 s.
	KeepaliveInterval, KeepaliveTimeout time.Duration
	// Fence is the minority fence, on by default: a silo that cannot reach
	// a majority of the last stable membership stops serving until it can.
	Fence FenceOptions
}

// Defaults of ClusterOptions and Security.
const (
	DefaultClusterID         = "granary"
	DefaultSiloAddress       = "127.0.0.1:0"
	DefaultGossipAddress     = "127.0.0.1:0"
	DefaultKeepaliveInterval = time.Second
	DefaultKeepaliveTimeout  = 10 * time.Second
)

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
	// SharedInFlight is the requests in flight that the clients busy at
	// the same time share. A client is the connections of one credential
	// (a client token's name, or a certificate's), or one connection that
	// proved none. While several clients are busy (each sent a request in
	// the last 100-200 ms), each may have SharedInFlight divided by their
	// number, all its connections together (never fewer than 16; each
	// connection never more than MaxInFlight), and one more is refused
	// with proxy.ErrOverloaded. A client busy alone is bound by each
	// connection's MaxInFlight only. Default 4096.
	SharedInFlight int
	// SharedActivations is the new activations under way (created, their
	// first call not yet answered) that busy clients share, in the same
	// way, at least one each: a new activation costs the silo many calls'
	// work, done ahead of every client's next call, and a few under way
	// keep its cores busy. A client busy alone is not bound by it.
	// Default 8; negative: no share.
	SharedActivations int
	// MaxActivations, when positive, bounds the activations alive on the
	// silo. Default 0: no bound.
	MaxActivations int
	// MaxKeyLength bounds the grain key a client's request may name, in
	// bytes: a longer one is answered with proxy.ErrBadRequest ("grain key
	// of N bytes, longer than the M this silo takes") and creates nothing.
	// Default 4 KiB; negative: no bound.
	MaxKeyLength int
	// MaxConnections bounds the gateway's client connections; one more is
	// closed before its handshake. Default 10 000.
	MaxConnections int
	// MaxConnectionsPerSource bounds the gateway's client connections from
	// one source address (an IP, whatever the port), so that one host
	// cannot take every slot; one more is closed before its handshake.
	// Default 1024, beyond any client pool; negative: no bound.
	MaxConnectionsPerSource int
	// IdleTimeout closes a client connection that had no call in flight
	// and no call or reply either way for this long (cancels and
	// heartbeats do not count); the client dials again on its
	// next call. Default 5 min; negative keeps idle connections.
	IdleTimeout time.Duration
	// HandshakeTimeout bounds the handshake of every connection of the
	// silo, TLS included, clients' and other silos'; a connection that has
	// not finished it in time is closed. Default 5 s.
	HandshakeTimeout time.Duration
	// MinReadRate closes a connection that sends a frame it has started
	// slower than this many bytes per second, measured over
	// ReadRateWindow (time between frames does not count). Default
	// 1 KiB/s; negative turns the rule off.
	MinReadRate int
	// ReadRateWindow is the window over which MinReadRate is measured.
	// Default 10 s.
	ReadRateWindow time.Duration
}

// DefaultIdleTimeout is how long a client connection may sit idle.
const DefaultIdleTimeout = 5 * time.Minute

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
	if o.Limits.IdleTimeout == 0 {
		o.Limits.IdleTimeout = DefaultIdleTimeout
	}
	if o.Limits.HandshakeTimeout == 0 {
		o.Limits.HandshakeTimeout = transport.DefaultHandshakeTimeout
	}
	if o.Limits.MinReadRate == 0 {
		o.Limits.MinReadRate = transport.DefaultMinReadRate
	}
	if o.Limits.ReadRateWindow == 0 {
		o.Limits.ReadRateWindow = transport.DefaultReadRateWindow
	}
	if o.Security.ClusterID == "" {
		o.Security.ClusterID = DefaultClusterID
	}
	c := &o.Cluster
	if c.SiloAddress == "" {
		c.SiloAddress = DefaultSiloAddress
	}
	if c.GossipAddress == "" {
		c.GossipAddress = DefaultGossipAddress
	}
	if c.DirectoryTimeout == 0 {
		c.DirectoryTimeout = directory.DefaultCallTimeout
	}
	if c.HandoffWait == 0 {
		c.HandoffWait = directory.DefaultHandoffWait
	}
	if c.DeathGrace == 0 {
		t := timingsOrDefaults(c.Timings)
		c.DeathGrace = time.Duration(t.SuspicionMult) * t.ProbeInterval
	}
	if c.KeepaliveInterval == 0 {
		c.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if c.KeepaliveTimeout == 0 {
		c.KeepaliveTimeout = DefaultKeepaliveTimeout
	}
	c.Fence.ensureDefaults(c.Timings, c.DeathGrace)
}

// timingsOrDefaults returns t with its zero fields filled as the
// membership fills them.
func timingsOrDefaults(t cluster.Timings) cluster.Timings {
	co := cluster.Options{Timings: t}
	co.EnsureDefaults()
	return co.Timings
}

// Validate reports every invalid field.
func (o *Options) Validate() error {
	c := optcheck.Checks{Prefix: "silo: "}
	if !o.DisableGateway {
		c.Address("GatewayAddress", o.GatewayAddress, 0)
	}
	c.Positive("ResponseTimeout", o.ResponseTimeout)
	c.Positive("CollectionAge", o.CollectionAge)
	for grainType, age := range o.CollectionAges {
		c.Positive("CollectionAges["+grainType+"]", age)
	}
	c.NonNegative("CollectionQuantum", o.CollectionQuantum)
	c.Positive("FlushPeriod", o.FlushPeriod)
	c.Range("MaxFrameSize", o.MaxFrameSize, minFrameSize, transport.MaxFrameSizeLimit)
	c.Positive("TimeoutResolution", o.TimeoutResolution)
	c.Range("Limits.MaxInFlight", o.Limits.MaxInFlight, 0, 1<<30)
	c.Range("Limits.ActivationBurst", o.Limits.ActivationBurst, 0, 1<<30)
	c.Range("Limits.MaxActivations", o.Limits.MaxActivations, 0, 1<<30)
	c.Range("Limits.SharedInFlight", o.Limits.SharedInFlight, 0, 1<<30)
	c.Range("Limits.SharedActivations", o.Limits.SharedActivations, -1, 1<<30)
	c.Range("Limits.MaxConnections", o.Limits.MaxConnections, 0, 1<<30)
	c.Positive("Limits.HandshakeTimeout", o.Limits.HandshakeTimeout)
	c.Positive("Limits.ReadRateWindow", o.Limits.ReadRateWindow)
	if n := len(o.Security.Secret); n > 0 && n < transport.MinSecretLength {
		c.Bad("Security.Secret", "must be at least %d bytes, got %d", transport.MinSecretLength, n)
	}
	if o.Cluster.Enabled {
		c.Address("Cluster.SiloAddress", o.Cluster.SiloAddress, 0)
		if o.Cluster.AdvertiseAddress != "" {
			c.Address("Cluster.AdvertiseAddress", o.Cluster.AdvertiseAddress, 1)
		}
		c.Address("Cluster.GossipAddress", o.Cluster.GossipAddress, 0)
		for _, seed := range o.Cluster.Seeds {
			c.Address("Cluster.Seeds", seed, 1)
		}
		c.Positive("Cluster.DirectoryTimeout", o.Cluster.DirectoryTimeout)
		c.Positive("Cluster.HandoffWait", o.Cluster.HandoffWait)
		c.Positive("Cluster.KeepaliveInterval", o.Cluster.KeepaliveInterval)
		c.Positive("Cluster.KeepaliveTimeout", o.Cluster.KeepaliveTimeout)
		if !o.Cluster.Fence.Disabled {
			c.Range("Cluster.Fence.MinSilos", o.Cluster.Fence.MinSilos, 1, 1<<20)
			c.Positive("Cluster.Fence.Stability", o.Cluster.Fence.Stability)
		}
		if !o.Cluster.Fence.Death.Disabled {
			c.Positive("Cluster.Fence.Death.Hold", o.Cluster.Fence.Death.Hold)
		}
		// Every silo's link listener takes Security.LinkTLS (or TLS) and
		// every silo dials links with DialTLS: one without the other
		// cannot link.
		if (o.Security.linkServerTLS() == nil) != (o.Security.DialTLS == nil) {
			c.Bad("Security.DialTLS", "and Security.LinkTLS (or TLS) must be set together in a cluster: links are dialled with DialTLS to listeners that use TLS")
		}
		o.Security.validateSiloCredential(&c)
	} else if o.Security.LinkTLS != nil {
		c.Bad("Security.LinkTLS", "is for the listener for other silos, which only a silo of a cluster has")
	}
	o.Security.validateClientTokens(&c)
	o.Security.validateClientCertificates(&c)
	for _, server := range []struct {
		name string
		tls  *tls.Config
	}{{"Security.TLS", o.Security.TLS}, {"Security.LinkTLS", o.Security.LinkTLS}} {
		if t := server.tls; t != nil && len(t.Certificates) == 0 && t.GetCertificate == nil && t.GetConfigForClient == nil {
			c.Bad(server.name, "has no certificate (Certificates, GetCertificate or GetConfigForClient)")
		}
	}
	return c.Err()
}

// minFrameSize leaves room for an envelope with a small payload.
const minFrameSize = 64

// clientEndpoint is how the silo's end of a client connection is set up.
// rejected counts and logs, for every connection of the silo, what it
// refuses.
func (o *Options) clientEndpoint(rejected *rpc.Rejections) rpc.EndpointOptions {
	return rpc.EndpointOptions{
		SweepInterval: o.TimeoutResolution, MaxInFlight: o.Limits.MaxInFlight,
		ActivationRate: o.Limits.ActivationRate, ActivationBurst: o.Limits.ActivationBurst,
		MaxKeyLength: o.Limits.MaxKeyLength, Rejections: rejected,
	}
}

// shares are how the silo's client connections share it.
func (o *Options) shares() rpc.ShareOptions {
	return rpc.ShareOptions{InFlight: o.Limits.SharedInFlight, Activations: o.Limits.SharedActivations}
}

// linkEndpoint is how the silo's end of a link to another silo is set up:
// it carries the calls of many clients, which their own gateways budget.
func (o *Options) linkEndpoint(rejected *rpc.Rejections) rpc.EndpointOptions {
	return rpc.EndpointOptions{
		SweepInterval: o.TimeoutResolution, MaxInFlight: linkMaxInFlight, ActivationRate: -1,
		Rejections: rejected,
	}
}

// linkMaxInFlight bounds the requests in flight on a link between silos.
const linkMaxInFlight = 1 << 16

// gatewayTransport is how the gateway's connections are set up: clients
// only, idle ones closed.
func (o *Options) gatewayTransport(gen int64) transport.Options {
	t := o.transport()
	t.ClusterSecret = nil // the silos' credential: a client never proves it
	if len(o.Security.ClientTokens) > 0 {
		t.Listener.ClientTokens = o.Security.clientToken
		t.Listener.RequireClientCredential = true
	}
	t.Identity = transport.Identity{Role: transport.RoleSilo, SiloID: o.Name, Generation: gen, ClusterID: o.Security.ClusterID}
	t.Listener.AcceptRoles = []transport.Role{transport.RoleClient}
	t.Listener.MaxConnections = o.Limits.MaxConnections
	t.Listener.MaxConnectionsPerSource = o.Limits.MaxConnectionsPerSource
	if o.Limits.IdleTimeout > 0 {
		t.Listener.IdleTimeout = o.Limits.IdleTimeout
	}
	t.TLS = o.Security.TLS
	return t
}

// linkTransport is how links between silos are set up, dialled (dial
// true) or accepted.
func (o *Options) linkTransport(gen int64, dial bool) transport.Options {
	t := o.transport()
	t.Identity = transport.Identity{Role: transport.RoleSilo, SiloID: o.Name, Generation: gen, ClusterID: o.Security.ClusterID}
	t.Listener.AcceptRoles = []transport.Role{transport.RoleSilo}
	t.KeepaliveInterval, t.KeepaliveTimeout = o.Cluster.KeepaliveInterval, o.Cluster.KeepaliveTimeout
	t.TLS = o.Security.linkServerTLS()
	if dial {
		t.TLS = o.Security.DialTLS
	}
	return t
}

func (o *Options) transport() transport.Options {
	return transport.Options{ // Listen and Dial fill in the other defaults
		MaxFrameSize: o.MaxFrameSize, ClusterSecret: o.Security.Secret,
		HandshakeTimeout: o.Limits.HandshakeTimeout, MinReadRate: o.Limits.MinReadRate, ReadRateWindow: o.Limits.ReadRateWindow,
	}
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
	meters   metric.MeterProvider
	// reachability replaces what the fence watches, for tests.
	reachability func(self string, membership reachabilitySource) reachabilitySource
	// shareClock replaces the clock of the connections' shares, for tests.
	shareClock clock.Clock
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
