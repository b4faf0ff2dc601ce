package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/internal/ratelog"
)

// Dial connects to a listener at addr (host:port over TCP), runs the
// handshake (TLS first when opts.TLS is set), and starts the connection with
// h as its handler. ctx bounds the dial and the handshake, and so does
// opts.HandshakeTimeout; cancelling ctx later does not affect the connection.
// A failed handshake returns a *HandshakeError (matching ErrHandshake and its
// reason); Conn.Peer of the result tells who answered.
func Dial(ctx context.Context, addr string, opts Options, h Handler, o ...Option) (*Conn, error) {
	if h == nil {
		return nil, errors.New("transport: Dial needs a handler")
	}
	if err := opts.prepare(false); err != nil {
		return nil, err
	}
	d := newDeps(o)
	var dialer net.Dialer
	nc, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("transport: dial %s: %w", addr, err)
	}
	setNoDelay(nc)
	stream, peer, err := dialHandshake(ctx, nc, addr, &opts, d.clock)
	if err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("transport: dial %s: %w", addr, err)
	}
	c := newConn(nc, opts, h)
	c.clock = d.clock
	c.established(stream, peer)
	c.start()
	return c, nil
}

// ListenerStats count what a Listener accepted and refused since it started.
// Every kind of refusal or forced close has its own counter; each is also
// logged (throttled, see ListenerOptions.LogBurst) with the peer's address.
type ListenerStats struct {
	Open     int    // connections held now, handshaking ones included
	Accepted uint64 // connections that passed the handshake and were handed to accept

	RefusedLimit uint64 // closed on arrival: MaxConnections were open
	// RefusedPerSource counts connections closed on arrival because their
	// source address held MaxConnectionsPerSource already.
	RefusedPerSource uint64
	RefusedByAccept  uint64 // passed the handshake, refused by the accept function

	// Handshake failures, by reason (see the Err... reasons).
	HandshakeVersion     uint64
	HandshakeCluster     uint64
	HandshakeSecret      uint64
	HandshakeRole        uint64
	HandshakeTLSMismatch uint64
	HandshakeTLS         uint64
	HandshakeTimeout     uint64
	HandshakeAborted     uint64
	HandshakeMalformed   uint64
	HandshakeCredential  uint64

	// Established connections closed for the peer's behaviour.
	FrameTooLarge     uint64 // announced a frame above MaxFrameSize
	Truncated         uint64 // ended the stream inside a frame
	ReadTooSlow       uint64 // sent a frame slower than MinReadRate
	IdleClosed        uint64 // idle for IdleTimeout
	KeepaliveTimeouts uint64 // sent nothing for KeepaliveTimeout

	LogSuppressed uint64 // log lines about the above dropped by the throttle
}

// Listener accepts connections and owns them: closing it closes every
// connection it accepted.
type Listener struct {
	ln       net.Listener
	opts     Options
	deps     deps
	log      *ratelog.Logger
	accept   func(*Conn) Handler
	acceptMu sync.Mutex // accept is called for one connection at a time
	closing  chan struct{}
	loopDone chan struct{}
	once     sync.Once

	mu struct {
		sync.Mutex
		conns map[*Conn]string // the source address of each
		// bySource counts the connections held per source address.
		bySource map[string]int
	}
	counts listenerCounts
}

type listenerCounts struct {
	accepted, refusedLimit, refusedByAccept                atomic.Uint64
	refusedPerSource                                       atomic.Uint64
	handshake                                              [maxReasonCode + 1]atomic.Uint64 // by reason code
	frameTooLarge, truncated, readTooSlow, idle, keepalive atomic.Uint64
}

// Listen listens on addr (host:port over TCP; port 0 picks a free port) and
// serves it as Serve does.
func Listen(addr string, opts Options, accept func(*Conn) Handler, o ...Option) (*Listener, error) {
	if accept == nil {
		return nil, errors.New("transport: Listen needs an accept function")
	}
	if err := opts.prepare(true); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("transport: listen %s: %w", addr, err)
	}
	return serve(ln, opts, accept, o), nil
}

// Serve serves connections accepted from ln, which it owns from then on
// (Close closes it). Each connection runs the handshake on a goroutine of its
// own, bounded by opts.HandshakeTimeout; a connection beyond
// opts.Listener.MaxConnections is closed before it. Once the handshake has
// passed, accept is called with the new, not yet started connection (its Peer
// known) and returns its handler, so the handler is in place before the first
// frame is read; returning nil refuses the connection. accept is called for
// one connection at a time, so it should be quick; it may keep the connection
// and call Send, but it must not call Close (return nil instead). On an error
// (invalid options) ln is left open.
func Serve(ln net.Listener, opts Options, accept func(*Conn) Handler, o ...Option) (*Listener, error) {
	if accept == nil {
		return nil, errors.New("transport: Serve needs an accept function")
	}
	if err := opts.prepare(true); err != nil {
		return nil, err
	}
	return serve(ln, opts, accept, o), nil
}

func serve(ln net.Listener, opts Options, accept func(*Conn) Handler, o []Option) *Listener {
	d := newDeps(o)
	l := &Listener{
		ln:       ln,
		opts:     opts,
		deps:     d,
		log:      ratelog.New(d.log, d.clock, opts.Listener.LogBurst, opts.Listener.LogInterval),
		accept:   accept,
		closing:  make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	l.mu.conns = make(map[*Conn]string)
	l.mu.bySource = make(map[string]int)
	go l.acceptLoop()
	return l
}

// Addr returns the address the listener is bound to.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Stats returns the listener's counters. They are read one by one, so a
// snapshot taken while connections come and go need not be consistent across
// fields.
func (l *Listener) Stats() ListenerStats {
	l.mu.Lock()
	open := len(l.mu.conns)
	l.mu.Unlock()
	c := &l.counts
	hs := func(reason error) uint64 { return c.handshake[reasonCode(reason)].Load() }
	return ListenerStats{
		Open:                 open,
		Accepted:             c.accepted.Load(),
		RefusedLimit:         c.refusedLimit.Load(),
		RefusedPerSource:     c.refusedPerSource.Load(),
		RefusedByAccept:      c.refusedByAccept.Load(),
		HandshakeVersion:     hs(ErrVersionMismatch),
		HandshakeCluster:     hs(ErrClusterMismatch),
		HandshakeSecret:      hs(ErrSecretMismatch),
		HandshakeRole:        hs(ErrRoleRefused),
		HandshakeTLSMismatch: hs(ErrTLSMismatch),
		HandshakeTLS:         hs(ErrTLSHandshake),
		HandshakeTimeout:     hs(ErrHandshakeTimeout),
		HandshakeAborted:     hs(ErrHandshakeAborted),
		HandshakeMalformed:   hs(ErrMalformedHandshake),
		HandshakeCredential:  hs(ErrCredentialRefused),
		FrameTooLarge:        c.frameTooLarge.Load(),
		Truncated:            c.truncated.Load(),
		ReadTooSlow:          c.readTooSlow.Load(),
		IdleClosed:           c.idle.Load(),
		KeepaliveTimeouts:    c.keepalive.Load(),
		LogSuppressed:        l.log.Suppressed(),
	}
}

// Close stops accepting, closes every connection, handshaking or established,
// and waits until the accepting goroutine and every connection's goroutines
// have exited (except a connection whose handler is the caller, see
// Conn.Close). It may be called any number of times; it always returns nil.
func (l *Listener) Close() error {
	l.once.Do(func() {
		close(l.closing)
		_ = l.ln.Close()
		<-l.loopDone
		// The accept loop has exited, so no connection can be added now.
		l.mu.Lock()
		conns := make([]*Conn, 0, len(l.mu.conns))
		for c := range l.mu.conns {
			conns = append(conns, c)
		}
		l.mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return nil
}

func (l *Listener) acceptLoop() {
	defer close(l.loopDone)
	var backoff time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			select {
			case <-l.closing:
				return
			default:
			}
			// Out of file descriptors and similar conditions pass; back off
			// rather than spin, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-l.closing:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		backoff = 0
		l.admit(nc)
	}
}

// admit registers a new connection and starts its handshake, or closes it at
// once when the listener is full.
func (l *Listener) admit(nc net.Conn) {
	var c *Conn
	source := sourceOf(nc.RemoteAddr())
	perSource := l.opts.Listener.MaxConnectionsPerSource
	l.mu.Lock()
	full := l.opts.Listener.MaxConnections >= 0 && len(l.mu.conns) >= l.opts.Listener.MaxConnections
	crowded := !full && perSource >= 0 && l.mu.bySource[source] >= perSource
	if !full && !crowded {
		c = newConn(nc, l.opts, nil)
		c.clock = l.deps.clock
		c.onDone = l.ended
		c.started.Store(true) // run closes done
		l.mu.conns[c] = source
		l.mu.bySource[source]++
	}
	l.mu.Unlock()
	switch {
	case full:
		_ = nc.Close()
		l.log.Log(slog.LevelWarn, "transport: connection refused: connection limit reached",
			slog.String("peer", nc.RemoteAddr().String()), slog.Int("limit", l.opts.Listener.MaxConnections))
		l.counts.refusedLimit.Add(1)
		return
	case crowded:
		_ = nc.Close()
		l.log.Log(slog.LevelWarn, "transport: connection refused: this source address holds its limit of connections",
			slog.String("peer", nc.RemoteAddr().String()), slog.Int("limit", perSource))
		l.counts.refusedPerSource.Add(1)
		return
	}
	setNoDelay(nc)
	go l.run(c)
}

// sourceOf is the address a connection's source is counted under: its IP
// (every port of a host counts together), or the whole address when it has
// none.
func sourceOf(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	if host, _, err := net.SplitHostPort(addr.String()); err == nil {
		return host
	}
	return addr.String()
}

// run owns a connection from its handshake on; once accepted, it becomes the
// connection's reader.
func (l *Listener) run(c *Conn) {
	c.readerID.Store(goroutineID())
	stream, peer, err := listenHandshake(c.nc, &l.opts, l.deps.clock)
	if err != nil {
		closedHere := c.isClosing() // by Listener.Close, which is no failure of the peer's
		c.shutdown(nil)
		var he *HandshakeError
		if !closedHere && errors.As(err, &he) {
			l.handshakeFailed(c, he)
		}
		l.forget(c)
		close(c.done) // no handler, so no HandleClose to wait for
		return
	}
	c.established(stream, peer)
	l.acceptMu.Lock()
	h := l.accept(c)
	l.acceptMu.Unlock()
	if h == nil {
		c.shutdown(nil)
		l.counts.refusedByAccept.Add(1)
		l.forget(c)
		close(c.done)
		return
	}
	l.counts.accepted.Add(1)
	c.handler = h
	c.startWriter(l.opts.Listener.IdleTimeout)
	c.readLoop()
}

func (l *Listener) handshakeFailed(c *Conn, err *HandshakeError) {
	defer l.counts.handshake[reasonCode(err.Reason)].Add(1) // after the line, as in ended
	level := slog.LevelWarn
	if err.Reason == ErrHandshakeTimeout || err.Reason == ErrHandshakeAborted {
		level = slog.LevelInfo // port scanners and impatient clients, mostly
	}
	l.log.Log(level, "transport: connection refused: handshake failed",
		slog.String("peer", c.RemoteAddr().String()), slog.String("reason", ReasonName(err.Reason)),
		slog.Bool("by_peer", err.ByPeer), slog.String("err", err.Error()))
}

// ended counts and logs why an established connection ended, when the peer
// or a time rule ended it, then forgets the connection.
func (l *Listener) ended(c *Conn) {
	defer l.forget(c)
	err := c.err
	var counter *atomic.Uint64
	level, reason := slog.LevelWarn, ""
	switch {
	case err == nil:
		return
	case errors.Is(err, ErrFrameTooLarge):
		counter, reason = &l.counts.frameTooLarge, "frame too large"
	case errors.Is(err, io.ErrUnexpectedEOF):
		counter, reason, level = &l.counts.truncated, "stream ended inside a frame", slog.LevelInfo
	case errors.Is(err, ErrReadTooSlow):
		counter, reason = &l.counts.readTooSlow, "frame sent too slowly"
	case errors.Is(err, ErrIdleTimeout):
		counter, reason, level = &l.counts.idle, "idle", slog.LevelInfo
	case errors.Is(err, ErrKeepaliveTimeout):
		counter, reason = &l.counts.keepalive, "keepalive timeout"
	default:
		return // the peer closed, or the network failed: nothing to hold against it
	}
	// Logged before counted, so that whoever sees the count finds the line.
	l.log.Log(level, "transport: connection closed: "+reason,
		slog.String("peer", c.RemoteAddr().String()), slog.String("err", err.Error()))
	counter.Add(1)
}

func (l *Listener) forget(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	source, ok := l.mu.conns[c]
	if !ok {
		return
	}
	delete(l.mu.conns, c)
	if l.mu.bySource[source]--; l.mu.bySource[source] <= 0 {
		delete(l.mu.bySource, source)
	}
}

func setNoDelay(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		// Go enables TCP_NODELAY by default; state it, since batching in the
		// writer, not Nagle's algorithm, is what coalesces small frames here.
		_ = tc.SetNoDelay(true)
	}
}
