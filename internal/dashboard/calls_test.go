package dashboard

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/proto"

	dto "github.com/prometheus/client_model/go"

	dpb "github.com/granary-go/granary/internal/dashboard/dashboardpb"
)

func promHistogram(bounds []float64, cumulative []uint64) *dto.Histogram {
	h := &dto.Histogram{SampleCount: proto.Uint64(cumulative[len(cumulative)-1])}
	for i, b := range bounds {
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(b), CumulativeCount: proto.Uint64(cumulative[i])})
	}
	return h
}

func addProm(h *histogram, p *dto.Histogram) {
	bounds, counts := finiteBuckets(p)
	h.add(bounds, counts, p.GetSampleCount())
}

func TestQuantilesInterpolateWithinTheirBucket(t *testing.T) {
	var h histogram
	// Two series of one method (two outcomes): 100 calls in all.
	addProm(&h, promHistogram([]float64{0.001, 0.01, 0.1, math.Inf(1)}, []uint64{40, 80, 90, 90}))
	addProm(&h, promHistogram([]float64{0.001, 0.01, 0.1, math.Inf(1)}, []uint64{0, 0, 5, 10}))
	assert.InDelta(t, 0.001+0.009*(50-40)/40.0, h.quantile(0.5), 1e-12)
	assert.InDelta(t, 0.1, h.quantile(0.95), 1e-12, "the 95th call is the last in the 0.1 bucket")
	assert.InDelta(t, 0.1, h.quantile(0.99), 1e-12, "past the last finite bound: that bound")
	var empty histogram
	assert.Zero(t, empty.quantile(0.5))
}

func TestTheClustersCallsSumTheSilosBuckets(t *testing.T) {
	bounds := []float64{0.001, 0.01, 0.1}
	parts := []*dpb.SnapshotReply{
		{Silo: "a", Calls: []*dpb.MethodCalls{{Type: "T", Method: "M", Timed: 50, SecondsSum: 0.05, Bounds: bounds, Cumulative: []uint64{50, 50, 50},
			Outcomes: []*dpb.Outcome{{Outcome: "ok", Count: 50}}}}},
		{Silo: "b", Calls: []*dpb.MethodCalls{{Type: "T", Method: "M", Timed: 50, SecondsSum: 2.5, Bounds: bounds, Cumulative: []uint64{0, 0, 50},
			Outcomes: []*dpb.Outcome{{Outcome: "ok", Count: 40}, {Outcome: "error", Count: 10}}}}},
	}
	calls := mergeCalls(parts)
	assert.Len(t, calls, 1)
	c := calls[0]
	assert.Equal(t, MethodCalls{Type: "T", Method: "M", Outcomes: map[string]uint64{"ok": 90, "error": 10}, Total: 100,
		Timed: 100, SecondsSum: 2.55, P50: 0.001, P99: 0.01 + 0.09*(99-50)/50.0}, c,
		"half the calls fast on a, half slow on b: the median is a's, the 99th b's")
}
