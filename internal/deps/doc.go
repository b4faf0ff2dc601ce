//go:build tools

// Package deps pins the modules that the framework's code generator and
// benchmarks need but that no other package imports yet, so that go.mod and
// go.sum list them and a fresh machine fetches them. It is never built.
package deps
