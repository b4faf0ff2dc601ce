package transport

import (
	"errors"
	"strings"
)

// Errors of an established connection.
var (
	// ErrClosed is returned by Send on a connection that is closed or closing.
	ErrClosed = errors.New("transport: connection closed")
	// ErrFrameTooLarge is returned by Send for a body above Options.MaxFrameSize,
	// and wrapped by the error that closes a connection whose peer announced one.
	ErrFrameTooLarge = errors.New("transport: frame too large")
	// ErrEmptyFrame is returned by Send for an empty body: the zero-length
	// frame is the heartbeat, which the receiving transport consumes.
	ErrEmptyFrame = errors.New("transport: empty frame body")
	// ErrSendQueueFull is returned by Send when Options.MaxPendingBytes are
	// already queued; nothing is sent and the connection stays open.
	ErrSendQueueFull = errors.New("transport: send queue full")
	// ErrReadTooSlow is wrapped by the error that closes a connection whose
	// peer sent a frame slower than Options.MinReadRate.
	ErrReadTooSlow = errors.New("transport: peer sends too slowly")
	// ErrIdleTimeout is wrapped by the error that closes a connection idle for
	// ListenerOptions.IdleTimeout.
	ErrIdleTimeout = errors.New("transport: connection idle")
	// ErrKeepaliveTimeout is wrapped by the error that closes a connection from
	// which nothing arrived for Options.KeepaliveTimeout.
	ErrKeepaliveTimeout = errors.New("transport: keepalive timeout")
)

// ErrHandshake is matched by every *HandshakeError.
var ErrHandshake = errors.New("transport: handshake failed")

// Why a handshake fails: a *HandshakeError matches exactly one of these.
var (
	// ErrVersionMismatch: the ends speak different protocol versions.
	ErrVersionMismatch = errors.New("transport: protocol version mismatch")
	// ErrClusterMismatch: the ends name different clusters.
	ErrClusterMismatch = errors.New("transport: cluster id mismatch")
	// ErrSecretMismatch: one end has a cluster secret and the other none, or
	// a proof of the secret was wrong.
	ErrSecretMismatch = errors.New("transport: cluster secret mismatch")
	// ErrRoleRefused: the listener does not accept the dialler's role, or the
	// listener is not a silo.
	ErrRoleRefused = errors.New("transport: role not accepted")
	// ErrTLSMismatch: one end uses TLS and the other does not.
	ErrTLSMismatch = errors.New("transport: TLS mismatch")
	// ErrTLSHandshake: the TLS handshake failed, for instance on a
	// certificate; the *HandshakeError wraps crypto/tls's error.
	ErrTLSHandshake = errors.New("transport: TLS handshake failed")
	// ErrHandshakeTimeout: the handshake did not finish within
	// Options.HandshakeTimeout.
	ErrHandshakeTimeout = errors.New("transport: handshake timed out")
	// ErrHandshakeAborted: the connection ended or failed during the
	// handshake; a listener at its connection limit closes new connections
	// this way.
	ErrHandshakeAborted = errors.New("transport: connection lost during the handshake")
	// ErrMalformedHandshake: a handshake message could not be parsed or came
	// out of order.
	ErrMalformedHandshake = errors.New("transport: malformed handshake")
	// ErrCredentialRefused: the listener does not know the client token the
	// dialler named, a proof of it was wrong, or the listener requires a
	// client credential and the dialler showed none.
	ErrCredentialRefused = errors.New("transport: client credential refused")
)

// maxReasonCode is the highest code in reasons.
const maxReasonCode = 10

// reasons lists the handshake failures with their wire codes (sent in a
// refusal) and their names (in logs). Codes are part of the protocol: never
// renumber them.
var reasons = []struct {
	err  error
	code uint8
	name string
}{
	{ErrVersionMismatch, 1, "version"},
	{ErrClusterMismatch, 2, "cluster"},
	{ErrSecretMismatch, 3, "secret"},
	{ErrRoleRefused, 4, "role"},
	{ErrTLSMismatch, 5, "tls-mismatch"},
	{ErrTLSHandshake, 6, "tls"},
	{ErrHandshakeTimeout, 7, "timeout"},
	{ErrHandshakeAborted, 8, "aborted"},
	{ErrMalformedHandshake, 9, "malformed"},
	{ErrCredentialRefused, 10, "credential"},
}

func reasonCode(reason error) uint8 {
	for _, r := range reasons {
		if r.err == reason {
			return r.code
		}
	}
	return 0
}

// reasonOf returns the reason a peer's refusal code stands for; an unknown
// code counts as a malformed handshake.
func reasonOf(code uint8) error {
	for _, r := range reasons {
		if r.code == code {
			return r.err
		}
	}
	return ErrMalformedHandshake
}

// ReasonName returns the short name a Listener logs for a handshake failure
// reason ("version", "cluster", "secret", "role", "tls-mismatch", "tls",
// "timeout", "aborted", "malformed", "credential"), or "unknown".
func ReasonName(reason error) string {
	for _, r := range reasons {
		if r.err == reason {
			return r.name
		}
	}
	return "unknown"
}

// HandshakeError says why a handshake failed. Both ends return one: Dial
// returns it, and a Listener logs and counts it. It matches ErrHandshake, its
// Reason and its Err with errors.Is.
type HandshakeError struct {
	// Reason is one of ErrVersionMismatch, ErrClusterMismatch,
	// ErrSecretMismatch, ErrRoleRefused, ErrTLSMismatch, ErrTLSHandshake,
	// ErrHandshakeTimeout, ErrHandshakeAborted, ErrMalformedHandshake and
	// ErrCredentialRefused.
	Reason error
	// ByPeer is true when the peer found the problem and sent the refusal,
	// false when this end did.
	ByPeer bool
	// Detail says what was wrong, in words; from the peer when ByPeer.
	Detail string
	// Err is the underlying error (from the network or crypto/tls), if any.
	Err error
}

// Error describes the failure, for example "transport: handshake failed:
// cluster id mismatch (refused by the peer): the listener is not in cluster
// "b"".
func (e *HandshakeError) Error() string {
	var b strings.Builder
	b.WriteString("transport: handshake failed: ")
	if e.Reason != nil {
		b.WriteString(strings.TrimPrefix(e.Reason.Error(), "transport: "))
	}
	if e.ByPeer {
		b.WriteString(" (refused by the peer)")
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns ErrHandshake, the reason and the underlying error.
func (e *HandshakeError) Unwrap() []error {
	errs := []error{ErrHandshake}
	if e.Reason != nil {
		errs = append(errs, e.Reason)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}
