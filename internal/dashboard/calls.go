package dashboard

import (
	"cmp"
	"math"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The silo's instruments as its Prometheus exporter names them
// (docs/operations.md lists them).
const (
	callsFamily    = "granary_grain_calls_total"
	durationFamily = "granary_grain_call_duration_seconds"
)

// MethodCalls are the calls of one method of one grain type on this silo,
// since it started. The page turns the totals of two snapshots into rates.
type MethodCalls struct {
	Type   string `json:"type"`
	Method string `json:"method"`
	// Outcomes counts the calls by outcome: ok, error, cancelled, panic.
	Outcomes map[string]uint64 `json:"outcomes"`
	Total    uint64            `json:"total"`
	// Timed counts the calls the duration histogram holds, SecondsSum
	// their time; P50 and P99 are estimated from its buckets, in seconds.
	Timed      uint64  `json:"timed"`
	SecondsSum float64 `json:"seconds_sum"`
	P50        float64 `json:"p50"`
	P99        float64 `json:"p99"`
}

type methodKey struct{ grainType, method string }

// callsOf reads the call counters and the duration histogram from g. A
// gathering error leaves out what it could not read.
func callsOf(g prometheus.Gatherer) []MethodCalls {
	families, _ := g.Gather() // what was gathered is still good
	calls := map[methodKey]*MethodCalls{}
	hists := map[methodKey]*histogram{}
	get := func(m *dto.Metric) (methodKey, *MethodCalls) {
		k := methodKey{label(m, "grain_type"), label(m, "grain_method")}
		c := calls[k]
		if c == nil {
			c = &MethodCalls{Type: k.grainType, Method: k.method, Outcomes: map[string]uint64{}}
			calls[k] = c
		}
		return k, c
	}
	for _, f := range families {
		switch f.GetName() {
		case callsFamily:
			for _, m := range f.GetMetric() {
				_, c := get(m)
				n := uint64(m.GetCounter().GetValue())
				c.Outcomes[label(m, "outcome")] += n
				c.Total += n
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
				hist.add(h)
			}
		}
	}
	out := make([]MethodCalls, 0, len(calls))
	for k, c := range calls {
		if c.Total == 0 && c.Timed == 0 {
			continue
		}
		if h := hists[k]; h != nil {
			c.P50, c.P99 = h.quantile(0.5), h.quantile(0.99)
		}
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b MethodCalls) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Method, b.Method))
	})
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// histogram sums the cumulative buckets of one method's series (one per
// outcome).
type histogram struct {
	bounds []float64
	counts []uint64 // cumulative, as Prometheus keeps them
	total  uint64
}

func (h *histogram) add(p *dto.Histogram) {
	buckets := p.GetBucket()
	if h.bounds == nil {
		h.bounds = make([]float64, len(buckets))
		h.counts = make([]uint64, len(buckets))
		for i, b := range buckets {
			h.bounds[i] = b.GetUpperBound()
		}
	}
	for i, b := range buckets {
		if i < len(h.counts) && b.GetUpperBound() == h.bounds[i] {
			h.counts[i] += b.GetCumulativeCount()
		}
	}
	h.total += p.GetSampleCount()
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
		if math.IsInf(bound, 1) {
			break
		}
		if float64(h.counts[i]) >= rank {
			inBucket := h.counts[i] - below
			if inBucket == 0 {
				return bound
			}
			return lower + (bound-lower)*(rank-float64(below))/float64(inBucket)
		}
		lower, below = bound, h.counts[i]
	}
	return lower
}
