package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/transport"
)

func newReader(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return r, mp
}

func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// points returns a sum's data points as attribute strings to values.
func points(t *testing.T, m metricdata.Metrics) map[string]int64 {
	t.Helper()
	s, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is an integer sum", m.Name)
	out := map[string]int64{}
	for _, dp := range s.DataPoints {
		out[dp.Attributes.Encoded(attribute.DefaultEncoder())] = dp.Value
	}
	return out
}

var stats = Stats{
	Host: host.HostStats{Active: 4, Activations: 9, Deactivations: 5, ActivationFailures: 1, RefusedActivations: 2},
	Calls: []host.MethodCalls{
		{Type: "t.Grain", Method: "Get", Calls: [host.NumOutcomes]uint64{7, 1, 2, 3}},
		{Type: "t.Grain", Method: "", Calls: [host.NumOutcomes]uint64{0, 4, 0, 0}},
	},
	Gateway: rpc.EndpointStats{Overloaded: 6, OverShare: 3, Denied: 2, Timeouts: 1, Transport: transport.Stats{FramesRead: 10, FramesWritten: 11, BytesRead: 100, BytesWritten: 120}},
	Links:   rpc.EndpointStats{BadRequests: 1, Transport: transport.Stats{FramesRead: 20, FramesWritten: 21}},
	Clients: 3,
	Members: MemberCounts{Joining: 1, Active: 3},
}

// Every instrument reports what its counter says, with the silo's name
// and the attributes it lists; counters are monotonic sums, live counts
// not.
func TestInstrumentsReportTheSilosCounters(t *testing.T) {
	r, mp := newReader(t)
	m, err := Register(mp, "s1", func() Stats { return stats })
	require.NoError(t, err)
	defer m.Close()
	got := collect(t, r)

	for _, in := range observed {
		metric, ok := got[in.Name]
		require.True(t, ok, "%s reported", in.Name)
		assert.Equal(t, in.Unit, metric.Unit, in.Name)
		sum := metric.Data.(metricdata.Sum[int64])
		assert.Equal(t, in.kind == counter, sum.IsMonotonic, in.Name)
		for _, dp := range sum.DataPoints {
			keys := []string{"silo"}
			for _, kv := range dp.Attributes.ToSlice() {
				if kv.Key != "silo" {
					keys = append(keys, string(kv.Key))
				}
			}
			assert.ElementsMatch(t, append([]string{"silo"}, in.Attributes...), keys, in.Name)
			v, _ := dp.Attributes.Value("silo")
			assert.Equal(t, "s1", v.AsString())
		}
	}
	assert.Equal(t, map[string]int64{
		"grain.method=Get,grain.type=t.Grain,outcome=ok,silo=s1":            7,
		"grain.method=Get,grain.type=t.Grain,outcome=error,silo=s1":         1,
		"grain.method=Get,grain.type=t.Grain,outcome=cancelled,silo=s1":     2,
		"grain.method=Get,grain.type=t.Grain,outcome=panic,silo=s1":         3,
		"grain.method=unknown,grain.type=t.Grain,outcome=ok,silo=s1":        0,
		"grain.method=unknown,grain.type=t.Grain,outcome=error,silo=s1":     4,
		"grain.method=unknown,grain.type=t.Grain,outcome=cancelled,silo=s1": 0,
		"grain.method=unknown,grain.type=t.Grain,outcome=panic,silo=s1":     0,
	}, points(t, got["granary.grain.calls"]))
	assert.Equal(t, map[string]int64{
		"connection=gateway,direction=in,silo=s1":  10,
		"connection=gateway,direction=out,silo=s1": 11,
		"connection=link,direction=in,silo=s1":     20,
		"connection=link,direction=out,silo=s1":    21,
	}, points(t, got["granary.transport.frames"]))
	assert.Equal(t, map[string]int64{
		"connection=gateway,reason=overloaded,silo=s1":        6,
		"connection=gateway,reason=activation_budget,silo=s1": 0,
		"connection=gateway,reason=activation_share,silo=s1":  3,
		"connection=gateway,reason=bad_request,silo=s1":       0,
		"connection=gateway,reason=permission_denied,silo=s1": 2,
		"connection=link,reason=overloaded,silo=s1":           0,
		"connection=link,reason=activation_budget,silo=s1":    0,
		"connection=link,reason=activation_share,silo=s1":     0,
		"connection=link,reason=bad_request,silo=s1":          1,
		"connection=link,reason=permission_denied,silo=s1":    0,
	}, points(t, got["granary.transport.rejections"]))
	assert.Equal(t, map[string]int64{"silo=s1": 4}, points(t, got["granary.activations"]))
	assert.Equal(t, map[string]int64{"silo=s1": 3}, points(t, got["granary.gateway.connections"]))
	assert.Equal(t, map[string]int64{
		"silo=s1,state=joining":       1,
		"silo=s1,state=active":        3,
		"silo=s1,state=shutting-down": 0,
	}, points(t, got["granary.cluster.members"]), "every state, counted or not")
}

// Two silos on one provider report side by side, told apart by name, and
// a closed one reports nothing more.
func TestClosedSiloReportsNothing(t *testing.T) {
	r, mp := newReader(t)
	a, err := Register(mp, "a", func() Stats { return stats })
	require.NoError(t, err)
	b, err := Register(mp, "b", func() Stats { return stats })
	require.NoError(t, err)
	assert.Len(t, points(t, collect(t, r)["granary.activations"]), 2)
	require.NoError(t, a.Close())
	require.NoError(t, a.Close(), "safe twice")
	assert.Equal(t, map[string]int64{"silo=b": 4}, points(t, collect(t, r)["granary.activations"]))
	require.NoError(t, b.Close())
}

// The call observer records durations in seconds under the method's and
// outcome's attributes, and allocates nothing per call.
func TestCallObserverRecordsDurations(t *testing.T) {
	r, mp := newReader(t)
	m, err := Register(mp, "s1", func() Stats { return Stats{} })
	require.NoError(t, err)
	defer m.Close()
	observe := m.CallObserver("t.Grain", "Get")
	observe(host.OutcomeOK, 3*time.Millisecond)
	observe(host.OutcomeOK, 2*time.Second)
	observe(host.OutcomeError, time.Millisecond)

	hist := collect(t, r)[CallDurationName].Data.(metricdata.Histogram[float64])
	byOutcome := map[string]metricdata.HistogramDataPoint[float64]{}
	for _, dp := range hist.DataPoints {
		v, _ := dp.Attributes.Value("outcome")
		byOutcome[v.AsString()] = dp
	}
	require.Contains(t, byOutcome, "ok")
	assert.EqualValues(t, 2, byOutcome["ok"].Count)
	assert.InDelta(t, 2.003, byOutcome["ok"].Sum, 1e-9)
	assert.EqualValues(t, 1, byOutcome["error"].Count)
	assert.Equal(t, callDurationBuckets, byOutcome["ok"].Bounds)

	allocs := testing.AllocsPerRun(100, func() { observe(host.OutcomeOK, time.Millisecond) })
	assert.Zero(t, allocs, "a recorded call allocates nothing")
}

// The limiters' acquisitions are reported by result, with the queued ones
// and the queue depth beside them.
func TestAcquisitionsReportedByResult(t *testing.T) {
	r, mp := newReader(t)
	l, err := RegisterAcquisitions(mp, "s1", func() Acquisitions {
		return Acquisitions{Granted: 5, Rejected: 3, Expired: 2, Cancelled: 1, Queued: 4, Waiting: 2}
	})
	require.NoError(t, err)
	got := collect(t, r)
	assert.Equal(t, map[string]int64{
		"result=granted,silo=s1": 5, "result=rejected,silo=s1": 3, "result=expired,silo=s1": 2, "result=cancelled,silo=s1": 1,
	}, points(t, got["granary.ratelimit.acquisitions"]))
	assert.Equal(t, map[string]int64{"silo=s1": 4}, points(t, got["granary.ratelimit.acquisitions.queued"]))
	assert.Equal(t, map[string]int64{"silo=s1": 2}, points(t, got["granary.ratelimit.queue.depth"]))
	assert.False(t, got["granary.ratelimit.queue.depth"].Data.(metricdata.Sum[int64]).IsMonotonic)
	require.NoError(t, l.Close())
	require.NoError(t, l.Close())
	assert.Empty(t, collect(t, r), "nothing once closed")
}

// BenchmarkCallObserver measures what recording one call's duration in the
// OpenTelemetry SDK's histogram costs, the part of a timed call that is
// not the host's clock reads.
func BenchmarkCallObserver(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	m, err := Register(mp, "bench", func() Stats { return Stats{} })
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	observe := m.CallObserver("t.Grain", "Get")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			observe(host.OutcomeOK, time.Millisecond)
		}
	})
}
