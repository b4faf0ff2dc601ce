package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/granary-go/granary/clock"
)

// Defaults applied by Options.EnsureDefaults.
const (
	DefaultMaxFrameSize     = 4 << 20
	DefaultReadBufferSize   = 64 << 10
	DefaultWriteBufferSize  = 64 << 10
	DefaultMaxPendingBytes  = 16 << 20
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultMinReadRate      = 1 << 10 // bytes per second
	DefaultReadRateWindow   = 10 * time.Second
	DefaultMaxConnections   = 10_000
	DefaultLogBurst         = 10
	DefaultLogInterval      = time.Second
)

// Limits that Validate enforces.
const (
	// MaxFrameSizeLimit is the largest MaxFrameSize that Validate accepts.
	MaxFrameSizeLimit = 1 << 30
	// MaxIDLength is the longest ClusterID and SiloID, in bytes.
	MaxIDLength = 128
	// MinSecretLength is the shortest ClusterSecret, in bytes. Each end of a
	// handshake shows the other an HMAC of a transcript under the secret, so a
	// short secret could be guessed offline from one such proof.
	MinSecretLength = 16
	// MaxSecretLength is the longest ClusterSecret, in bytes.
	MaxSecretLength = 1024
)

// minReadBufferSize keeps slabs large enough that a slab holds many small frames.
const minReadBufferSize = 512

// ErrInvalidOptions is wrapped by every problem Options.Validate reports.
var ErrInvalidOptions = errors.New("transport: invalid options")

// Role says which kind of peer an end of a connection is.
type Role uint8

// The roles. A client only dials; a silo listens, and dials other silos.
const (
	RoleClient Role = 1
	RoleSilo   Role = 2
)

// String returns "client", "silo", or "role(N)" for anything else.
func (r Role) String() string {
	switch r {
	case RoleClient:
		return "client"
	case RoleSilo:
		return "silo"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

func (r Role) valid() bool { return r == RoleClient || r == RoleSilo }

// Identity is who an end of a connection says it is in the handshake.
type Identity struct {
	// Role is the end's kind. Left zero in Options, it means RoleClient for
	// Dial and RoleSilo for a Listener.
	Role Role
	// SiloID names a silo; empty for a client. At most MaxIDLength bytes of
	// UTF-8.
	SiloID string
	// Generation tells incarnations of one silo id apart (its start time in
	// Unix nanoseconds, say); zero for a client.
	Generation int64
	// ClusterID names the cluster. Both ends must name the same one (empty
	// included). At most MaxIDLength bytes of UTF-8.
	ClusterID string
	// Token names the client token the peer proved in the handshake (see
	// Options.Token and ListenerOptions.ClientTokens); empty when it proved
	// none. Only a listener sets it, on the identity of a client dialler.
	Token string
	// Certificate is the certificate the dialler showed over TLS, when TLS
	// verified it (mutual TLS); nil otherwise. Only a listener sets it.
	Certificate *x509.Certificate
}

// Token is a client's credential of its own: a name the listener looks its
// secret up by, and the secret, which the client proves in the handshake
// as a silo proves the cluster secret (it never crosses the wire). A token
// never lets its holder act as a silo: a listener refuses a dialler that
// presents one with another role than RoleClient.
type Token struct {
	// Name says which token it is. At most MaxIDLength bytes of UTF-8, not
	// empty.
	Name string
	// Secret is the token's secret: MinSecretLength to MaxSecretLength
	// bytes; 32 random bytes are a good choice.
	Secret []byte
}

// Options configures a connection, and through ListenerOptions a Listener.
// The zero value of each field means its default; call EnsureDefaults to fill
// them in and Validate to check the result. Dial, Listen and Serve do both.
type Options struct {
	// MaxFrameSize is the largest frame body, in bytes, that may be sent or
	// received. Send rejects a larger body with ErrFrameTooLarge and sends
	// nothing; a peer that announces a larger frame has its connection closed
	// before any of the frame is read. Both ends should use the same value.
	// Default 4 MiB; at most 1 GiB.
	MaxFrameSize int

	// ReadBufferSize is the size of each receive slab. The reader reads from the
	// socket straight into a slab and hands out frame bodies that alias it, so a
	// slab serves many frames with one allocation. A frame that does not fit in
	// a slab gets a buffer of its own, which starts at slab size and doubles as
	// the frame's bytes arrive (never beyond the announced length), so a peer
	// that announces a large frame and stalls holds one slab, not the
	// announced length. A handler that retains a body keeps its whole slab
	// alive. Default 64 KiB; at least 512 bytes.
	ReadBufferSize int

	// WriteBufferSize is the initial capacity of each of the two send buffers
	// (the one Send appends to and the one being written). A buffer that grew
	// past 16 times this size is replaced once 64 batches in a row have fitted
	// in this size, so a past burst does not pin memory. Default 64 KiB.
	WriteBufferSize int

	// MaxPendingBytes caps the bytes queued by Send but not yet handed to the
	// socket. Send returns ErrSendQueueFull, without blocking, once the queue
	// holds this much, so a peer that stops reading cannot grow memory without
	// bound: a connection holds at most MaxPendingBytes+4+MaxFrameSize queued
	// bytes, plus a batch as large being written. Send never blocks because it
	// is called from reader goroutines too (a reply sent while handling a
	// request), and blocking there can deadlock two peers that both stop
	// reading. Default 16 MiB.
	MaxPendingBytes int

	// WriteTimeout, when positive, closes the connection if writing one batch
	// takes longer, which detects a peer that stopped reading. Zero (the
	// default) sets no write deadline and arms no timer.
	WriteTimeout time.Duration

	// Identity is who this end says it is in the handshake. The ClusterID must
	// match the peer's.
	Identity Identity

	// ClusterSecret, when set, must be known to both ends: each proves it to
	// the other with an HMAC-SHA256 over both ends' hello messages, nonces
	// included, so the secret never crosses the wire and a proof cannot be
	// replayed. An end with a secret refuses a peer without one, and the
	// other way round. Use at least MinSecretLength random bytes (32 from a
	// CSPRNG is a good choice). Empty by default.
	ClusterSecret []byte

	// Token, when set, is the client credential a dialler proves to the
	// listener instead of a cluster secret; set one or the other, not both.
	// The listener proves it knows the token first, so a dialler never
	// shows its proof to a listener that does not.
	Token *Token

	// HandshakeTimeout bounds the whole handshake, TLS included: a connection
	// that has not finished it in time is closed, and Dial returns
	// ErrHandshakeTimeout. Default 5 s.
	HandshakeTimeout time.Duration

	// TLS, when set, runs the connection over TLS: Dial uses it as the client
	// configuration (ServerName defaults to the host of the address dialled),
	// a Listener as the server configuration, which needs a certificate. For
	// mutual TLS, give the listener ClientAuth and ClientCAs and the dialler
	// Certificates. Both ends must agree: a plain dialler gets ErrTLSMismatch
	// from a TLS listener, and so does a TLS dialler from a plain one. Nil by
	// default: plain TCP.
	TLS *tls.Config

	// KeepaliveInterval, when positive, sends a heartbeat (an empty frame,
	// which the peer's transport consumes and never delivers) once this long
	// has passed with nothing queued. Meant for links between silos; both
	// ends should set it. Zero (the default) sends none.
	KeepaliveInterval time.Duration

	// KeepaliveTimeout, when positive, closes the connection with
	// ErrKeepaliveTimeout once nothing at all has arrived for this long while
	// the reader was waiting for the peer. Set it to a few KeepaliveIntervals
	// of the peer. Zero (the default) never closes a quiet connection.
	KeepaliveTimeout time.Duration

	// MinReadRate is the slowest a peer may send a frame it has started, in
	// bytes per second averaged over ReadRateWindow: a connection whose
	// reader waited inside one frame for a whole window and got fewer bytes is
	// closed with ErrReadTooSlow. Time between frames does not count. Default
	// 1 KiB/s; negative turns the rule off.
	MinReadRate int

	// ReadRateWindow is the window over which MinReadRate is measured.
	// Default 10 s.
	ReadRateWindow time.Duration

	// Listener holds the settings only a Listener uses; Dial ignores them.
	Listener ListenerOptions
}

// ListenerOptions configure what only a Listener does.
type ListenerOptions struct {
	// MaxConnections caps the connections a Listener holds at once,
	// handshaking ones included. A connection beyond it is closed as soon as
	// it is accepted, before the handshake, and counted in
	// ListenerStats.RefusedLimit. Default 10 000; negative means no limit.
	MaxConnections int

	// AcceptRoles lists the peer roles the Listener accepts; a peer of
	// another role is refused in the handshake with ErrRoleRefused. Nil (the
	// default) accepts both clients and silos.
	AcceptRoles []Role

	// ClientTokens, when set, looks up the secret of the client token a
	// dialler names; ok false refuses the dialler with ErrCredentialRefused.
	// Nil (the default) refuses every dialler that presents a token. It is
	// called during handshakes, from many goroutines at once.
	ClientTokens func(name string) (secret []byte, ok bool)

	// RequireClientCredential refuses, with ErrCredentialRefused, a client
	// dialler that proves no token and showed no verified TLS client
	// certificate. False (the default) admits such clients.
	RequireClientCredential bool

	// IdleTimeout, when positive, closes a connection with ErrIdleTimeout
	// once no frame has moved in either direction for this long and its
	// handler, if it implements Idler, says it is idle. Heartbeats do not
	// count as frames. Meant for client connections. Zero (the default)
	// keeps idle connections open.
	IdleTimeout time.Duration

	// LogBurst and LogInterval shape the token bucket that throttles the
	// Listener's log lines about refused and closed connections: LogBurst
	// lines at once, then one per LogInterval; dropped lines are counted in
	// ListenerStats.LogSuppressed and in the next line written. Defaults 10
	// and 1 s.
	LogBurst    int
	LogInterval time.Duration
}

// EnsureDefaults replaces every zero field with its default.
func (o *Options) EnsureDefaults() {
	setDefault(&o.MaxFrameSize, DefaultMaxFrameSize)
	setDefault(&o.ReadBufferSize, DefaultReadBufferSize)
	setDefault(&o.WriteBufferSize, DefaultWriteBufferSize)
	setDefault(&o.MaxPendingBytes, DefaultMaxPendingBytes)
	setDefault(&o.HandshakeTimeout, DefaultHandshakeTimeout)
	setDefault(&o.MinReadRate, DefaultMinReadRate)
	setDefault(&o.ReadRateWindow, DefaultReadRateWindow)
	setDefault(&o.Listener.MaxConnections, DefaultMaxConnections)
	setDefault(&o.Listener.LogBurst, DefaultLogBurst)
	setDefault(&o.Listener.LogInterval, DefaultLogInterval)
}

func setDefault[T int | time.Duration](field *T, value T) {
	if *field == 0 {
		*field = value
	}
}

// Validate reports every problem with o, each wrapping ErrInvalidOptions, or nil.
// Zero fields that have a default are problems: call EnsureDefaults first.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...))
	}
	if o.MaxFrameSize <= 0 || o.MaxFrameSize > MaxFrameSizeLimit {
		bad("MaxFrameSize %d is outside [1, %d]", o.MaxFrameSize, MaxFrameSizeLimit)
	}
	if o.ReadBufferSize < minReadBufferSize {
		bad("ReadBufferSize %d is below %d", o.ReadBufferSize, minReadBufferSize)
	}
	if o.WriteBufferSize <= 0 {
		bad("WriteBufferSize %d is not positive", o.WriteBufferSize)
	}
	if o.MaxPendingBytes <= 0 {
		bad("MaxPendingBytes %d is not positive", o.MaxPendingBytes)
	}
	if o.WriteTimeout < 0 {
		bad("WriteTimeout %v is negative", o.WriteTimeout)
	}
	if o.Identity.Role != 0 && !o.Identity.Role.valid() {
		bad("Identity.Role %v is not a role", o.Identity.Role)
	}
	for _, id := range []struct{ name, value string }{{"SiloID", o.Identity.SiloID}, {"ClusterID", o.Identity.ClusterID}} {
		if len(id.value) > MaxIDLength || !utf8.ValidString(id.value) {
			bad("Identity.%s is not UTF-8 of at most %d bytes", id.name, MaxIDLength)
		}
	}
	if n := len(o.ClusterSecret); n != 0 && (n < MinSecretLength || n > MaxSecretLength) {
		bad("ClusterSecret has %d bytes, outside [%d, %d]", n, MinSecretLength, MaxSecretLength)
	}
	if t := o.Token; t != nil {
		if t.Name == "" || len(t.Name) > MaxIDLength || !utf8.ValidString(t.Name) {
			bad("Token.Name is not UTF-8 of 1 to %d bytes", MaxIDLength)
		}
		if n := len(t.Secret); n < MinSecretLength || n > MaxSecretLength {
			bad("Token.Secret has %d bytes, outside [%d, %d]", n, MinSecretLength, MaxSecretLength)
		}
		if len(o.ClusterSecret) > 0 {
			bad("Token and ClusterSecret are both set: a dialler proves one credential")
		}
		if o.Identity.Role == RoleSilo {
			bad("Token is a client credential: a dialler of role %v cannot present one", RoleSilo)
		}
	}
	if o.HandshakeTimeout <= 0 {
		bad("HandshakeTimeout %v is not positive", o.HandshakeTimeout)
	}
	if o.KeepaliveInterval < 0 {
		bad("KeepaliveInterval %v is negative", o.KeepaliveInterval)
	}
	if o.KeepaliveTimeout < 0 {
		bad("KeepaliveTimeout %v is negative", o.KeepaliveTimeout)
	}
	if o.KeepaliveInterval > 0 && o.KeepaliveTimeout > 0 && o.KeepaliveTimeout <= o.KeepaliveInterval {
		bad("KeepaliveTimeout %v is not above KeepaliveInterval %v", o.KeepaliveTimeout, o.KeepaliveInterval)
	}
	if o.MinReadRate == 0 {
		bad("MinReadRate is zero")
	}
	if o.ReadRateWindow <= 0 {
		bad("ReadRateWindow %v is not positive", o.ReadRateWindow)
	}
	l := &o.Listener
	if l.MaxConnections == 0 {
		bad("Listener.MaxConnections is zero")
	}
	for _, r := range l.AcceptRoles {
		if !r.valid() {
			bad("Listener.AcceptRoles holds %v, not a role", r)
		}
	}
	if l.IdleTimeout < 0 {
		bad("Listener.IdleTimeout %v is negative", l.IdleTimeout)
	}
	if l.LogBurst <= 0 {
		bad("Listener.LogBurst %d is not positive", l.LogBurst)
	}
	if l.LogInterval <= 0 {
		bad("Listener.LogInterval %v is not positive", l.LogInterval)
	}
	return errors.Join(errs...)
}

// prepare fills in the defaults, the role an end of this side has unless
// told otherwise, and validates the result, adding what only a listener
// needs.
func (o *Options) prepare(listener bool) error {
	o.EnsureDefaults()
	err := o.Validate()
	if o.Identity.Role == 0 {
		o.Identity.Role = RoleClient
		if listener {
			o.Identity.Role = RoleSilo
		}
	}
	if !listener {
		return err
	}
	var errs []error
	if o.Identity.Role != RoleSilo {
		errs = append(errs, fmt.Errorf("%w: a listener's Identity.Role must be %v, not %v", ErrInvalidOptions, RoleSilo, o.Identity.Role))
	}
	if c := o.TLS; c != nil && len(c.Certificates) == 0 && c.GetCertificate == nil && c.GetConfigForClient == nil {
		errs = append(errs, fmt.Errorf("%w: a listener's TLS configuration has no certificate", ErrInvalidOptions))
	}
	return errors.Join(append([]error{err}, errs...)...)
}

// Option supplies a behaviour the transport uses, such as its clock.
type Option func(*deps)

type deps struct {
	clock clock.Clock
	log   *slog.Logger
}

// WithClock sets the clock behind every time rule of the transport: the
// handshake deadline, keepalives, the idle timeout, the read rate and the
// log throttle (not WriteTimeout, a socket deadline). Nil means the real
// clock, the default.
func WithClock(c clock.Clock) Option { return func(d *deps) { d.clock = c } }

// WithLogger sets where a Listener logs the connections it refuses or closes.
// Nil means slog.Default(), the default. Dial logs nothing: it returns its
// errors.
func WithLogger(l *slog.Logger) Option { return func(d *deps) { d.log = l } }

func newDeps(opts []Option) deps {
	var d deps
	for _, o := range opts {
		o(&d)
	}
	if d.clock == nil {
		d.clock = clock.Real{}
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	return d
}
