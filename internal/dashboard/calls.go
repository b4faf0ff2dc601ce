package dashboard

import (
	"cmp"
	"maps"
	"math"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	dpb "github.com/granary-go/granary/internal/dashboard/dashboardpb"
)

// The silo's instruments as its Prometheus exporter names them
// (docs/operations.md lists them).
const (
	callsFamily    = "granary_grain_calls_total"
	durationFamily = "granary_grain_call_duration_seconds"
)

// MethodCalls are the calls of one method of one grain type on the silos
// that answered, since each started. The page turns the totals of two
// snapshots into rates.
type MethodCalls struct {
	Type   string `json:"type"`
	Method string `json:"method"`
	// Outcomes counts the calls by outcome: ok, error, cancelled, panic.
	Outcomes map[string]uint64 `json:"outcomes"`
	Total    uint64            `json:"total"`
	// Timed counts the calls the duration histograms hold, SecondsSum
	// their time; P50 and P99 are estimated from the silos' buckets
	// summed, in seconds.
	Timed      uint64  `json:"timed"`
	SecondsSum float64 `json:"seconds_sum"`
	P50        float64 `json:"p50"`
	P99        float64 `json:"p99"`
}

type methodKey struct{ grainType, method string }

// callsOf reads the call counters and the duration histogram from g, by
// grain type and method. A gathering error leaves out what it could not
// read.
func callsOf(g prometheus.Gatherer) []*dpb.MethodCalls {
	families, _ := g.Gather() // what was gathered is still good
	calls := map[methodKey]*dpb.MethodCalls{}
	outcomes := map[methodKey]map[string]uint64{}
	hists := map[methodKey]*histogram{}
	get := func(m *dto.Metric) (methodKey, *dpb.MethodCalls) {
		k := methodKey{label(m, "grain_type"), label(m, "grain_method")}
		c := calls[k]
		if c == nil {
			c = &dpb.MethodCalls{Type: k.grainType, Method: k.method}
			calls[k] = c
		}
		return k, c
	}
	for _, f := range families {
		switch f.GetName() {
		case callsFamily:
			for _, m := range f.GetMetric() {
				k, _ := get(m)
				if outcomes[k] == nil {
					outcomes[k] = map[string]uint64{}
				}
				outcomes[k][label(m, "outcome")] += uint64(m.GetCounter().GetValue())
			}
		case durationFamily:
			for _, m := range f.GetMetric() {
				k, c := get(m)
				h := m.GetHistogram()
				c.Timed += h.GetSampleCount()
				c.SecondsSum += h.GetSampleSum()
				hist := hists[k]
				if hist == nil {
					hist = &histogram{}
					hists[k] = hist
				}
				bounds, counts := finiteBuckets(h)
				hist.add(bounds, counts, h.GetSampleCount())
			}
		}
	}
	out := make([]*dpb.MethodCalls, 0, len(calls))
	for k, c := range calls {
		total := uint64(0)
		for _, o := range slices.Sorted(maps.Keys(outcomes[k])) {
			n := outcomes[k][o]
			c.Outcomes = append(c.Outcomes, &dpb.Outcome{Outcome: o, Count: n})
			total += n
		}
		if total == 0 && c.Timed == 0 {
			continue
		}
		if h := hists[k]; h != nil {
			c.Bounds, c.Cumulative = h.bounds, h.counts
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *dpb.MethodCalls) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Method, b.Method))
	})
	return out
}

// finiteBuckets are a Prometheus histogram's buckets below +Inf: the
// sample count holds the rest.
func finiteBuckets(h *dto.Histogram) ([]float64, []uint64) {
	var bounds []float64
	var counts []uint64
	for _, b := range h.GetBucket() {
		if math.IsInf(b.GetUpperBound(), 1) {
			break
		}
		bounds = append(bounds, b.GetUpperBound())
		counts = append(counts, b.GetCumulativeCount())
	}
	return bounds, counts
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// mergeCalls sums the calls of every part by grain type and method, and
// estimates each method's quantiles from the silos' buckets summed.
func mergeCalls(parts []*dpb.SnapshotReply) []MethodCalls {
	calls := map[methodKey]*MethodCalls{}
	hists := map[methodKey]*histogram{}
	for _, p := range parts {
		for _, c := range p.GetCalls() {
			k := methodKey{c.Type, c.Method}
			m := calls[k]
			if m == nil {
				m = &MethodCalls{Type: c.Type, Method: c.Method, Outcomes: map[string]uint64{}}
				calls[k] = m
				hists[k] = &histogram{}
			}
			for _, o := range c.Outcomes {
				m.Outcomes[o.Outcome] = addCapped(m.Outcomes[o.Outcome], o.Count)
				m.Total = addCapped(m.Total, o.Count)
			}
			m.Timed = addCapped(m.Timed, c.Timed)
			m.SecondsSum += c.SecondsSum
			hists[k].add(c.Bounds, c.Cumulative, c.Timed)
		}
	}
	out := make([]MethodCalls, 0, len(calls))
	for k, c := range calls {
		c.P50, c.P99 = hists[k].quantile(0.5), hists[k].quantile(0.99)
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b MethodCalls) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Method, b.Method))
	})
	return out
}

// addCapped is a+b, or the largest uint64 past it: hostile counts cannot
// wrap a total around.
func addCapped(a, b uint64) uint64 {
	if a+b < a {
		return math.MaxUint64
	}
	return a + b
}

// histogram sums cumulative buckets: one method's series (one per
// outcome), then one method's silos. Buckets whose bounds differ from the
// first series' are left out.
type histogram struct {
	bounds []float64 // finite, increasing
	counts []uint64  // cumulative, as Prometheus keeps them
	total  uint64
}

func (h *histogram) add(bounds []float64, cumulative []uint64, total uint64) {
	if h.bounds == nil && len(bounds) > 0 {
		h.bounds = slices.Clone(bounds)
		h.counts = make([]uint64, len(bounds))
	}
	for i, b := range bounds {
		if i < len(h.counts) && i < len(cumulative) && b == h.bounds[i] {
			h.counts[i] = addCapped(h.counts[i], cumulative[i])
		}
	}
	h.total = addCapped(h.total, total)
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: linearly within the bucket that holds it; past the last bound,
// the last bound.
func (h *histogram) quantile(q float64) float64 {
	if h.total == 0 {
		return 0
	}
	rank := q * float64(h.total)
	lower, below := 0.0, uint64(0)
	for i, bound := range h.bounds {
		if float64(h.counts[i]) >= rank {
			if h.counts[i] <= below {
				return bound
			}
			inBucket := h.counts[i] - below
			return lower + (bound-lower)*(rank-float64(below))/float64(inBucket)
		}
		lower, below = bound, h.counts[i]
	}
	return lower
}
