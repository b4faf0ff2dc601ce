package transport

import (
	"bytes"
	"io"
	"net"
	"testing"
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

func BenchmarkRoundTripLoopback(b *testing.B) {
	l, err := Listen("127.0.0.1:0", Options{}, func(*Conn) Handler { return &inlineEcho{} })
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	replies := make(signal, 1)
	c, err := Dial(b.Context(), l.Addr().String(), Options{}, replies)
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
