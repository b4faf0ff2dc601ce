// Command granarygen generates the Go code of grain contracts: for each
// proto file the usual .pb.go, for files with services a _grain.pb.go
// with typed references, method descriptors and the server dispatch table,
// and for files with proto3 messages a _wire.pb.go with fast generated
// codecs (AppendGranaryWire and MergeGranaryWire) that the call path
// prefers to protobuf's table-driven one.
// It compiles protos in process and runs protoc-gen-go as a plugin with
// `go run`, at the version of google.golang.org/protobuf the main module
// requires (GRANARYGEN_PROTOC_GEN_GO may name a protoc-gen-go binary to
// run instead), so only Go is needed to run it:
//
//	granarygen [-I dir | -I prefix=dir]... [-paths=source_relative] file.proto...
//
// Without -I, files are named relative to the current directory and
// compiled under their path from the root of the Go module that holds it,
// as buf lays out a module's files, with the module's root as the import
// path: examples/counter's counter.proto is compiled, and registers with
// protobuf, as examples/counter/counter.proto, so that two grain packages of
// one program may each hold a counter.proto; imports of other protos of the
// module name them from the root too. Outside a module, or with -I, files
// are named as imports name them, relative to an import path. With
// -paths=source_relative each output is written next to the proto it came
// from; otherwise outputs are written at their import-path-based names
// under the current directory, as protoc's --go_out=. would.
// "granary/options.proto" and the standard google/protobuf files need no
// import path. -I prefix=dir compiles the files of dir under the import
// path prefix/, which is how granary/options.proto, living in
// proxy/granarypb, is generated.
//
// Files whose content is unchanged are not rewritten. The usual way to run
// it is a //go:generate directive:
//
//	//go:generate go run github.com/granary-go/granary/proxy/cmd/granarygen -paths=source_relative counter.proto
package main
