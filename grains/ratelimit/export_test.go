package ratelimit

import "github.com/granary-go/granary/grains/ratelimit/internal/quota"

// LeasedStats returns a leased holder's answers and its local grants per
// interval, for tests and benchmarks; false for a holder without leased
// quota.
func LeasedStats[O Options](h *Holder[O]) (quota.Stats, []quota.IntervalCount, bool) {
	if h.leased == nil {
		return quota.Stats{}, nil, false
	}
	st, intervals := h.leased.stats()
	return st, intervals, true
}

// AnsweredLocally reports whether l was granted from h's slice with no
// wait for a slice request.
func AnsweredLocally[O Options](h *Holder[O], l *Lease) bool {
	return h.leased != nil && l == h.leased.granted
}
