package transport

import (
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
)

func TestConnectionLimit(t *testing.T) {
	const limit = 100
	logs, logger := newLogBuffer()
	l := listen(t, Options{Listener: ListenerOptions{MaxConnections: limit}},
		func(*Conn) Handler { return &echoHandler{} }, WithLogger(logger))
	clients := make([]*Conn, limit)
	replies := make([]*recorder, limit)
	for i := range clients {
		replies[i] = newRecorder()
		clients[i] = dial(t, l, Options{}, replies[i])
	}
	require.Equal(t, limit, l.Stats().Open)

	_, err := dialBounded(t, l, Options{}, newRecorder())
	assert.ErrorIs(t, err, ErrHandshakeAborted, "closed before the handshake")
	require.Eventually(t, func() bool { return l.Stats().RefusedLimit == 1 }, waitFor, time.Millisecond)
	assert.Contains(t, logs.String(), "connection limit reached")

	for i, c := range clients {
		msg := fmt.Sprintf("client %d still served", i)
		require.NoError(t, c.Send(body(msg)))
		assert.Equal(t, msg, string(replies[i].next(t)))
	}

	require.NoError(t, clients[0].Close())
	require.Eventually(t, func() bool { return l.Stats().Open == limit-1 }, waitFor, time.Millisecond)
	r := newRecorder()
	c := dial(t, l, Options{}, r)
	require.NoError(t, c.Send(body("a freed place")))
	assert.Equal(t, "a freed place", string(r.next(t)))
	assert.EqualValues(t, limit+1, l.Stats().Accepted)
}

// header announces a frame of n bytes.
func header(n int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }

// heapInUse returns the bytes of live heap objects and goroutine stacks
// after a collection. Two collections, so that what finalizers and the
// previous test's last goroutines let go is gone too.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}

// stalledPeerBound is the most a peer that announced the largest frame and
// then stalled may cost the listener under the defaults: one receive slab,
// plus 64 KiB for the connection itself (its structures, its two goroutines'
// stacks, its socket). The announced 4 MiB must not be allocated.
const stalledPeerBound = DefaultReadBufferSize + 64<<10

func TestStalledPeersAnnouncingTheLargestFrameHoldLittleMemory(t *testing.T) {
	const peers = 100
	servers := make(chan *Conn, peers)
	// echoHandler holds nothing of its own, so what grows is the transport's.
	l := listen(t, Options{}, func(c *Conn) Handler { servers <- c; return &echoHandler{} })
	before := heapInUse()

	raws := make([]net.Conn, peers)
	for i := range raws {
		raws[i] = rawDial(t, l, Options{})
		_, err := raws[i].Write(append(header(DefaultMaxFrameSize), make([]byte, 100)...))
		require.NoError(t, err)
	}
	for range peers {
		c := <-servers
		waitingInFrame(t, c, headerSize+100)
	}
	grown := heapInUse() - before
	t.Logf("%d stalled peers: heap and stacks grew by %d KiB, %d KiB per peer", peers, grown>>10, grown/peers>>10)
	assert.Less(t, grown, int64(peers*stalledPeerBound), "within %d KiB per stalled peer", stalledPeerBound>>10)
	assert.Equal(t, peers, l.Stats().Open)
	runtime.KeepAlive(raws)
}

func TestLargeFramesStillArrive(t *testing.T) {
	// The buffer of a frame larger than a slab grows as the frame arrives;
	// a frame of the largest size still arrives whole.
	r := newRecorder()
	l := listen(t, Options{}, func(*Conn) Handler { return r })
	c := dial(t, l, Options{}, newRecorder())
	big := make([]byte, DefaultMaxFrameSize)
	for i := range big {
		big[i] = byte(i * 7)
	}
	require.NoError(t, c.Send(body(big)))
	require.NoError(t, c.Send(body("next")))
	assert.Equal(t, big, r.next(t))
	assert.Equal(t, "next", string(r.next(t)))
}

func TestRejectionLogsAreThrottled(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	logs, logger := newLogBuffer()
	opts := Options{MaxFrameSize: 16, Listener: ListenerOptions{LogBurst: 3, LogInterval: time.Second}}
	l := listen(t, opts, func(*Conn) Handler { return newRecorder() }, WithLogger(logger), WithClock(fake))
	offend := func(n int) {
		for range n {
			raw := rawDial(t, l, opts)
			_, err := raw.Write(header(17))
			require.NoError(t, err)
		}
	}
	offend(20)
	require.Eventually(t, func() bool { return l.Stats().FrameTooLarge == 20 }, waitFor, time.Millisecond)
	const line = `msg="transport: connection closed: frame too large"`
	assert.Equal(t, 3, strings.Count(logs.String(), line), "the burst, and no more")
	assert.EqualValues(t, 17, l.Stats().LogSuppressed)

	fake.Advance(time.Second)
	offend(1)
	require.Eventually(t, func() bool { return l.Stats().FrameTooLarge == 21 }, waitFor, time.Millisecond)
	require.Eventually(t, func() bool { return strings.Count(logs.String(), line) == 4 }, waitFor, time.Millisecond)
	assert.Contains(t, logs.String(), "suppressed=17", "the next line says how many were dropped")
	assert.Contains(t, logs.String(), "level=WARN")
}

func TestTruncatedFrameIsCountedAndLogged(t *testing.T) {
	logs, logger := newLogBuffer()
	l := listen(t, Options{}, func(*Conn) Handler { return newRecorder() }, WithLogger(logger))
	raw := rawDial(t, l, Options{})
	_, err := raw.Write(append(header(10), "abc"...))
	require.NoError(t, err)
	require.NoError(t, raw.Close())
	require.Eventually(t, func() bool { return l.Stats().Truncated == 1 }, waitFor, time.Millisecond)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "stream ended inside a frame") }, waitFor, time.Millisecond)
	assert.Contains(t, logs.String(), "level=INFO")
	assert.Contains(t, logs.String(), "peer=127.0.0.1:")
}

// One source address may hold MaxConnectionsPerSource connections: one
// more is closed before its handshake and counted, the others are still
// served, and a freed place takes a new one.
func TestConnectionLimitPerSourceAddress(t *testing.T) {
	const limit = 3
	logs, logger := newLogBuffer()
	l := listen(t, Options{Listener: ListenerOptions{MaxConnectionsPerSource: limit}},
		func(*Conn) Handler { return &echoHandler{} }, WithLogger(logger))
	clients := make([]*Conn, limit)
	replies := make([]*recorder, limit)
	for i := range clients {
		replies[i] = newRecorder()
		clients[i] = dial(t, l, Options{}, replies[i])
	}
	_, err := dialBounded(t, l, Options{}, newRecorder())
	assert.ErrorIs(t, err, ErrHandshakeAborted, "closed before the handshake")
	require.Eventually(t, func() bool { return l.Stats().RefusedPerSource == 1 }, waitFor, time.Millisecond)
	assert.Zero(t, l.Stats().RefusedLimit)
	assert.Contains(t, logs.String(), "this source address holds its limit of connections")
	for i, c := range clients {
		msg := fmt.Sprintf("client %d still served", i)
		require.NoError(t, c.Send(body(msg)))
		assert.Equal(t, msg, string(replies[i].next(t)))
	}

	require.NoError(t, clients[0].Close())
	require.Eventually(t, func() bool { return l.Stats().Open == limit-1 }, waitFor, time.Millisecond)
	r := newRecorder()
	c := dial(t, l, Options{}, r)
	require.NoError(t, c.Send(body("a freed place")))
	assert.Equal(t, "a freed place", string(r.next(t)))
}
