package echo

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/granary-go/granary/internal/transport"
)

// idSize is the call id prefix of every body.
const idSize = 8

// ErrClosed is returned, possibly wrapped with the connection's error, by calls
// made after the client closed or that were pending when its connection ended.
var ErrClosed = errors.New("echo: client closed")

// Server echoes every frame it receives back on the same connection.
type Server struct {
	l *transport.Listener
}

// Listen starts a Server on addr (host:port; port 0 picks a free port).
func Listen(addr string, opts transport.Options) (*Server, error) {
	l, err := transport.Listen(addr, opts, func(*transport.Conn) transport.Handler { return &echoConn{} })
	if err != nil {
		return nil, err
	}
	return &Server{l: l}, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.l.Addr() }

// Close stops the server, closes its connections and waits for their goroutines.
func (s *Server) Close() error { return s.l.Close() }

// echoConn serves one connection. Its Marshaler is reused for every reply,
// which is safe because handler calls are sequential and Send copies the body
// before it returns.
type echoConn struct{ reply frame }

type frame struct{ body []byte }

func (f *frame) AppendTo(b []byte) ([]byte, error) { return append(b, f.body...), nil }

func (h *echoConn) HandleFrame(c *transport.Conn, body []byte) {
	h.reply.body = body
	_ = c.Send(&h.reply) // a failed send means the connection is closing
	h.reply.body = nil
}

func (h *echoConn) HandleClose(*transport.Conn, error) {}

// Client makes echo calls over one connection. It is safe for concurrent use.
type Client struct {
	conn   *transport.Conn
	nextID atomic.Uint64
	calls  sync.Pool // of *call

	mu struct {
		sync.Mutex
		pending map[uint64]*call
		err     error // set once the connection has ended
	}
}

// Stats returns the traffic counters of the client's connection, so that
// benchmarks can report how many frames each write carried.
func (c *Client) Stats() transport.Stats { return c.conn.Stats() }

// call is one outstanding request; it is its own Marshaler so that Send needs
// no allocation, and it is pooled with its reply channel.
type call struct {
	id      uint64
	payload []byte
	done    chan result // capacity 1: the answer, sent exactly once
}

type result struct {
	body []byte
	err  error
}

func (cl *call) AppendTo(b []byte) ([]byte, error) {
	b = binary.BigEndian.AppendUint64(b, cl.id)
	return append(b, cl.payload...), nil
}

// Dial connects a Client to the server at addr. ctx bounds only the dial.
func Dial(ctx context.Context, addr string, opts transport.Options) (*Client, error) {
	c := &Client{}
	c.mu.pending = make(map[uint64]*call)
	c.calls.New = func() any { return &call{done: make(chan result, 1)} }
	conn, err := transport.Dial(ctx, addr, opts, (*clientHandler)(c))
	if err != nil {
		return nil, err
	}
	c.conn = conn
	return c, nil
}

// Call sends payload and returns the echoed payload. The returned slice is the
// caller's. Call returns an error wrapping ErrClosed if the client is closed or
// its connection ends before the reply arrives, or the transport's error if the
// request cannot be queued.
func (c *Client) Call(payload []byte) ([]byte, error) {
	cl := c.calls.Get().(*call)
	cl.id = c.nextID.Add(1)
	cl.payload = payload

	c.mu.Lock()
	if err := c.mu.err; err != nil {
		c.mu.Unlock()
		c.release(cl)
		return nil, err
	}
	c.mu.pending[cl.id] = cl
	c.mu.Unlock()

	if err := c.conn.Send(cl); err != nil {
		c.mu.Lock()
		_, stillPending := c.mu.pending[cl.id]
		delete(c.mu.pending, cl.id)
		c.mu.Unlock()
		if !stillPending {
			<-cl.done // the connection ended meanwhile and has answered
		}
		c.release(cl)
		return nil, err
	}
	r := <-cl.done
	c.release(cl)
	return r.body, r.err
}

func (c *Client) release(cl *call) {
	cl.payload = nil
	c.calls.Put(cl)
}

// Close closes the connection, fails pending calls with ErrClosed and waits for
// the connection's goroutines. It may be called more than once.
func (c *Client) Close() error { return c.conn.Close() }

// clientHandler keeps the transport callbacks off Client's public method set.
type clientHandler Client

func (h *clientHandler) HandleFrame(_ *transport.Conn, body []byte) {
	c := (*Client)(h)
	if len(body) < idSize {
		return // not an answer to anything we sent
	}
	id := binary.BigEndian.Uint64(body)
	c.mu.Lock()
	cl := c.mu.pending[id]
	delete(c.mu.pending, id)
	c.mu.Unlock()
	if cl != nil {
		cl.done <- result{body: body[idSize:]}
	}
}

func (h *clientHandler) HandleClose(_ *transport.Conn, err error) {
	c := (*Client)(h)
	closedErr := ErrClosed
	if err != nil {
		closedErr = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	c.mu.Lock()
	c.mu.err = closedErr
	pending := c.mu.pending
	c.mu.pending = nil
	c.mu.Unlock()
	for _, cl := range pending {
		cl.done <- result{err: closedErr}
	}
}
