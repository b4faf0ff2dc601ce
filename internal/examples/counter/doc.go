// Package counter is the example grain used by the tests and by
// docs/getting-started.md: a Counter contract (counter.proto), the code
// generated from it (counter.pb.go; counter_grain.pb.go, the reference and
// dispatcher; counter_wire.pb.go, the messages' fast codecs) and its
// implementation (Grain). Besides Add and Get it has methods that exist to
// exercise the runtime: Block (cancellation), Panic (recovery) and Never
// (response timeouts).
package counter
