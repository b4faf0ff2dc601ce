package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRoundTripBothDirections(t *testing.T) {
	// Small slabs and a frame larger than a slab exercise slab replacement and
	// the own-allocation path.
	opts := Options{ReadBufferSize: 512}
	serverSide := newRecorder()
	var serverConn *Conn
	accepted := make(chan struct{})
	l := listen(t, opts, func(c *Conn) Handler {
		serverConn = c
		close(accepted)
		return serverSide
	})
	clientSide := newRecorder()
	client := dial(t, l, opts, clientSide)
	<-accepted

	payload := func(i int) []byte {
		switch i % 10 {
		case 1:
			return bytes.Repeat([]byte{byte(i)}, 2000) // larger than a slab
		default:
			return []byte(fmt.Sprintf("frame %d %s", i, bytes.Repeat([]byte("x"), i%97)))
		}
	}
	const n = 1000
	for i := range n {
		require.NoError(t, client.Send(body(payload(i))))
		require.NoError(t, serverConn.Send(body(payload(n-i))))
	}
	var gotServer, gotClient [][]byte
	for range n {
		gotServer = append(gotServer, serverSide.next(t))
		gotClient = append(gotClient, clientSide.next(t))
	}
	// Every body is checked only after all arrived: retained bodies must not be
	// overwritten by later reads.
	for i := range n {
		require.Equal(t, payload(i), gotServer[i], "client->server frame %d", i)
		require.Equal(t, payload(n-i), gotClient[i], "server->client frame %d", i)
		require.Equal(t, len(gotServer[i]), cap(gotServer[i]), "a body's capacity must end at the body")
	}
	st := client.Stats()
	assert.Equal(t, uint64(n), st.FramesQueued)
	assert.Equal(t, uint64(n), st.FramesRead)
	require.Eventually(t, func() bool { return client.Stats().FramesWritten == n }, waitFor, time.Millisecond)
	assert.Equal(t, client.LocalAddr().String(), serverConn.RemoteAddr().String())
	assert.Equal(t, client.RemoteAddr().String(), serverConn.LocalAddr().String())
}

func TestWritesAreBatched(t *testing.T) {
	gate := newGate()
	peer := newRecorder()
	c, _ := pipePair(t, Options{}, gate, newRecorder(), peer)

	require.NoError(t, c.Send(body("first")))
	gate.waitEntered(t) // the writer now holds "first" and is blocked writing it
	const queued = 99
	for i := range queued {
		require.NoError(t, c.Send(body(fmt.Sprintf("queued %d", i))))
	}
	gate.release()

	assert.Equal(t, "first", string(peer.next(t)))
	for i := range queued {
		assert.Equal(t, fmt.Sprintf("queued %d", i), string(peer.next(t)))
	}
	require.Eventually(t, func() bool { return c.Stats().FramesWritten == queued+1 }, waitFor, time.Millisecond)
	st := c.Stats()
	assert.Equal(t, uint64(2), st.BatchesWritten, "one write for the first frame, one for everything queued behind it")
	assert.Equal(t, uint64(queued+1), st.FramesQueued)
}

func TestSendRejectsOversizeFrame(t *testing.T) {
	peer := newRecorder()
	c, _ := pipePair(t, Options{MaxFrameSize: 16}, nil, newRecorder(), peer)

	err := c.Send(body(make([]byte, 17)))
	require.ErrorIs(t, err, ErrFrameTooLarge)
	assert.Zero(t, c.Stats().FramesQueued)

	require.NoError(t, c.Send(body("sixteen bytes!!!")))
	assert.Equal(t, "sixteen bytes!!!", string(peer.next(t)), "the rejected frame left nothing behind")
	assert.NoError(t, c.Err())
}

// failing appends part of a frame, then fails.
type failing struct{ err error }

func (f failing) AppendTo(b []byte) ([]byte, error) { return append(b, "half a frame"...), f.err }

func TestSendReturnsTheMarshalersErrorAndQueuesNothing(t *testing.T) {
	peer := newRecorder()
	c, _ := pipePair(t, Options{}, nil, newRecorder(), peer)

	boom := errors.New("cannot encode")
	require.Equal(t, boom, c.Send(failing{boom}), "returned as it is")
	assert.Zero(t, c.Stats().FramesQueued)

	require.NoError(t, c.Send(body("next")))
	assert.Equal(t, "next", string(peer.next(t)), "the failed frame left nothing behind")
	assert.NoError(t, c.Err(), "and the connection stays open")
}

func TestSendQueueIsBounded(t *testing.T) {
	gate := newGate()
	peer := newRecorder()
	c, _ := pipePair(t, Options{MaxPendingBytes: 64}, gate, newRecorder(), peer)

	require.NoError(t, c.Send(body("in flight")))
	gate.waitEntered(t)
	accepted := 0
	for {
		err := c.Send(body("0123456789"))
		if err != nil {
			require.ErrorIs(t, err, ErrSendQueueFull)
			break
		}
		accepted++
		require.Less(t, accepted, 10, "the queue never filled")
	}
	assert.Equal(t, 5, accepted, "14-byte frames until 64 bytes are pending")

	gate.release()
	assert.Equal(t, "in flight", string(peer.next(t)))
	for range accepted {
		assert.Equal(t, "0123456789", string(peer.next(t)))
	}
	require.Eventually(t, func() bool { return c.Send(body("later")) == nil }, waitFor, time.Millisecond)
	assert.Equal(t, "later", string(peer.next(t)))
}

func TestReceiveOversizeFrameClosesOnlyThatConnection(t *testing.T) {
	opts := Options{MaxFrameSize: 16}
	serverSides := make(chan *recorder, 2)
	l := listen(t, opts, func(c *Conn) Handler {
		r := newRecorder()
		r.onFrame = func(c *Conn, b []byte) { _ = c.Send(body(b)) }
		serverSides <- r
		return r
	})

	raw := rawDial(t, l, opts)
	_, err := raw.Write([]byte{0, 0, 0, 17})
	require.NoError(t, err)
	bad := <-serverSides
	require.ErrorIs(t, bad.closeErr(t), ErrFrameTooLarge)
	require.NoError(t, raw.SetReadDeadline(time.Now().Add(waitFor)))
	_, err = raw.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the server closed the offending connection")

	good := newRecorder()
	c := dial(t, l, opts, good)
	require.NoError(t, c.Send(body("still serving")))
	assert.Equal(t, "still serving", string(good.next(t)))
}

func TestMalformedStreams(t *testing.T) {
	for name, tc := range map[string]struct {
		stream []byte
		want   error
	}{
		"truncated body":   {[]byte{0, 0, 0, 10, 'a', 'b', 'c'}, io.ErrUnexpectedEOF},
		"truncated prefix": {[]byte{0, 0}, io.ErrUnexpectedEOF},
		"huge prefix":      {[]byte{0xff, 0xff, 0xff, 0xff, 'a'}, ErrFrameTooLarge},
		"clean end":        {[]byte{0, 0, 0, 1, 'a'}, io.EOF},
	} {
		t.Run(name, func(t *testing.T) {
			server := make(chan *recorder, 1)
			l := listen(t, Options{}, func(c *Conn) Handler {
				r := newRecorder()
				server <- r
				return r
			})
			raw := rawDial(t, l, Options{})
			_, err := raw.Write(tc.stream)
			require.NoError(t, err)
			require.NoError(t, raw.Close())
			r := <-server
			err = r.closeErr(t)
			require.ErrorIs(t, err, tc.want)
			if tc.want == io.EOF {
				assert.Equal(t, "a", string(r.next(t)))
			}
		})
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	local, remote := newRecorder(), newRecorder()
	c, peer := pipePair(t, Options{}, nil, local, remote)

	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	select {
	case <-c.Done():
	default:
		t.Fatal("Done is open after Close returned")
	}
	assert.NoError(t, local.closeErr(t))
	assert.EqualValues(t, 1, local.closes.Load())
	assert.NoError(t, c.Err())
	assert.ErrorIs(t, c.Send(body("x")), ErrClosed)

	assert.ErrorIs(t, remote.closeErr(t), io.EOF, "the peer sees the close")
	assert.ErrorIs(t, peer.Err(), io.EOF)
	<-peer.Done()
	assert.ErrorIs(t, peer.Send(body("x")), ErrClosed)
}

func TestCloseFromHandler(t *testing.T) {
	local := newRecorder()
	closeReturned := make(chan struct{})
	local.onFrame = func(c *Conn, b []byte) {
		c.Close()
		c.Close()
		close(closeReturned)
	}
	c, peer := pipePair(t, Options{}, nil, local, newRecorder())
	require.NoError(t, peer.Send(body("close please")))

	select {
	case <-closeReturned:
	case <-time.After(waitFor):
		t.Fatal("Close inside HandleFrame did not return")
	}
	assert.NoError(t, local.closeErr(t))
	<-c.Done()
	c.Close() // and again from outside, after the fact
	assert.EqualValues(t, 1, local.closes.Load())
}

// closingHandler closes its connection from inside HandleClose.
type closingHandler struct{ recorder }

func (h *closingHandler) HandleClose(c *Conn, err error) {
	c.Close()
	h.recorder.HandleClose(c, err)
}

func TestCloseFromHandleClose(t *testing.T) {
	h := &closingHandler{*newRecorder()}
	c, peer := pipePair(t, Options{}, nil, h, newRecorder())
	peer.Close()
	assert.ErrorIs(t, h.closeErr(t), io.EOF)
	<-c.Done()
}

func TestCloseWithFramesInFlight(t *testing.T) {
	gate := newGate()
	local := newRecorder()
	c, _ := pipePair(t, Options{}, gate, local, newRecorder())
	require.NoError(t, c.Send(body("stuck")))
	gate.waitEntered(t)
	for range 100 {
		require.NoError(t, c.Send(body("queued behind it")))
	}
	require.NoError(t, c.Close(), "Close must not wait for frames that cannot be written")
	assert.NoError(t, local.closeErr(t))
	assert.Zero(t, c.Stats().FramesWritten)
}

func TestConcurrentSendAndClose(t *testing.T) {
	l := listen(t, Options{}, func(*Conn) Handler { return &echoHandler{} })
	client := newRecorder()
	client.drop = true
	c := dial(t, l, Options{}, client)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				if err := c.Send(body("payload")); err != nil {
					assert.True(t, errors.Is(err, ErrClosed) || errors.Is(err, ErrSendQueueFull), "%v", err)
					if errors.Is(err, ErrClosed) {
						return
					}
				}
			}
		})
	}
	require.Eventually(t, func() bool { return c.Stats().FramesRead > 1000 }, waitFor, time.Millisecond)
	require.NoError(t, c.Close())
	wg.Wait()
	assert.NoError(t, client.closeErr(t))
}

func TestListenerCloseClosesConnections(t *testing.T) {
	serverClosed := make(chan error, 3)
	l, err := Listen("127.0.0.1:0", Options{}, func(*Conn) Handler { return &echoHandler{closed: serverClosed} })
	require.NoError(t, err)
	var clients []*recorder
	for range 3 {
		r := newRecorder()
		c := dial(t, l, Options{}, r)
		require.NoError(t, c.Send(body("hello")))
		assert.Equal(t, "hello", string(r.next(t)), "served before the close")
		clients = append(clients, r)
	}
	require.NoError(t, l.Close())
	require.NoError(t, l.Close())
	for range 3 {
		select {
		case err := <-serverClosed:
			assert.NoError(t, err, "a local close")
		default:
			t.Fatal("Listener.Close returned before a connection's HandleClose")
		}
	}
	for _, r := range clients {
		assert.ErrorIs(t, r.closeErr(t), io.EOF)
	}
	_, err = net.Dial("tcp", l.Addr().String())
	assert.Error(t, err, "no longer accepting")
}

func TestListenerRefusesWhenAcceptReturnsNil(t *testing.T) {
	l := listen(t, Options{}, func(*Conn) Handler { return nil })
	r := newRecorder()
	dial(t, l, Options{}, r)
	assert.ErrorIs(t, r.closeErr(t), io.EOF)
}

func TestListenerCloseFromHandler(t *testing.T) {
	var l *Listener
	closed := make(chan struct{})
	l = listen(t, Options{}, func(*Conn) Handler {
		r := newRecorder()
		r.onFrame = func(*Conn, []byte) {
			l.Close()
			close(closed)
		}
		return r
	})
	c := dial(t, l, Options{}, newRecorder())
	require.NoError(t, c.Send(body("shut down")))
	select {
	case <-closed:
	case <-time.After(waitFor):
		t.Fatal("Listener.Close from a handler did not return")
	}
}

func TestDialErrors(t *testing.T) {
	_, err := Dial(t.Context(), "127.0.0.1:1", Options{}, nil)
	assert.Error(t, err)
	_, err = Dial(t.Context(), "127.0.0.1:1", Options{MaxFrameSize: -1}, newRecorder())
	assert.ErrorIs(t, err, ErrInvalidOptions)
	_, err = Listen("127.0.0.1:0", Options{}, nil)
	assert.Error(t, err)
}

func TestSendDoesNotAllocate(t *testing.T) {
	ncA, ncB := net.Pipe()
	c := newConn(ncA, defaultOptions(), newRecorder())
	c.start()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		buf := make([]byte, 64<<10)
		for {
			if _, err := ncB.Read(buf); err != nil {
				return
			}
		}
	}()
	msg := body(bytes.Repeat([]byte("m"), 60))
	var m Marshaler = msg // converted once, outside the measurement
	allocs := testing.AllocsPerRun(10_000, func() {
		if err := c.Send(m); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
	c.Close()
	ncB.Close()
	<-drained
}

func TestFrameLengthPrefix(t *testing.T) {
	ncA, ncB := net.Pipe()
	c := newConn(ncA, defaultOptions(), newRecorder())
	c.start()
	defer c.Close()
	require.NoError(t, c.Send(body("abc")))
	got := make([]byte, 7)
	_, err := io.ReadFull(ncB, got)
	require.NoError(t, err)
	assert.Equal(t, uint32(3), binary.BigEndian.Uint32(got))
	assert.Equal(t, "abc", string(got[4:]))
	ncB.Close()
}

func TestBurstBuffersAreReleased(t *testing.T) {
	gate := newGate()
	peer := newRecorder()
	c, _ := pipePair(t, Options{WriteBufferSize: 64}, gate, newRecorder(), peer)
	pendingCap := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return cap(c.mu.pending)
	}

	require.NoError(t, c.Send(body("first")))
	gate.waitEntered(t)
	frame := bytes.Repeat([]byte("b"), 100)
	for range 100 {
		require.NoError(t, c.Send(body(frame)))
	}
	require.Greater(t, pendingCap(), 16*64, "the burst grew the pending buffer")
	gate.release()
	for range 101 {
		peer.next(t)
	}
	// Small batches, one at a time, until both send buffers have been replaced.
	for range 3 * shrinkAfterSmallBatches {
		require.NoError(t, c.Send(body("small")))
		peer.next(t)
	}
	require.Eventually(t, func() bool { return c.Stats().FramesWritten == c.Stats().FramesQueued }, waitFor, time.Millisecond)
	assert.LessOrEqual(t, pendingCap(), 16*64, "a past burst no longer pins memory")
}

// growthChecker is a stream that checks, at every read, that the reader's
// buffer is no larger than a slab or twice what has arrived.
type growthChecker struct {
	t       *testing.T
	fr      *frameReader
	stream  []byte
	arrived int
	largest int
}

func (g *growthChecker) Read(p []byte) (int, error) {
	if size := len(g.fr.buf); size > max(g.fr.slabSize, 2*g.arrived) {
		g.t.Fatalf("buffer of %d bytes after %d arrived", size, g.arrived)
	}
	g.largest = max(g.largest, len(g.fr.buf))
	if g.arrived == len(g.stream) {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 1000)], g.stream[g.arrived:])
	g.arrived += n
	return n, nil
}

func TestFrameBufferGrowsWithWhatArrives(t *testing.T) {
	const size = 1 << 20
	payload := bytes.Repeat([]byte("g"), size)
	fr := &frameReader{max: size, slabSize: 4 << 10}
	g := &growthChecker{t: t, fr: fr, stream: append(frameStream(string(payload)), frameStream("after")...)}
	fr.r = g
	got, err := fr.next()
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	assert.Equal(t, headerSize+size, g.largest, "and never beyond the announced frame")
	next, err := fr.next()
	require.NoError(t, err)
	assert.Equal(t, "after", string(next))

	// Stalled halfway: the buffer is about what arrived, not the announced size.
	fr = &frameReader{max: size, slabSize: 4 << 10}
	g = &growthChecker{t: t, fr: fr, stream: frameStream(string(payload))[:size/8]}
	fr.r = g
	_, err = fr.next()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.LessOrEqual(t, g.largest, size/4)
}
