package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// chunkedReader returns at most size bytes per Read, so the fuzzer explores
// frames split at every possible point.
type chunkedReader struct {
	r    io.Reader
	size int
}

func (c chunkedReader) Read(p []byte) (int, error) {
	return c.r.Read(p[:min(len(p), c.size)])
}

func frameStream(bodies ...string) []byte {
	var b []byte
	for _, s := range bodies {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return b
}

// FuzzFrameReader feeds arbitrary streams, in arbitrary read sizes, to the frame
// decoder: it must never panic, never return a body above the limit, return
// exactly the frames in the stream, and end with the right error.
func FuzzFrameReader(f *testing.F) {
	f.Add(uint8(1), frameStream("a", "", "hello"))
	f.Add(uint8(3), frameStream(string(bytes.Repeat([]byte("x"), 100)), "tail"))
	f.Add(uint8(200), []byte{0, 0, 0, 65, 'x'})
	f.Add(uint8(7), []byte{0xff, 0xff, 0xff, 0xff})
	f.Add(uint8(2), []byte{0, 0})
	const limit, slab = 64, 16
	f.Fuzz(func(t *testing.T, chunk uint8, stream []byte) {
		fr := frameReader{
			r:        chunkedReader{r: bytes.NewReader(stream), size: int(chunk)%32 + 1},
			max:      limit,
			slabSize: slab,
		}
		var frames [][]byte
		var err error
		for {
			var b []byte
			if b, err = fr.next(); err != nil {
				break
			}
			if len(b) > limit || cap(b) != len(b) {
				t.Fatalf("body of len %d cap %d, limit %d", len(b), cap(b), limit)
			}
			frames = append(frames, b)
		}
		// The frames must re-encode to a prefix of the stream, and the error must
		// say what stopped the reader at the end of that prefix.
		consumed := 0
		for _, b := range frames {
			consumed += headerSize + len(b)
		}
		re := frameStream()
		for _, b := range frames {
			re = append(binary.BigEndian.AppendUint32(re, uint32(len(b))), b...)
		}
		if !bytes.Equal(re, stream[:consumed]) {
			t.Fatalf("frames do not re-encode to the stream")
		}
		rest := stream[consumed:]
		switch {
		case len(rest) == 0:
			if err != io.EOF {
				t.Fatalf("clean end: got %v", err)
			}
		case len(rest) >= headerSize && binary.BigEndian.Uint32(rest) > limit:
			if !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("oversize frame: got %v", err)
			}
		default:
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("truncated frame: got %v", err)
			}
		}
	})
}
