package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/granary-go/granary/clock"
)

// A TLS record starts with its content type (22 for a handshake) and a major
// version of 3; a granary handshake starts with its magic, so the first byte
// tells them apart.
const (
	tlsRecordHandshake = 0x16
	tlsRecordHeader    = 5
)

// guard bounds a handshake: when the timeout fires or ctx ends, it sets a
// deadline in the past on the socket, which makes the blocked read or write
// (TLS or ours) return at once. A deadline, not a close, so that the failed
// end can still be told apart from one the peer closed.
type guard struct {
	nc    net.Conn
	timer clock.Timer
	stop  func() bool // unregisters the ctx callback

	mu struct {
		sync.Mutex
		released bool
		why      error // ErrHandshakeTimeout or ctx's error, once tripped
	}
}

func newGuard(ctx context.Context, nc net.Conn, c clock.Clock, timeout time.Duration) *guard {
	g := &guard{nc: nc}
	g.timer = c.AfterFunc(timeout, func() { g.trip(ErrHandshakeTimeout) })
	g.stop = context.AfterFunc(ctx, func() { g.trip(ctx.Err()) })
	return g
}

func (g *guard) trip(why error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.released || g.mu.why != nil {
		return
	}
	g.mu.why = why
	_ = g.nc.SetDeadline(time.Unix(1, 0))
}

// release disarms the guard and returns why it tripped, or nil. A guard that
// tripped leaves the socket unusable, so a handshake that finished anyway
// must still fail.
func (g *guard) release() error {
	g.mu.Lock()
	g.mu.released = true
	why := g.mu.why
	g.mu.Unlock()
	g.timer.Stop()
	g.stop()
	return why
}

// failure turns whatever ended a handshake into a *HandshakeError.
func failure(err, tripped error) *HandshakeError {
	switch {
	case errors.Is(tripped, ErrHandshakeTimeout):
		return &HandshakeError{Reason: ErrHandshakeTimeout, Err: ioCause(err)}
	case tripped != nil: // the dialler's ctx ended
		return &HandshakeError{Reason: ErrHandshakeAborted, Err: tripped}
	}
	var he *HandshakeError
	if errors.As(err, &he) {
		return he
	}
	var rhe tls.RecordHeaderError
	if errors.As(err, &rhe) && [4]byte(rhe.RecordHeader[:4]) == magic {
		// A plain listener answered our TLS hello with a granary refusal.
		return &HandshakeError{Reason: ErrTLSMismatch, ByPeer: true, Detail: "the listener does not use TLS"}
	}
	if isConnectionLost(err) {
		return &HandshakeError{Reason: ErrHandshakeAborted, Err: err}
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		// crypto/tls reports an alert from the peer this way; with TLS 1.3 a
		// dialler learns that its certificate was refused only now, on its
		// first read after the TLS handshake.
		return &HandshakeError{Reason: ErrTLSHandshake, ByPeer: true, Err: err}
	}
	return &HandshakeError{Reason: ErrHandshakeAborted, Err: err}
}

// ioCause drops the deadline error a tripped guard causes, which says less
// than the reason itself.
func ioCause(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	return err
}

func isConnectionLost(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED)
}

// tlsFailure marks an error of crypto/tls's handshake as such, unless it says
// something more precise on its own.
func tlsFailure(err error) error {
	var rhe tls.RecordHeaderError
	if isConnectionLost(err) || errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &rhe) {
		return err
	}
	return &HandshakeError{Reason: ErrTLSHandshake, Err: err}
}

// dialHandshake runs the dialler's end over nc, TLS first if configured, and
// returns the stream to carry frames on and the listener's identity.
func dialHandshake(ctx context.Context, nc net.Conn, addr string, opts *Options, c clock.Clock) (net.Conn, Identity, error) {
	g := newGuard(ctx, nc, c, opts.HandshakeTimeout)
	stream := nc
	var err error
	if opts.TLS != nil {
		cfg := opts.TLS
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			cfg = cfg.Clone()
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		if err = tc.Handshake(); err != nil {
			err = tlsFailure(err)
		}
		stream = tc
	}
	var peer Identity
	if err == nil {
		h := handshake{rw: stream, local: opts.Identity, secret: opts.ClusterSecret, token: opts.Token}
		peer, err = h.dial()
	}
	if tripped := g.release(); tripped != nil || err != nil {
		return nil, Identity{}, failure(err, tripped)
	}
	return stream, peer, nil
}

// listenHandshake runs the listener's end over nc and returns the stream to
// carry frames on and the dialler's identity. A dialler that speaks plain
// TCP to a TLS listener, or TLS to a plain one, gets a plain refusal it can
// read, after its first message has been read in full, so that closing does
// not reset the connection before the refusal arrives.
func listenHandshake(nc net.Conn, opts *Options, c clock.Clock) (net.Conn, Identity, error) {
	g := newGuard(context.Background(), nc, c, opts.HandshakeTimeout)
	h := &handshake{rw: nc, local: opts.Identity, secret: opts.ClusterSecret, accept: opts.Listener.AcceptRoles,
		tokens: opts.Listener.ClientTokens, requireCred: opts.Listener.RequireClientCredential}
	stream := nc
	var peer Identity
	err := readFirstHeader(h, nc, opts.TLS, &stream)
	if err == nil {
		h.rw = stream
		var leaf *x509.Certificate
		if tc, ok := stream.(*tls.Conn); ok {
			if chains := tc.ConnectionState().VerifiedChains; len(chains) > 0 && len(chains[0]) > 0 {
				h.certified, leaf = true, chains[0][0]
			}
		}
		peer, err = h.listen()
		peer.Certificate = leaf
	}
	if tripped := g.release(); tripped != nil || err != nil {
		return nil, Identity{}, failure(err, tripped)
	}
	return stream, peer, nil
}

// readFirstHeader reads the header of the dialler's first granary message
// into h.buf, running the TLS handshake first when cfg is set, and sets
// *stream to what the rest of the connection runs over.
func readFirstHeader(h *handshake, nc net.Conn, cfg *tls.Config, stream *net.Conn) error {
	if cfg == nil {
		if _, err := io.ReadFull(nc, h.buf[:msgHeaderSize]); err != nil {
			return err
		}
		if h.buf[0] != tlsRecordHandshake {
			return nil
		}
		// A TLS hello: read the rest of its record, then refuse in plain.
		if n := int(binary.BigEndian.Uint16(h.buf[3:])) - (msgHeaderSize - tlsRecordHeader); n > 0 {
			if _, err := io.CopyN(io.Discard, nc, int64(n)); err != nil {
				return err
			}
		}
		return h.refuse(ErrTLSMismatch, "this listener does not use TLS")
	}
	if _, err := io.ReadFull(nc, h.buf[:1]); err != nil {
		return err
	}
	if h.buf[0] != tlsRecordHandshake {
		if _, err := io.ReadFull(nc, h.buf[1:msgHeaderSize]); err != nil {
			return err
		}
		if _, _, err := readBody(nc, &h.buf); err != nil {
			return err
		}
		return h.refuse(ErrTLSMismatch, "this listener requires TLS")
	}
	tc := tls.Server(&peekedConn{Conn: nc, first: h.buf[0]}, cfg)
	if err := tc.Handshake(); err != nil {
		return tlsFailure(err)
	}
	*stream = tc
	_, err := io.ReadFull(tc, h.buf[:msgHeaderSize])
	return err
}

// peekedConn gives back the byte the listener read to tell TLS from plain.
type peekedConn struct {
	net.Conn
	first    byte
	returned bool
}

func (p *peekedConn) Read(b []byte) (int, error) {
	if !p.returned && len(b) > 0 {
		p.returned = true
		b[0] = p.first
		return 1, nil
	}
	return p.Conn.Read(b)
}
