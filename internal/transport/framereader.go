package transport

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync/atomic"
)

// headerSize is the length prefix: a 4-byte big-endian body length.
const headerSize = 4

// What the reader is doing, as the watchdog sees it.
const (
	readerBusy    = iota // handing frames out, or not started
	readerWaiting        // blocked reading, between frames
	readerInFrame        // blocked reading, with part of a frame buffered
)

// readProgress is what a frameReader publishes for the watchdog: the bytes
// read from the stream so far and what the reader is doing, in one word
// (bytes<<2 | state) that only the reader writes. The reader publishes
// before each read inside a frame (the read rule's business) and once the
// frame is out; between frames only when tracking every read (the keepalive
// timeout's business), so that on the fast path, where reads bring whole
// frames, reading costs no atomic operation at all.
type readProgress struct{ word atomic.Uint64 }

func (p *readProgress) load() (bytes uint64, state uint64) {
	w := p.word.Load()
	return w >> 2, w & 3
}

// frameReader splits a byte stream into frames. It reads from the stream
// straight into a slab and returns bodies that alias the slab, capped so that an
// append by the receiver cannot reach the next frame. Bytes are only ever read
// into the slab past everything already returned, and a full slab is replaced,
// never reused, so every returned body stays valid for as long as its owner
// keeps it.
//
// A frame larger than a slab gets a buffer of its own that grows with the
// bytes that arrive, doubling each time it fills, up to the announced length:
// a peer that announces a large frame and sends little of it holds little
// memory.
type frameReader struct {
	r        io.Reader
	max      int // largest body accepted
	slabSize int

	buf   []byte // the current slab
	start int    // first byte of buf not yet returned
	end   int    // end of the bytes read into buf

	track    bool   // publish around every read, not only inside frames
	received uint64 // bytes read from the stream
	state    uint64 // the state last published
	progress readProgress
}

// next returns the next frame body. A zero-length body is a valid frame. At a
// clean end of stream between frames it returns io.EOF; inside a frame,
// io.ErrUnexpectedEOF. A declared length above max returns an error wrapping
// ErrFrameTooLarge.
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
				if fr.state != readerBusy {
					fr.publish(readerBusy)
				}
				return body, nil
			}
			need = headerSize + n
		}
		if fr.start+need > len(fr.buf) {
			switch {
			case need <= fr.slabSize:
				// The frame does not fit in what is left of this slab: move
				// its start to a fresh slab and leave the old slab to the
				// bodies that alias it.
				fr.moveTo(fr.slabSize)
			case fr.end == len(fr.buf):
				// A large frame with no room left to read into: grow with
				// what has arrived, never straight to the announced length.
				fr.moveTo(min(need, max(fr.slabSize, 2*buffered)))
			}
		}
		if buffered > 0 {
			fr.publish(readerInFrame) // with the bytes that arrived so far
		} else if fr.track {
			fr.publish(readerWaiting)
		}
		n, err := fr.r.Read(fr.buf[fr.end:])
		if n > 0 {
			fr.end += n
			fr.received += uint64(n)
			if fr.track {
				fr.publish(readerBusy) // until it reads again
			}
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

// moveTo moves the bytes not yet returned to the start of a new buffer of
// size bytes.
func (fr *frameReader) moveTo(size int) {
	buf := make([]byte, size)
	fr.end = copy(buf, fr.buf[fr.start:fr.end])
	fr.buf, fr.start = buf, 0
}

// publish tells the watchdog what the reader does next and how many bytes
// it has read.
func (fr *frameReader) publish(s uint64) {
	fr.state = s
	fr.progress.word.Store(fr.received<<2 | s)
}
