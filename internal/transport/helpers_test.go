package transport

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// quiet is the logger of listeners whose logs a test does not read.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// waitFor bounds every wait in these tests, so a bug fails a test instead of
// hanging it.
const waitFor = 5 * time.Second

// body is a Marshaler for raw bytes.
type body []byte

func (b body) AppendTo(dst []byte) ([]byte, error) { return append(dst, b...), nil }

// recorder is a Handler that reports what it sees on channels.
type recorder struct {
	frames  chan []byte
	closed  chan error
	closes  atomic.Int32
	onFrame func(c *Conn, b []byte) // optional, runs before the frame is reported
	drop    bool                    // do not report frames
}

func newRecorder() *recorder {
	return &recorder{frames: make(chan []byte, 100_000), closed: make(chan error, 2)}
}

func (r *recorder) HandleFrame(c *Conn, b []byte) {
	if r.onFrame != nil {
		r.onFrame(c, b)
	}
	if !r.drop {
		r.frames <- b
	}
}

func (r *recorder) HandleClose(c *Conn, err error) {
	r.closes.Add(1)
	r.closed <- err
}

func (r *recorder) next(t *testing.T) []byte {
	t.Helper()
	select {
	case b := <-r.frames:
		return b
	case <-time.After(waitFor):
		t.Fatal("no frame arrived")
		return nil
	}
}

func (r *recorder) closeErr(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.closed:
		return err
	case <-time.After(waitFor):
		t.Fatal("HandleClose was not called")
		return nil
	}
}

func defaultOptions() Options {
	var o Options
	o.EnsureDefaults()
	return o
}

// pipePair returns two started connections joined by net.Pipe, the first one's
// writes passing through gate (when not nil).
func pipePair(t *testing.T, opts Options, gate *gatedConn, a, b Handler) (*Conn, *Conn) {
	t.Helper()
	opts.EnsureDefaults()
	require.NoError(t, opts.Validate())
	ncA, ncB := net.Pipe()
	var wrapped net.Conn = ncA
	if gate != nil {
		gate.Conn = ncA
		wrapped = gate
	}
	ca, cb := newConn(wrapped, opts, a), newConn(ncB, opts, b)
	ca.start()
	cb.start()
	t.Cleanup(func() { ca.Close(); cb.Close() })
	return ca, cb
}

// gatedConn holds every Write until open is closed, announcing each Write on
// entered, so a test knows exactly when the writer is blocked mid-write.
type gatedConn struct {
	net.Conn
	entered  chan struct{}
	open     chan struct{}
	openOnce sync.Once
	closed   chan struct{}
	once     sync.Once
}

func newGate() *gatedConn {
	return &gatedConn{entered: make(chan struct{}, 1000), open: make(chan struct{}), closed: make(chan struct{})}
}

func (g *gatedConn) release() { g.openOnce.Do(func() { close(g.open) }) }

func (g *gatedConn) Write(b []byte) (int, error) {
	g.entered <- struct{}{}
	select {
	case <-g.open:
	case <-g.closed:
		return 0, net.ErrClosed
	}
	return g.Conn.Write(b)
}

func (g *gatedConn) Close() error {
	g.once.Do(func() { close(g.closed) })
	return g.Conn.Close()
}

func (g *gatedConn) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(waitFor):
		t.Fatal("the writer never started a write")
	}
}

// listen starts a listener on loopback whose connections get handlers from
// newHandler, and closes it when the test ends.
func listen(t *testing.T, opts Options, newHandler func(*Conn) Handler, o ...Option) *Listener {
	t.Helper()
	o = append([]Option{WithLogger(quiet)}, o...)
	l, err := Listen("127.0.0.1:0", opts, newHandler, o...)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// logBuffer collects a logger's lines for a test to read.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newLogBuffer() (*logBuffer, *slog.Logger) {
	b := &logBuffer{}
	return b, slog.New(slog.NewTextHandler(b, nil))
}

// rawDial connects to l and runs a client's handshake by hand, returning the
// socket, so that a test can then write what a well-behaved peer never would.
func rawDial(tb testing.TB, l *Listener, opts Options) net.Conn {
	tb.Helper()
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(tb, err)
	tb.Cleanup(func() { nc.Close() })
	require.NoError(tb, opts.prepare(false))
	h := handshake{rw: nc, local: opts.Identity, secret: opts.ClusterSecret, token: opts.Token}
	_, err = h.dial()
	require.NoError(tb, err)
	return nc
}

func dial(t *testing.T, l *Listener, opts Options, h Handler) *Conn {
	t.Helper()
	c, err := Dial(t.Context(), l.Addr().String(), opts, h)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// echoHandler sends every frame back on its connection.
type echoHandler struct{ closed chan error }

func (h *echoHandler) HandleFrame(c *Conn, b []byte) { _ = c.Send(body(b)) }

func (h *echoHandler) HandleClose(c *Conn, err error) {
	if h.closed != nil {
		h.closed <- err
	}
}
