// Package granarypb holds granary's protobuf options for grain contracts:
// the source of granary/options.proto and the Go code generated from it.
//
// A contract imports the options with
//
//	import "granary/options.proto";
//
// and marks a method with option (granary.bounded) = true. granarygen serves
// the file from this package, so contracts compile without a path flag.
package granarypb

import _ "embed"

// The proto lives beside its Go code but is compiled under the import path
// users write, so the generated code registers "granary/options.proto".
//go:generate go run github.com/granary-go/granary/proxy/cmd/granarygen -I granary=. -paths=source_relative granary/options.proto

// OptionsProtoPath is the import path of the options file, as contracts
// write it in their import statements.
const OptionsProtoPath = "granary/options.proto"

//go:embed options.proto
var optionsProto string

// OptionsProto returns the source of granary/options.proto, so that tools
// compiling contracts can serve it without finding it on disk.
func OptionsProto() string { return optionsProto }
