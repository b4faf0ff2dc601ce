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

// readProgress is what a frameReader publishes for other goroutines.
type readProgress struct {
	bytes atomic.Uint64 // read from the stream so far
	state atomic.Uint32 // readerBusy, readerWaiting or readerInFrame
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

	state    uint32 // the last state stored in progress, to store only changes
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
				fr.setState(readerBusy)
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
			fr.setState(readerInFrame)
		} else {
			fr.setState(readerWaiting)
		}
		n, err := fr.r.Read(fr.buf[fr.end:])
		if n > 0 {
			fr.end += n
			fr.progress.bytes.Add(uint64(n))
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

// setState publishes what the reader does next. The atomic store happens
// only on a change: at most twice per read from the stream, never per frame
// handed out of a slab.
func (fr *frameReader) setState(s uint32) {
	if fr.state != s {
		fr.state = s
		fr.progress.state.Store(s)
	}
}
