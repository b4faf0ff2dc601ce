// Package testgrain is the grain the runtime's own tests call: a Counter
// contract (counter.proto) whose Add and Get behave as the public example's
// (examples/counter), plus methods that exist only to exercise the
// runtime: Block (cancellation of running and queued calls), Panic
// (recovery), Never (response timeouts), Fail (application errors) and
// Relay and Nest (calls from one grain to another). The silo binary never
// serves it.
package testgrain
