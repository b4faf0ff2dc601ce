package transport

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/granary-go/granary/internal/testcerts"
)

// bodyRef is a Marshaler that is reused, so the benchmarks measure the
// transport rather than interface conversions.
type bodyRef struct{ b []byte }

func (r *bodyRef) AppendTo(dst []byte) ([]byte, error) { return append(dst, r.b...), nil }

// inlineEcho answers each frame on the reader goroutine, reusing one Marshaler.
type inlineEcho struct{ out bodyRef }

func (h *inlineEcho) HandleFrame(c *Conn, b []byte) {
	h.out.b = b
	_ = c.Send(&h.out)
}

func (h *inlineEcho) HandleClose(*Conn, error) {}

// signal reports each frame on a channel.
type signal chan struct{}

func (s signal) HandleFrame(*Conn, []byte) { s <- struct{}{} }
func (s signal) HandleClose(*Conn, error)  {}

func BenchmarkSend(b *testing.B) {
	ncA, ncB := net.Pipe()
	c := newConn(ncA, defaultOptions(), signal(nil))
	c.start()
	go io.Copy(io.Discard, ncB)
	m := &bodyRef{b: bytes.Repeat([]byte("m"), 64)}
	b.ReportAllocs()
	b.SetBytes(int64(len(m.b)))
	for b.Loop() {
		for c.Send(m) == ErrSendQueueFull {
		}
	}
	b.StopTimer()
	c.Close()
	ncB.Close()
}

func BenchmarkRoundTripLoopback(b *testing.B) { benchRoundTrip(b, Options{}, Options{}) }

// BenchmarkRoundTripLoopbackTLS is BenchmarkRoundTripLoopback over TLS, so
// that the two in one run give what TLS costs a round trip.
func BenchmarkRoundTripLoopbackTLS(b *testing.B) {
	ca := testcerts.NewCA(b, "bench")
	benchRoundTrip(b, Options{TLS: ca.ServerConfig(b)}, Options{TLS: ca.ClientConfig()})
}

// benchRoundTrip measures one 48-byte frame echoed back, one at a time.
func benchRoundTrip(b *testing.B, server, client Options) {
	l, err := Listen("127.0.0.1:0", server, func(*Conn) Handler { return &inlineEcho{} })
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	replies := make(signal, 1)
	c, err := Dial(b.Context(), l.Addr().String(), client, replies)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	m := &bodyRef{b: bytes.Repeat([]byte("m"), 48)}
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Send(m); err != nil {
			b.Fatal(err)
		}
		<-replies
	}
}

// BenchmarkDial measures setting a connection up: TCP, the handshake, and
// TLS or the cluster secret's proofs.
func BenchmarkDial(b *testing.B) {
	ca := testcerts.NewCA(b, "bench")
	secret := bytes.Repeat([]byte("s"), 32)
	for _, tc := range []struct {
		name           string
		server, client Options
	}{
		{"plain", Options{}, Options{}},
		{"secret", Options{ClusterSecret: secret}, Options{ClusterSecret: secret}},
		{"tls", Options{TLS: ca.ServerConfig(b)}, Options{TLS: ca.ClientConfig()}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l, err := Listen("127.0.0.1:0", tc.server, func(*Conn) Handler { return &inlineEcho{} },
				WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			b.ReportAllocs()
			for b.Loop() {
				c, err := Dial(b.Context(), l.Addr().String(), tc.client, signal(nil))
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}

func BenchmarkFrameReader(b *testing.B) {
	stream := bytes.Repeat(frameStream(string(bytes.Repeat([]byte("f"), 56))), 1024)
	r := bytes.NewReader(stream)
	fr := frameReader{r: r, max: DefaultMaxFrameSize, slabSize: DefaultReadBufferSize}
	b.ReportAllocs()
	b.SetBytes(60)
	for b.Loop() {
		if _, err := fr.next(); err != nil {
			// Start over with fresh slabs, as a live reader would get.
			r.Reset(stream)
			fr = frameReader{r: r, max: DefaultMaxFrameSize, slabSize: DefaultReadBufferSize}
		}
	}
}

// BenchmarkMemoryPerConnection reports the heap and stacks, in bytes, one
// connection adds to the process in each state, over 50 connections at a
// time. Both ends run in this process: with a raw peer its side is a bare
// socket; for the established states the figure is per pair (both ends'
// Conns), since each end holds the same buffers.
func BenchmarkMemoryPerConnection(b *testing.B) {
	const conns = 50
	ca := testcerts.NewCA(b, "bench")
	plainDial := func(b *testing.B, l *Listener) io.Closer {
		c, err := Dial(b.Context(), l.Addr().String(), Options{}, signal(make(chan struct{}, 1)))
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		server Options
		open   func(b *testing.B, l *Listener) io.Closer // one connection, in its state once it returns
	}{
		{"handshaking", Options{}, func(b *testing.B, l *Listener) io.Closer {
			nc, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			return nc
		}},
		{"stalled-in-largest-frame", Options{}, func(b *testing.B, l *Listener) io.Closer {
			nc := rawDial(b, l, Options{})
			if _, err := nc.Write(append(header(DefaultMaxFrameSize), make([]byte, 100)...)); err != nil {
				b.Fatal(err)
			}
			return nc
		}},
		{"established-idle-pair", Options{}, func(b *testing.B, l *Listener) io.Closer {
			c := plainDial(b, l).(*Conn)
			roundTrip(b, c)
			return c
		}},
		{"established-idle-pair-tls", Options{TLS: ca.ServerConfig(b)}, func(b *testing.B, l *Listener) io.Closer {
			c, err := Dial(b.Context(), l.Addr().String(), Options{TLS: ca.ClientConfig()}, signal(make(chan struct{}, 1)))
			if err != nil {
				b.Fatal(err)
			}
			roundTrip(b, c)
			return c
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l, err := Listen("127.0.0.1:0", tc.server, func(*Conn) Handler { return &inlineEcho{} },
				WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			var perConn float64
			for b.Loop() {
				before := heapInUse()
				opened := make([]io.Closer, conns)
				for i := range opened {
					opened[i] = tc.open(b, l)
				}
				for l.Stats().Open != conns {
					runtime.Gosched()
				}
				// A benchmark may wait on the wall clock: the last bytes written
				// reach their readers meanwhile.
				time.Sleep(10 * time.Millisecond)
				perConn = float64(heapInUse()-before) / conns
				for _, c := range opened {
					c.Close()
				}
				for l.Stats().Open != 0 {
					runtime.Gosched()
				}
			}
			b.ReportMetric(perConn, "bytes/conn")
		})
	}
}

// roundTrip sends one frame on c and waits for its echo, so that both ends
// have allocated their buffers.
func roundTrip(b *testing.B, c *Conn) {
	if err := c.Send(&bodyRef{b: []byte("warm")}); err != nil {
		b.Fatal(err)
	}
	<-c.handler.(signal)
}
