// Package transport carries frames over one long-lived TCP connection per peer
// pair, in both directions: client to gateway and silo to silo use the same
// code. Nobody dials back: a client dials and never listens.
//
// A frame is a 4-byte big-endian body length followed by the body. The
// transport does not look inside bodies (they are wire envelopes, but any bytes
// will do). A zero-length body is a valid frame.
//
// # Reading
//
// Each Conn has a reader goroutine that reads from the socket into large slabs
// and calls Handler.HandleFrame for each frame, in arrival order, with a body
// that aliases the slab. The handler owns the body afterwards, so handing it to
// another goroutine needs no copy, and allocations are amortised over a slab
// of frames. A peer that announces a frame above Options.MaxFrameSize, ends the
// stream inside a frame or fails a read has its connection closed; a Listener
// keeps serving its other connections.
//
// # Writing
//
// Send appends the length prefix and the body to a pending buffer under a mutex
// and wakes the writer goroutine, which swaps the pending buffer with a spare
// one and writes everything queued in one Write call. Frames queued while a
// write is in flight therefore go out together in the next write: one syscall
// per batch, with no timer and no Nagle delay. Send never blocks on the
// network; Options.MaxPendingBytes bounds the queue (see there for why Send
// fails fast instead of blocking).
//
// # Closing
//
// Conn.Close drops frames not yet written, stops both goroutines, calls
// Handler.HandleClose exactly once, and waits for all of it; it is safe from
// any goroutine, including the handler's own callbacks. Listener.Close stops
// accepting and closes every accepted connection the same way.
package transport
