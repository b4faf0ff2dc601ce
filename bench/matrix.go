package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Algorithm names what a measured system limits with.
type Algorithm string

// The algorithms of the matrix, and the names peers report.
const (
	Concurrency   Algorithm = "concurrency"
	FixedWindow   Algorithm = "fixed"
	SlidingWindow Algorithm = "sliding"
	TokenBucket   Algorithm = "token"
	// FixedWindowLeased is the fixed window through leased quota
	// (ratelimit's Holder.Leased): holders answer from slices of the
	// window with no call, and ask the grain for slices a few times a
	// second. Only granary measures it.
	FixedWindowLeased Algorithm = "fixed-leased"
	// NoAlgorithm is the algorithm of peers that limit nothing: the
	// transport echo and protoactor-go's bare grain.
	NoAlgorithm Algorithm = "none"
	// GCRA is redis_rate's algorithm (the generic cell rate algorithm, a
	// token bucket in other words).
	GCRA Algorithm = "gcra"
)

// Algorithms lists the algorithms of the matrix in report order.
var Algorithms = []Algorithm{Concurrency, FixedWindow, SlidingWindow, TokenBucket, FixedWindowLeased}

// TimeBased reports whether a's leases are release-optional: everything
// but the concurrency limiter.
func (a Algorithm) TimeBased() bool { return a != Concurrency && a != NoAlgorithm }

// Scenario names how the workers of a case share keys.
type Scenario string

// The scenarios of the matrix.
const (
	// Sequential is one worker on one key.
	Sequential Scenario = "sequential"
	// HotKey is Parallelism workers on one key.
	HotKey Scenario = "hot-key"
	// Partitioned is Parallelism workers on Parallelism keys, one each.
	Partitioned Scenario = "partitioned"
	// Abandoned is HotKey acquiring and never releasing, for the
	// time-based algorithms only: retained memory must stay flat.
	Abandoned Scenario = "abandoned"
)

// Scenarios lists the scenarios of the matrix in report order.
var Scenarios = []Scenario{Sequential, HotKey, Partitioned, Abandoned}

// Parallelism is the number of workers of the concurrent scenarios.
const Parallelism = 16

// Quota and Window are the limits of every measured limiter: large enough
// that no acquisition of a run is ever rejected, with no automatic
// replenishment, as in the reference harness.
const (
	Quota  = 1_000_000
	Window = time.Hour
	// SlidingSegments is the sliding window's segment count.
	SlidingSegments = 4
	// LeasedQuota is the leased fixed window's limit, which replenishes
	// automatically (leasing needs it) every Window: local answers are
	// fast enough to use up Quota within a run.
	LeasedQuota = 1 << 40
)

// Workers returns how many goroutines run the scenario's operations.
func (s Scenario) Workers() int {
	if s == Sequential {
		return 1
	}
	return Parallelism
}

// Keys returns how many keys (holders, grains) the scenario's workers
// share; worker w uses key w % Keys().
func (s Scenario) Keys() int {
	if s == Partitioned {
		return Parallelism
	}
	return 1
}

// Releases reports whether an operation releases the lease it acquired.
func (s Scenario) Releases() bool { return s != Abandoned }

// Case is one cell of the matrix as one system measures it.
type Case struct {
	// Algorithm is what the system limits with.
	Algorithm Algorithm
	// Scenario is how the workers share keys.
	Scenario Scenario
	// Cancellable selects the overload: false passes context.Background()
	// to every operation, true one cancellable context per case, never
	// cancelled while it runs.
	Cancellable bool
}

// String names the case for progress lines and errors:
// algorithm/scenario/overload.
func (c Case) String() string {
	return string(c.Algorithm) + "/" + string(c.Scenario) + "/" + overloadName(c.Cancellable)
}

func overloadName(cancellable bool) string {
	if cancellable {
		return "cancellable"
	}
	return "background"
}

// Matrix is the selection of the matrix a run measures.
type Matrix struct {
	// Algorithms lists the algorithms measured.
	Algorithms []Algorithm
	// Scenarios lists the scenarios measured.
	Scenarios []Scenario
	// Overloads lists the Cancellable values measured.
	Overloads []bool
}

// Cases returns the rate-limiting cases of the matrix, in report order:
// every algorithm, scenario and overload selected, the abandoned scenario
// for the time-based algorithms only.
func (m Matrix) Cases() []Case {
	var cases []Case
	for _, s := range m.Scenarios {
		for _, cancellable := range m.Overloads {
			for _, a := range m.Algorithms {
				if s == Abandoned && !a.TimeBased() {
					continue
				}
				cases = append(cases, Case{Algorithm: a, Scenario: s, Cancellable: cancellable})
			}
		}
	}
	return cases
}

// PeerCases returns the cases a peer measures: the selected scenarios among
// scenarios, under algorithm a, with the cancellable overload only if the
// peer's calls take a context (takesContext).
func (m Matrix) PeerCases(a Algorithm, takesContext bool, scenarios ...Scenario) []Case {
	var cases []Case
	for _, s := range m.Scenarios {
		if !slices.Contains(scenarios, s) {
			continue
		}
		for _, cancellable := range m.Overloads {
			if cancellable && !takesContext {
				continue
			}
			cases = append(cases, Case{Algorithm: a, Scenario: s, Cancellable: cancellable})
		}
	}
	return cases
}

// parseList parses a comma-separated list of names, each one of known, and
// returns them in known's order; "" and "all" select all of known.
func parseList[T ~string](list string, known []T) ([]T, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "all" {
		return slices.Clone(known), nil
	}
	var named []T
	for name := range strings.SplitSeq(list, ",") {
		v := T(strings.TrimSpace(name))
		if !slices.Contains(known, v) {
			return nil, fmt.Errorf("%q is none of %v", name, known)
		}
		named = append(named, v)
	}
	return slices.DeleteFunc(slices.Clone(known), func(v T) bool { return !slices.Contains(named, v) }), nil
}
