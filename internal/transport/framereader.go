package transport

import (
	"encoding/binary"
	"fmt"
	"io"
)

// headerSize is the length prefix: a 4-byte big-endian body length.
const headerSize = 4

// frameReader splits a byte stream into frames. It reads from the stream
// straight into a slab and returns bodies that alias the slab, capped so that an
// append by the receiver cannot reach the next frame. Bytes are only ever read
// into the slab past everything already returned, and a full slab is replaced,
// never reused, so every returned body stays valid for as long as its owner
// keeps it.
type frameReader struct {
	r        io.Reader
	max      int // largest body accepted
	slabSize int

	buf   []byte // the current slab
	start int    // first byte of buf not yet returned
	end   int    // end of the bytes read into buf
}

// next returns the next frame body. A zero-length body is a valid frame (an
// empty protobuf message encodes to nothing). At a clean end of stream between
// frames it returns io.EOF; inside a frame, io.ErrUnexpectedEOF. A declared
// length above max returns an error wrapping ErrFrameTooLarge.
func (fr *frameReader) next() ([]byte, error) {
	for {
		buffered := fr.end - fr.start
		need := headerSize
		if buffered >= headerSize {
			declared := binary.BigEndian.Uint32(fr.buf[fr.start:])
			if uint64(declared) > uint64(fr.max) {
				return nil, fmt.Errorf("%w: peer announced %d bytes, limit is %d", ErrFrameTooLarge, declared, fr.max)
			}
			n := int(declared)
			if buffered-headerSize >= n {
				body := fr.buf[fr.start+headerSize : fr.start+headerSize+n : fr.start+headerSize+n]
				fr.start += headerSize + n
				return body, nil
			}
			need = headerSize + n
		}
		if fr.start+need > len(fr.buf) {
			// The frame does not fit in what is left of this slab: move its
			// start to a fresh slab (or, if it is larger than a slab, to a buffer
			// of its own) and leave the old slab to the bodies that alias it.
			slab := make([]byte, max(fr.slabSize, need))
			copy(slab, fr.buf[fr.start:fr.end])
			fr.buf, fr.start, fr.end = slab, 0, buffered
		}
		n, err := fr.r.Read(fr.buf[fr.end:])
		fr.end += n
		if n > 0 {
			continue
		}
		if err == io.EOF {
			if buffered == 0 {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("transport: stream ended inside a frame (%d of %d bytes): %w", buffered, need, io.ErrUnexpectedEOF)
		}
		if err != nil {
			return nil, err
		}
	}
}
