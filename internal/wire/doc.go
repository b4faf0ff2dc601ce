// Package wire is the envelope that every transport frame carries: calls
// (requests, replies, cancels) today, directory and membership messages later.
//
// The schema is wire.proto (proto3, package granary.wire). The Go codec here is
// written by hand on top of protowire instead of generated, because the envelope
// is encoded and decoded once per frame on every hop: AppendTo appends into a
// buffer the caller owns (the transport's pending batch), and Unmarshal fills an
// Envelope the caller owns without reflection. A test compiles wire.proto at test
// time and round-trips random envelopes between this codec and dynamicpb in both
// directions, so the two cannot drift apart silently.
//
// # Aliasing
//
// Unmarshal makes Envelope.Payload alias the input frame: no copy is made, and
// the frame must not be modified while the payload is in use. Strings are
// copied (a Go string cannot safely alias a buffer that might be reused), except
// that UnmarshalInterned returns the caller's canonical string for grain types and
// placement hints found in an Interner, which makes decoding a request for a
// known grain type allocate only for its key. A connection's reader decodes
// through a Decoder, which also remembers recent grain keys: a request for a
// grain seen lately decodes without allocating at all.
//
// # Field numbers
//
// Numbers are stable and documented in wire.proto. Kind values 16-31 are set aside
// for directory messages and 32-47 for membership messages.
package wire
