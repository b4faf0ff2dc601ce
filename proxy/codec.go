package proxy

import (
	"google.golang.org/protobuf/proto"
)

// WireMessage is a message whose codec granarygen generated: plain Go code
// for its fields instead of protobuf's table-driven, reflective one. The
// call path uses it when a request or reply has it, and proto otherwise.
//
// The generated methods encode byte for byte what proto.Marshal writes and
// decode what proto.Unmarshal accepts into the same message, rejecting what
// it rejects; the generator emits them only for messages whose every field
// it can handle that way (proto3 and the open struct API; no oneofs, maps
// or explicit presence, among others: see internal/grainc). Errors wrap
// proto.Error, as protobuf's do. On an error AppendGranaryWire may leave
// part of an encoding appended, as proto.MarshalOptions.MarshalAppend does.
type WireMessage interface {
	proto.Message
	// AppendGranaryWire appends the message's wire encoding to b.
	AppendGranaryWire(b []byte) ([]byte, error)
	// MergeGranaryWire decodes b into the message as
	// proto.UnmarshalOptions{Merge: true} does.
	MergeGranaryWire(b []byte) error
}

// AppendMessage appends m's wire encoding to b, through its generated
// codec when it has one.
func AppendMessage(b []byte, m proto.Message) ([]byte, error) {
	if w, ok := m.(WireMessage); ok {
		return w.AppendGranaryWire(b)
	}
	return proto.MarshalOptions{}.MarshalAppend(b, m)
}

// UnmarshalFresh decodes b into m, which must be freshly made (empty):
// decoding into an empty message needs no reset first. It uses m's
// generated codec when it has one.
func UnmarshalFresh(b []byte, m proto.Message) error {
	if w, ok := m.(WireMessage); ok {
		return w.MergeGranaryWire(b)
	}
	return freshUnmarshal.Unmarshal(b, m)
}
