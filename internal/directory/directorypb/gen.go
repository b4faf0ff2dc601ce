// Package directorypb is the wire contract of the grain directory: the
// messages and the service silos serve each other for the grains whose
// hash they own.
package directorypb

//go:generate go run github.com/granary-go/granary/proxy/cmd/granarygen -paths=source_relative directory.proto
