package transport

import (
	"bytes"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
)

// accepted returns an accept function that hands each connection to the
// test and gives it a recorder.
func accepted() (func(*Conn) Handler, <-chan *Conn) {
	conns := make(chan *Conn, 16)
	return func(c *Conn) Handler { conns <- c; return newRecorder() }, conns
}

// armed waits until n callbacks are pending on fake: the watchdogs of the
// connections under test, which start just after accept returns.
func armed(t *testing.T, fake *clock.Fake, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return fake.Pending() == n }, waitFor, time.Millisecond)
}

// waitingInFrame waits until c's reader has read n bytes and waits for the
// rest of a frame, which is when the read rule looks at it.
func waitingInFrame(t *testing.T, c *Conn, n uint64) {
	t.Helper()
	require.Eventually(t, func() bool {
		got, state := c.fr.progress.load()
		return got == n && state == readerInFrame
	}, waitFor, time.Millisecond)
}

func TestTricklingFrameIsClosed(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	opts := Options{MinReadRate: 100, ReadRateWindow: time.Second}
	accept, conns := accepted()
	logs, logger := newLogBuffer()
	l := listen(t, opts, accept, WithClock(fake), WithLogger(logger))

	slow := rawDial(t, l, opts) // 1 byte per step: 4 bytes/s
	slowServer := <-conns
	fast := rawDial(t, l, opts) // 50 bytes per step: 200 bytes/s, above the minimum
	fastServer := <-conns
	between := rawDial(t, l, opts) // one whole frame, then quiet between frames
	betweenServer := <-conns
	armed(t, fake, 3)

	for _, raw := range []net.Conn{slow, fast} {
		_, err := raw.Write(header(10_000))
		require.NoError(t, err)
	}
	_, err := between.Write(append(header(3), "one"...))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return betweenServer.Stats().FramesRead == 1 }, waitFor, time.Millisecond)

	const step = 250 * time.Millisecond // the watchdog's tick: a quarter of the window
	var sent uint64 = headerSize
	for steps := 0; slowServer.Err() == nil; steps++ {
		require.Less(t, steps, 40, "the trickling connection was never closed")
		_, err := slow.Write([]byte{'s'})
		require.NoError(t, err)
		_, err = fast.Write(bytes.Repeat([]byte{'f'}, 50))
		require.NoError(t, err)
		sent++
		waitingInFrame(t, slowServer, sent)
		waitingInFrame(t, fastServer, headerSize+50*(sent-headerSize))
		fake.Advance(step)
	}
	assert.ErrorIs(t, slowServer.Err(), ErrReadTooSlow)
	assert.NoError(t, fastServer.Err(), "a frame arriving fast enough is left alone")
	assert.NoError(t, betweenServer.Err(), "time between frames does not count")
	require.Eventually(t, func() bool { return l.Stats().ReadTooSlow == 1 }, waitFor, time.Millisecond)
	assert.Contains(t, logs.String(), "frame sent too slowly")

	require.NoError(t, slow.SetReadDeadline(time.Now().Add(waitFor)))
	_, err = io.ReadAll(slow)
	if err != nil {
		assert.True(t, isConnectionLost(err), "the peer sees the close: %v", err)
	}
}

// idler is a recorder that says whether it has work in flight.
type idler struct {
	*recorder
	busy atomic.Bool
}

func (i *idler) Idle() bool { return !i.busy.Load() }

func TestIdleConnectionIsClosed(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	const idleTimeout = 10 * time.Second
	const tick = idleTimeout / ticksPerRule
	h := &idler{recorder: newRecorder()}
	servers := make(chan *Conn, 1)
	logs, logger := newLogBuffer()
	l := listen(t, Options{Listener: ListenerOptions{IdleTimeout: idleTimeout}},
		func(c *Conn) Handler { servers <- c; return h }, WithClock(fake), WithLogger(logger))
	client := newRecorder()
	c := dial(t, l, Options{}, client)
	server := <-servers
	armed(t, fake, 1)

	// Busy: however long no frame moves, the connection stays.
	h.busy.Store(true)
	fake.Advance(3 * idleTimeout)
	require.NoError(t, server.Err())

	// Idle, but frames keep moving.
	h.busy.Store(false)
	for range 8 {
		require.NoError(t, c.Send(body("activity")))
		h.next(t)
		fake.Advance(idleTimeout / 2)
		require.NoError(t, server.Err(), "a frame within the timeout keeps it open")
	}

	// Idle and quiet: closed once the timeout has passed, noticed within a tick.
	fake.Advance(idleTimeout)
	for range 2 {
		if server.Err() == nil {
			fake.Advance(tick)
		}
	}
	assert.ErrorIs(t, server.Err(), ErrIdleTimeout)
	assert.ErrorIs(t, h.closeErr(t), ErrIdleTimeout, "the handler is told why")
	assert.ErrorIs(t, client.closeErr(t), io.EOF, "the client sees the close")
	require.Eventually(t, func() bool { return l.Stats().IdleClosed == 1 }, waitFor, time.Millisecond)
	assert.Contains(t, logs.String(), "level=INFO")
	assert.Contains(t, logs.String(), "connection closed: idle")
}

func TestKeepaliveHeartbeatsKeepAQuietLinkOpen(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	opts := Options{KeepaliveInterval: time.Second, KeepaliveTimeout: 3 * time.Second}
	servers := make(chan *Conn, 1)
	serverSide := newRecorder()
	l := listen(t, opts, func(c *Conn) Handler { servers <- c; return serverSide }, WithClock(fake))
	clientSide := newRecorder()
	client, err := Dial(t.Context(), l.Addr().String(), opts, clientSide, WithClock(fake))
	require.NoError(t, err)
	defer client.Close()
	server := <-servers
	armed(t, fake, 2)

	for range 40 { // 10 s of fake time, no frame from either end
		fake.Advance(250 * time.Millisecond)
		require.Eventually(t, func() bool {
			return client.Stats().HeartbeatsReceived == server.Stats().HeartbeatsSent &&
				server.Stats().HeartbeatsReceived == client.Stats().HeartbeatsSent
		}, waitFor, time.Millisecond, "every heartbeat arrives")
	}
	require.NoError(t, client.Err())
	require.NoError(t, server.Err())
	cs, ss := client.Stats(), server.Stats()
	assert.GreaterOrEqual(t, cs.HeartbeatsSent, uint64(8), "about one per interval")
	assert.LessOrEqual(t, cs.HeartbeatsSent, uint64(10))
	assert.Equal(t, cs.HeartbeatsSent, ss.HeartbeatsReceived)
	assert.Zero(t, cs.FramesQueued+ss.FramesRead, "heartbeats are not frames")
	assert.Empty(t, serverSide.frames, "and never reach the handler")
	assert.Empty(t, clientSide.frames)

	// Frames count as traffic: no heartbeat while they flow.
	before := client.Stats().HeartbeatsSent
	for range 8 {
		require.NoError(t, client.Send(body("busy")))
		serverSide.next(t)
		fake.Advance(250 * time.Millisecond)
	}
	assert.LessOrEqual(t, client.Stats().HeartbeatsSent-before, uint64(1))
}

func TestKeepaliveTimeoutClosesASilentPeer(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	opts := Options{KeepaliveInterval: time.Second, KeepaliveTimeout: 3 * time.Second}
	accept, conns := accepted()
	logs, logger := newLogBuffer()
	l := listen(t, opts, accept, WithClock(fake), WithLogger(logger))
	raw := rawDial(t, l, opts) // reads, but never sends a heartbeat
	server := <-conns
	armed(t, fake, 1)

	heartbeats := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(raw) // until the listener closes it
		heartbeats <- b
	}()
	for steps := 0; server.Err() == nil; steps++ {
		require.Less(t, steps, 40, "the silent peer was never closed")
		fake.Advance(250 * time.Millisecond)
		require.Eventually(t, func() bool {
			st := server.Stats()
			return server.Err() != nil || st.BytesWritten == headerSize*st.HeartbeatsSent
		}, waitFor, time.Millisecond, "each heartbeat is written before time moves on")
	}
	assert.ErrorIs(t, server.Err(), ErrKeepaliveTimeout)
	assert.GreaterOrEqual(t, fake.Now().Sub(time.Unix(0, 0)), opts.KeepaliveTimeout, "not before the timeout")
	got := <-heartbeats
	assert.NotEmpty(t, got, "the listener sent heartbeats meanwhile")
	assert.Equal(t, make([]byte, len(got)), got, "each an empty frame")
	require.Eventually(t, func() bool { return l.Stats().KeepaliveTimeouts == 1 }, waitFor, time.Millisecond)
	assert.True(t, strings.Contains(logs.String(), "keepalive timeout"))
}

func TestHeartbeatsFromThePeerAreConsumed(t *testing.T) {
	r := newRecorder()
	conns := make(chan *Conn, 1)
	l := listen(t, Options{}, func(c *Conn) Handler { conns <- c; return r })
	raw := rawDial(t, l, Options{})
	server := <-conns
	_, err := raw.Write(append(append(header(0), header(0)...), append(header(4), "real"...)...))
	require.NoError(t, err)
	assert.Equal(t, "real", string(r.next(t)))
	assert.EqualValues(t, 2, server.Stats().HeartbeatsReceived)
	assert.EqualValues(t, 1, server.Stats().FramesRead)
}

func TestSendRefusesAnEmptyBody(t *testing.T) {
	peer := newRecorder()
	c, _ := pipePair(t, Options{}, nil, newRecorder(), peer)
	assert.ErrorIs(t, c.Send(body(nil)), ErrEmptyFrame)
	assert.Zero(t, c.Stats().FramesQueued)
	require.NoError(t, c.Send(body("x")))
	assert.Equal(t, "x", string(peer.next(t)), "nothing was left behind")
}
