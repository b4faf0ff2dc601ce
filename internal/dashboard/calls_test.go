package dashboard

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/proto"

	dto "github.com/prometheus/client_model/go"
)

func promHistogram(bounds []float64, cumulative []uint64) *dto.Histogram {
	h := &dto.Histogram{SampleCount: proto.Uint64(cumulative[len(cumulative)-1])}
	for i, b := range bounds {
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(b), CumulativeCount: proto.Uint64(cumulative[i])})
	}
	return h
}

func TestQuantilesInterpolateWithinTheirBucket(t *testing.T) {
	var h histogram
	// Two series of one method (two outcomes): 100 calls in all.
	h.add(promHistogram([]float64{0.001, 0.01, 0.1, math.Inf(1)}, []uint64{40, 80, 90, 90}))
	h.add(promHistogram([]float64{0.001, 0.01, 0.1, math.Inf(1)}, []uint64{0, 0, 5, 10}))
	assert.InDelta(t, 0.001+0.009*(50-40)/40.0, h.quantile(0.5), 1e-12)
	assert.InDelta(t, 0.1, h.quantile(0.95), 1e-12, "the 95th call is the last in the 0.1 bucket")
	assert.InDelta(t, 0.1, h.quantile(0.99), 1e-12, "past the last finite bound: that bound")
	var empty histogram
	assert.Zero(t, empty.quantile(0.5))
}
