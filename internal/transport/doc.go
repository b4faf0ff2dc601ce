// Package transport carries frames over one long-lived TCP connection per peer
// pair, in both directions: client to gateway and silo to silo use the same
// code. Nobody dials back: a client dials and never listens. Whatever arrives
// from the network is treated as hostile: it is bounded in size, in time and
// in number before it reaches a Handler. docs/security.md is the operator's
// view of all of this.
//
// # The handshake
//
// Every connection starts with a handshake, before any frame: TLS first when
// Options.TLS is set, then four short messages in which each end says who it
// is (Identity: role, silo id and generation, cluster id) and, when the ends
// share Options.ClusterSecret, proves that it knows the secret with an
// HMAC-SHA256 over both ends' messages, nonces included; the secret never
// crosses the wire. A mismatch (version, cluster id, secret, TLS, a role the
// listener does not accept) fails both ends with a *HandshakeError naming
// the reason: Dial returns it, a Listener logs and counts it. The whole
// handshake has a deadline (Options.HandshakeTimeout). Conn.Peer tells each
// end who the other is, already in a Listener's accept function.
//
// # Frames
//
// A frame is a 4-byte big-endian body length followed by the body. The
// transport does not look inside bodies (they are wire envelopes, but any
// bytes will do), except that the empty frame is a heartbeat: the receiving
// transport consumes it, so Send refuses empty bodies.
//
// # Reading
//
// Each Conn has a reader goroutine that reads from the socket into large slabs
// and calls Handler.HandleFrame for each frame, in arrival order, with a body
// that aliases the slab. The handler owns the body afterwards, so handing it to
// another goroutine needs no copy, and allocations are amortised over a slab
// of frames. A frame larger than a slab gets a buffer of its own that grows
// with the bytes that arrive, never straight to the announced length. A peer
// that announces a frame above Options.MaxFrameSize, ends the stream inside a
// frame or fails a read has its connection closed; a Listener keeps serving
// its other connections.
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
// # Time rules
//
// A watchdog per connection looks at its counters a few times per rule
// duration, on the clock given with WithClock: it sends heartbeats
// (Options.KeepaliveInterval), closes a connection from which nothing arrived
// (Options.KeepaliveTimeout), one trickling a frame below Options.MinReadRate,
// and, on a Listener, one idle for ListenerOptions.IdleTimeout whose handler
// says it is idle (Idler). A Listener also caps its connections
// (ListenerOptions.MaxConnections). Every refusal and forced close is counted
// in Listener.Stats and logged at Info or Warn with the peer's address,
// through a token bucket so that no peer can flood the log.
//
// # Closing
//
// Conn.Close drops frames not yet written, stops both goroutines, calls
// Handler.HandleClose exactly once, and waits for all of it; it is safe from
// any goroutine, including the handler's own callbacks. Listener.Close stops
// accepting and closes every connection it holds, handshaking ones included,
// the same way.
package transport
