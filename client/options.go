package client

import (
	"crypto/tls"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/optcheck"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/proxy"
)

// Defaults of Options.
const (
	DefaultResponseTimeout = proxy.DefaultResponseTimeout
	DefaultDialTimeout     = 5 * time.Second
	DefaultMaxFrameSize    = transport.DefaultMaxFrameSize
)

// minFrameSize leaves room for an envelope with a small payload.
const minFrameSize = 64

// Options are a client's data settings.
type Options struct {
	// Gateways lists the host:port addresses of gateway silos, with
	// numeric ports. Required: at least one. The client connects to one
	// of them, chosen at random so that clients spread over the gateways,
	// and to the next when that one cannot be reached.
	Gateways []string
	// ResponseTimeout is the default response timeout of calls. Bounded
	// methods get 80% of it as their budget. Default 30 s.
	ResponseTimeout time.Duration
	// DialTimeout bounds each connection attempt. Default 5 s. A call
	// that has to connect first is bounded by its response timeout too.
	DialTimeout time.Duration
	// MaxFrameSize bounds one message on the wire, in bytes. Default 4 MiB.
	MaxFrameSize int
	// TimeoutResolution is how often pending calls are checked against
	// their response timeouts. Default 10 ms.
	TimeoutResolution time.Duration
	// ClusterID names the cluster the client means to reach; a gateway of
	// another cluster refuses it. Default "granary", the silos' default.
	ClusterID string
	// Token, when set, is the client's credential, which the gateway asks
	// for when it lists client tokens (silo.Security.ClientTokens): the
	// client proves it in the handshake, and its calls carry the token's
	// rights. A client never holds the cluster secret, the silos' own
	// credential.
	Token *Token
	// TLS, when set, runs connections over TLS with this client
	// configuration (with Certificates, for gateways that ask for mutual
	// TLS). A certificate the gateway verifies is a client credential:
	// grains see the client named after it (actor.IdentityOf), with the
	// rights silo.Security.ClientCertificates grants the name.
	TLS *tls.Config
}

// Token is a client token: a name and a secret that the gateway knows
// under that name.
type Token struct {
	// Name identifies the token. 1 to 128 bytes of UTF-8.
	Name string
	// Secret is what the client proves: 16 to 1024 bytes.
	Secret []byte
}

// DefaultClusterID is the cluster id of a client that names none.
const DefaultClusterID = "granary"

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
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
	if o.ClusterID == "" {
		o.ClusterID = DefaultClusterID
	}
}

// Validate reports every invalid field.
func (o *Options) Validate() error {
	c := optcheck.Checks{Prefix: "client: "}
	if len(o.Gateways) == 0 {
		c.Bad("Gateways", "must list at least one gateway address")
	}
	for _, g := range o.Gateways {
		c.Address("Gateways", g, 1)
	}
	c.Positive("ResponseTimeout", o.ResponseTimeout)
	c.Positive("DialTimeout", o.DialTimeout)
	c.Range("MaxFrameSize", o.MaxFrameSize, minFrameSize, transport.MaxFrameSizeLimit)
	c.Positive("TimeoutResolution", o.TimeoutResolution)
	if t := o.Token; t != nil {
		if t.Name == "" || len(t.Name) > transport.MaxIDLength || !utf8.ValidString(t.Name) {
			c.Bad("Token.Name", "must be UTF-8 of 1 to %d bytes", transport.MaxIDLength)
		}
		if n := len(t.Secret); n < transport.MinSecretLength || n > transport.MaxSecretLength {
			c.Bad("Token.Secret", "must be %d to %d bytes, got %d", transport.MinSecretLength, transport.MaxSecretLength, n)
		}
	}
	return c.Err()
}

// Option injects behaviour into a Client.
type Option func(*deps)

type deps struct {
	log      *slog.Logger
	clock    clock.Clock
	outgoing []proxy.OutgoingFilter
}

// WithLogger sets the client's logger.
func WithLogger(l *slog.Logger) Option { return func(d *deps) { d.log = l } }

// WithClock sets the clock used for response timeouts. Tests pass a fake
// clock.
func WithClock(c clock.Clock) Option { return func(d *deps) { d.clock = c } }

// WithOutgoingFilters adds filters that run around every call made through
// the client, in order.
func WithOutgoingFilters(f ...proxy.OutgoingFilter) Option {
	return func(d *deps) { d.outgoing = append(d.outgoing, f...) }
}
