// Package counter is the example grain of docs/getting-started.md: the
// Counter contract (counter.proto), the code generated from it
// (counter.pb.go, the messages; counter_grain.pb.go, the typed reference
// NewCounterRef, the CounterGrain interface and RegisterCounterGrain;
// counter_wire.pb.go, the messages' fast codecs) and an implementation,
// Grain. Import it to try granary, or copy it as the start of your own
// contract.
package counter
