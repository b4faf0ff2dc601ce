// Package grainc generates the Go code of grain contracts.
//
// A grain contract is a protobuf file with services. Generate compiles such
// files in process (no protoc binary is needed), has protoc-gen-go write the
// usual .pb.go, run as a protoc plugin by the go command (see ProtocGenGo:
// its generator is internal to the protobuf module, the plugin protocol is
// public), and for every file with services writes a _grain.pb.go holding,
// per service:
//
//   - the grain type (the service's full protobuf name),
//   - one proxy.MethodDesc per method, whose id is computed here, once,
//     with proxy.MethodID, and whose Bounded flag comes from the
//     (granary.bounded) method option,
//   - a typed reference, NewXRef(caller, key), with one method per rpc,
//   - the server interface XGrain, the proxy.ServiceDesc that dispatches to
//     it, and RegisterXGrain.
//
// Generate refuses, with an error naming both sides, a contract whose
// generated identifiers would clash in their Go package, with each other
// or with those of the .pb.go files: a message SRef beside a service S,
// say, or services A and A_B with methods B_C and C.
//
// For every file with at least one message it can handle, services or
// not, Generate also writes a _wire.pb.go: per message, AppendGranaryWire
// and MergeGranaryWire, plain Go code that encodes byte for byte what
// proto.Marshal writes and decodes as proto.UnmarshalOptions{Merge: true}
// does, which the call path uses instead of protobuf's table-driven codec
// (see proxy.WireMessage). A message gets them when its file is proto3,
// it uses the open struct API, and it has no oneof, map, optional, lazy or
// weak field, no field named like the methods, and no message field that
// can reach required fields or extensions; other messages are left to
// proto. Message fields of other Go packages, or of types without a codec,
// are encoded and decoded through proto. The codecs call small helpers in
// package proxy/wirecodec for the parts every message shares.
//
// Contracts import "granary/options.proto" without a path flag: Generate
// serves it from package granarypb when no import path supplies it. The
// standard google/protobuf files are served the same way.
//
// Output is deterministic: it depends only on the inputs and on the module
// versions pinned in go.mod, never on the machine, so CI can regenerate and
// compare.
package grainc
