// Package grainc generates the Go code of grain contracts.
//
// A grain contract is a protobuf file with services. Generate compiles such
// files in process (no protoc binary is needed), writes the usual .pb.go
// with the protobuf module's own generator, and for every file with
// services writes a _grain.pb.go holding, per service:
//
//   - the grain type (the service's full protobuf name),
//   - one proxy.MethodDesc per method, whose id is computed here, once,
//     with proxy.MethodID, and whose Bounded flag comes from the
//     (granary.bounded) method option,
//   - a typed reference, NewXRef(caller, key), with one method per rpc,
//   - the server interface XGrain, the proxy.ServiceDesc that dispatches to
//     it, and RegisterXGrain.
//
// Contracts import "granary/options.proto" without a path flag: Generate
// serves it from package granarypb when no import path supplies it. The
// standard google/protobuf files are served the same way.
//
// Output is deterministic: it depends only on the inputs and on the module
// versions pinned in go.mod, never on the machine, so CI can regenerate and
// compare.
package grainc
