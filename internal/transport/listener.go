package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Dial connects to a listener at addr (host:port over TCP) and starts the
// connection with h as its handler. ctx bounds only the dial: cancelling it
// later does not affect the connection.
func Dial(ctx context.Context, addr string, opts Options, h Handler) (*Conn, error) {
	if h == nil {
		return nil, errors.New("transport: Dial needs a handler")
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("transport: dial %s: %w", addr, err)
	}
	setNoDelay(nc)
	c := newConn(nc, opts, h)
	c.start()
	return c, nil
}

// Listener accepts connections and owns them: closing it closes every
// connection it accepted.
type Listener struct {
	ln       net.Listener
	opts     Options
	accept   func(*Conn) Handler
	closing  chan struct{}
	loopDone chan struct{}
	once     sync.Once

	mu struct {
		sync.Mutex
		conns map[*Conn]struct{}
	}
}

// Listen listens on addr (host:port over TCP; port 0 picks a free port) and
// serves every accepted connection. For each one, accept is called with the
// new, not yet started connection, and returns its handler, so the handler is in
// place before the first frame is read; returning nil refuses the connection.
// accept runs on the accepting goroutine, so it should be quick; it may keep
// the connection and call Send, but it must not call Close (return nil instead).
func Listen(addr string, opts Options, accept func(*Conn) Handler) (*Listener, error) {
	if accept == nil {
		return nil, errors.New("transport: Listen needs an accept function")
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("transport: listen %s: %w", addr, err)
	}
	l := &Listener{
		ln:       ln,
		opts:     opts,
		accept:   accept,
		closing:  make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	l.mu.conns = make(map[*Conn]struct{})
	go l.acceptLoop()
	return l, nil
}

// Addr returns the address the listener is bound to.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Close stops accepting, closes every accepted connection, and waits until the
// accepting goroutine and every connection's goroutines have exited (except a
// connection whose handler is the caller, see Conn.Close). It may be called
// any number of times; it always returns nil.
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
		l.serve(nc)
	}
}

func (l *Listener) serve(nc net.Conn) {
	setNoDelay(nc)
	c := newConn(nc, l.opts, nil)
	h := l.accept(c)
	if h == nil || c.isClosing() {
		c.shutdown(nil)
		close(c.done) // never started, so there is no HandleClose to wait for
		return
	}
	l.mu.Lock()
	l.mu.conns[c] = struct{}{}
	l.mu.Unlock()
	c.handler = h
	c.onDone = l.forget
	c.start()
}

func (l *Listener) forget(c *Conn) {
	l.mu.Lock()
	delete(l.mu.conns, c)
	l.mu.Unlock()
}

func setNoDelay(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		// Go enables TCP_NODELAY by default; state it, since batching in the
		// writer, not Nagle's algorithm, is what coalesces small frames here.
		_ = tc.SetNoDelay(true)
	}
}
