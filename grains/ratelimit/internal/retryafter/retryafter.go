// Package retryafter turns a limiter's retry hint into the whole seconds
// of an HTTP Retry-After field, for the middleware and the service API
// alike.
package retryafter

import (
	"math"
	"time"
)

// MaxSeconds is the largest number of seconds Seconds returns: the
// largest Integer a structured header field carries.
const MaxSeconds = 999_999_999_999_999

// Seconds is the Retry-After of a rejection whose limiter hinted d: whole
// seconds, rounded up so that a client that waits that long does not come
// back early; 1 without a hint (d <= 0: a concurrency limit, a wait that
// ran out of budget), so that clients back off rather than retry at once.
func Seconds(d time.Duration) int64 {
	if d <= 0 {
		return 1
	}
	return max(Ceil(float64(d)), 1)
}

// Ceil returns ns nanoseconds in whole seconds, rounded up, at most
// MaxSeconds.
func Ceil(ns float64) int64 {
	s := math.Ceil(ns / float64(time.Second))
	if s >= MaxSeconds {
		return MaxSeconds
	}
	return int64(s)
}
