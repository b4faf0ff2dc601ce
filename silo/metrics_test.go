package silo_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/silo"
)

// collected is one collection of a manual reader, by instrument name.
type collected map[string]metricdata.Aggregation

func collect(t *testing.T, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := collected{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// sum returns the value of an integer sum at the attributes, which must
// all match; found is false when no data point has them.
func (c collected) sum(name string, attrs ...attribute.KeyValue) (v int64, found bool) {
	s, ok := c[name].(metricdata.Sum[int64])
	if !ok {
		return 0, false
	}
	for _, dp := range s.DataPoints {
		if hasAll(dp.Attributes, attrs) {
			return dp.Value, true
		}
	}
	return 0, false
}

func hasAll(set attribute.Set, attrs []attribute.KeyValue) bool {
	for _, kv := range attrs {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// A silo with a meter provider reports its calls by type, method and
// outcome, times them, and counts its gateway's traffic, which does not go
// back when the client's connection closes.
func TestMeterProviderReportsCallsDurationsAndTraffic(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	e := startSilo(t, envConfig{siloOpts: []silo.Option{silo.WithMeterProvider(mp)}})
	c := e.client(client.Options{})
	ref := testgrain.NewCounterRef(c, "k")
	for range 3 {
		_, err := ref.Add(context.Background(), &testgrain.AddRequest{Delta: 1})
		require.NoError(t, err)
	}

	got := collect(t, reader)
	silo := attribute.String("silo", "test-silo")
	add := []attribute.KeyValue{silo, attribute.String("grain.type", testgrain.CounterGrainType), attribute.String("grain.method", "Add")}
	calls, ok := got.sum("granary.grain.calls", append(add, attribute.String("outcome", "ok"))...)
	require.True(t, ok, "calls of Add reported")
	assert.EqualValues(t, 3, calls)
	failed, ok := got.sum("granary.grain.calls", append(add, attribute.String("outcome", "error"))...)
	require.True(t, ok, "every outcome is reported, zero included")
	assert.Zero(t, failed)

	hist, ok := got["granary.grain.call.duration"].(metricdata.Histogram[float64])
	require.True(t, ok, "call durations recorded")
	var timed uint64
	for _, dp := range hist.DataPoints {
		if hasAll(dp.Attributes, add) {
			timed += dp.Count
		}
	}
	assert.EqualValues(t, 3, timed)

	active, _ := got.sum("granary.activations", silo)
	assert.EqualValues(t, 1, active)
	framesIn := attribute.String("direction", "in")
	gateway := attribute.String("connection", "gateway")
	before, ok := got.sum("granary.transport.frames", silo, gateway, framesIn)
	require.True(t, ok)
	assert.GreaterOrEqual(t, before, int64(3), "three requests at least")

	require.NoError(t, c.Close())
	eventually(t, func() bool { return e.silo.Stats().Clients == 0 }, "the connection closed")
	after, _ := collect(t, reader).sum("granary.transport.frames", silo, gateway, framesIn)
	assert.GreaterOrEqual(t, after, before, "a closed connection's frames still count")
}

// Without a meter provider the silo still counts calls by method, and
// records no durations.
func TestCallsCountedWithoutMeterProvider(t *testing.T) {
	e := startSilo(t, envConfig{})
	_, err := testgrain.NewCounterRef(e.silo.Caller(), "k").Add(context.Background(), &testgrain.AddRequest{Delta: 1})
	require.NoError(t, err)
	var adds uint64
	for _, mc := range e.silo.Stats().Calls {
		if mc.Type == testgrain.CounterGrainType && mc.Method == "Add" {
			adds += mc.OK
		}
	}
	assert.EqualValues(t, 1, adds)
}

// Ready says why a silo does not serve: not started, starting (joining
// its cluster), stopping.
func TestReadyFollowsStartAndStop(t *testing.T) {
	// Nothing answers at the seed: Start keeps trying until its ctx ends.
	nobody, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer nobody.Close()
	s, err := silo.New(silo.Options{Name: "lonely", GatewayAddress: "127.0.0.1:0", Cluster: silo.ClusterOptions{
		Enabled: true, Seeds: []string{nobody.LocalAddr().String()}, Timings: cluster.FastTimings(),
	}, Security: silo.Security{Secret: []byte("a secret of at least 16 bytes")}}, silo.WithLogger(quiet))
	require.NoError(t, err)
	require.ErrorIs(t, s.Ready(), silo.ErrNotStarted)

	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- s.Start(ctx) }()
	eventually(t, func() bool { return s.Ready() != nil && s.Ready() != silo.ErrNotStarted }, "Ready tells that Start runs")
	require.ErrorIs(t, s.Ready(), silo.ErrNotStarted)
	cancel()
	require.Error(t, <-started)
	require.ErrorIs(t, s.Ready(), silo.ErrNotStarted, "a failed Start leaves it not started")

	// A silo that started is ready until Stop begins, which waits here
	// for a busy turn.
	e := startSilo(t, envConfig{})
	require.NoError(t, e.silo.Ready())
	busy := make(chan error, 1)
	go func() {
		_, err := testgrain.NewCounterRef(e.silo.Caller(), "k").Block(context.Background(), &testgrain.BlockRequest{Tag: "busy"})
		busy <- err
	}()
	require.Equal(t, "busy", <-e.gate.Entered())
	stopped := make(chan error, 1)
	go func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped <- e.silo.Stop(stopCtx)
	}()
	eventually(t, func() bool { return e.silo.Ready() == silo.ErrStopping }, "stopping")
	e.gate.Release("busy")
	require.NoError(t, <-busy)
	require.NoError(t, <-stopped)
	assert.ErrorIs(t, e.silo.Ready(), silo.ErrStopping, "a stopped silo stays unready")
}

// A silo that never starts lets go of its instruments when it is stopped,
// and does not start afterwards.
func TestStopOfASiloThatNeverStartedUnregistersItsInstruments(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	s, err := silo.New(silo.Options{DisableGateway: true}, silo.WithMeterProvider(mp))
	require.NoError(t, err)
	_, registered := collect(t, reader)["granary.activations"]
	require.True(t, registered, "New registers the instruments")

	require.NoError(t, s.Stop(context.Background()))
	assert.Empty(t, collect(t, reader), "no instrument is left on the provider")
	require.ErrorIs(t, s.Start(context.Background()), silo.ErrStopping)
	require.NoError(t, s.Stop(context.Background()), "Stop again")
}
