// Package wiretest holds messages that cover every field kind granarygen's
// wire codecs support, and some that must get no codec, with the tests
// that hold the generated codecs, these and the example counter's, to
// protobuf-go's behaviour: differential tests on random messages, a fuzz
// target, the recursion limit, and benchmarks against proto.
package wiretest
