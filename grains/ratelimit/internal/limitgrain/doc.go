// Package limitgrain implements the four rate-limiting grains on granary's
// public grain API: each activation drives one limiter core
// (grains/ratelimit/limiter) from its turns, answers at once when it can,
// keeps deferred replies for queued acquisitions, arms a deadline only for
// a call that waits, ticks replenishment only while the limiter needs it,
// and persists a snapshot through the silo's state store.
//
// The grain reaches its activation through a small interface (runtime.go),
// the methods of actor.Context it calls, so that its tests can drive it
// turn by turn on a fake runtime; on a silo it always runs on an
// actor.Context.
package limitgrain
