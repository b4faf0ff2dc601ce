package transport

import (
	"errors"
	"fmt"
	"time"
)

// Defaults applied by Options.EnsureDefaults.
const (
	DefaultMaxFrameSize    = 4 << 20
	DefaultReadBufferSize  = 64 << 10
	DefaultWriteBufferSize = 64 << 10
	DefaultMaxPendingBytes = 16 << 20
)

// MaxFrameSizeLimit is the largest MaxFrameSize that Validate accepts.
const MaxFrameSizeLimit = 1 << 30

// minReadBufferSize keeps slabs large enough that a slab holds many small frames.
const minReadBufferSize = 512

// ErrInvalidOptions is wrapped by every problem Options.Validate reports.
var ErrInvalidOptions = errors.New("transport: invalid options")

// Options configures a connection. The zero value of each field means its
// default; call EnsureDefaults to fill them in and Validate to check the result.
// Dial and Listen do both.
type Options struct {
	// MaxFrameSize is the largest frame body, in bytes, that may be sent or
	// received. Send rejects a larger body with ErrFrameTooLarge and sends
	// nothing; a peer that announces a larger frame has its connection closed.
	// Both ends should use the same value. Default 4 MiB; at most 1 GiB.
	MaxFrameSize int

	// ReadBufferSize is the size of each receive slab. The reader reads from the
	// socket straight into a slab and hands out frame bodies that alias it, so a
	// slab serves many frames with one allocation; a frame that does not fit in
	// a slab gets an allocation of its own. A handler that retains a body keeps
	// its whole slab alive. Default 64 KiB; at least 512 bytes.
	ReadBufferSize int

	// WriteBufferSize is the initial capacity of each of the two send buffers
	// (the one Send appends to and the one being written). A buffer that grew
	// past 16 times this size is replaced once 64 batches in a row have fitted
	// in this size, so a past burst does not pin memory. Default 64 KiB.
	WriteBufferSize int

	// MaxPendingBytes caps the bytes queued by Send but not yet handed to the
	// socket. Send returns ErrSendQueueFull, without blocking, once the queue
	// holds this much, so a peer that stops reading cannot grow memory without
	// bound: a connection holds at most MaxPendingBytes+4+MaxFrameSize queued
	// bytes. Send never blocks because it is called from reader goroutines too
	// (a reply sent while handling a request), and blocking there can deadlock
	// two peers that both stop reading. Default 16 MiB.
	MaxPendingBytes int

	// WriteTimeout, when positive, closes the connection if writing one batch
	// takes longer, which detects a peer that stopped reading. Zero (the
	// default) sets no write deadline and arms no timer.
	WriteTimeout time.Duration
}

// EnsureDefaults replaces every zero field with its default.
func (o *Options) EnsureDefaults() {
	if o.MaxFrameSize == 0 {
		o.MaxFrameSize = DefaultMaxFrameSize
	}
	if o.ReadBufferSize == 0 {
		o.ReadBufferSize = DefaultReadBufferSize
	}
	if o.WriteBufferSize == 0 {
		o.WriteBufferSize = DefaultWriteBufferSize
	}
	if o.MaxPendingBytes == 0 {
		o.MaxPendingBytes = DefaultMaxPendingBytes
	}
}

// Validate reports every problem with o, each wrapping ErrInvalidOptions, or nil.
// Zero fields are problems: call EnsureDefaults first.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...))
	}
	if o.MaxFrameSize <= 0 || o.MaxFrameSize > MaxFrameSizeLimit {
		bad("MaxFrameSize %d is outside [1, %d]", o.MaxFrameSize, MaxFrameSizeLimit)
	}
	if o.ReadBufferSize < minReadBufferSize {
		bad("ReadBufferSize %d is below %d", o.ReadBufferSize, minReadBufferSize)
	}
	if o.WriteBufferSize <= 0 {
		bad("WriteBufferSize %d is not positive", o.WriteBufferSize)
	}
	if o.MaxPendingBytes <= 0 {
		bad("MaxPendingBytes %d is not positive", o.MaxPendingBytes)
	}
	if o.WriteTimeout < 0 {
		bad("WriteTimeout %v is negative", o.WriteTimeout)
	}
	return errors.Join(errs...)
}
