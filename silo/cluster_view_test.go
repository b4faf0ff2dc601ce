package silo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/silo"
)

const membersGauge = "granary.cluster.members"

func membersIn(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	got := collect(t, r)
	out := map[string]int64{}
	for _, state := range []string{"joining", "active", "shutting-down"} {
		v, found := got.sum(membersGauge, attribute.String("state", state))
		require.True(t, found, "%s{state=%s} reported", membersGauge, state)
		out[state] = v
	}
	return out
}

// A silo that stands alone shows only itself, in the status of its life
// cycle and since its last change by its clock, and counts itself in the
// members gauge.
func TestASiloAloneSeesOnlyItself(t *testing.T) {
	fake := clock.NewFake(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	s, err := silo.New(silo.Options{Name: "alone", GatewayAddress: "127.0.0.1:0"},
		silo.WithLogger(quiet), silo.WithClock(fake), silo.WithMeterProvider(mp))
	require.NoError(t, err)

	v := s.ClusterView()
	require.Len(t, v.Members, 1)
	assert.Equal(t, "alone", v.Self)
	assert.Zero(t, v.Version)
	assert.Equal(t, cluster.StatusJoining, v.Members[0].State, "not started")
	assert.WithinDuration(t, fake.Now(), v.Members[0].Since, 0, "created")

	fake.Advance(time.Minute)
	require.NoError(t, s.Start(context.Background()))
	v = s.ClusterView()
	require.Len(t, v.Members, 1)
	self := v.Members[0]
	assert.Equal(t, "alone", self.ID)
	assert.Equal(t, cluster.StatusActive, self.Status)
	assert.Equal(t, cluster.StatusActive, self.State)
	assert.Equal(t, fake.Now(), self.Since, "started")
	assert.Equal(t, s.GatewayAddr().String(), self.Gateway)
	assert.Positive(t, self.Generation)
	assert.Empty(t, self.Address, "no silo address without a cluster")
	assert.Equal(t, 1, v.Count(cluster.StatusActive))
	assert.Equal(t, map[string]int64{"joining": 0, "active": 1, "shutting-down": 0}, membersIn(t, reader))

	fake.Advance(time.Minute)
	require.NoError(t, s.Stop(context.Background()))
	v = s.ClusterView()
	assert.Equal(t, cluster.StatusShuttingDown, v.Members[0].State)
	assert.Equal(t, fake.Now(), v.Members[0].Since, "stopped")
}

// startClusterSilo starts a silo of a cluster on loopback, stopped when
// the test ends.
func startClusterSilo(t *testing.T, name string, mp *sdkmetric.MeterProvider, seeds ...string) *silo.Silo {
	t.Helper()
	opts := []silo.Option{silo.WithLogger(quiet)}
	if mp != nil {
		opts = append(opts, silo.WithMeterProvider(mp))
	}
	s, err := silo.New(silo.Options{Name: name, GatewayAddress: "127.0.0.1:0", Cluster: silo.ClusterOptions{
		Enabled: true, SiloAddress: "127.0.0.1:0", GossipAddress: "127.0.0.1:0", Seeds: seeds, Timings: cluster.FastTimings(),
	}, Security: silo.Security{Secret: []byte("a secret of at least 16 bytes")}}, opts...)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Stop(ctx)
	})
	return s
}

func gossipOf(t *testing.T, s *silo.Silo) string {
	t.Helper()
	v, err := s.Members()
	require.NoError(t, err)
	self, ok := v.Member(s.Name())
	require.True(t, ok)
	return self.GossipAddress
}

// A silo of a cluster shows every member with its addresses, generation,
// status and since when, counts them by state in the members gauge, and
// sees a member that leaves go.
func TestASiloOfAClusterSeesEveryMember(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	a := startClusterSilo(t, "a", mp)
	b := startClusterSilo(t, "b", nil, gossipOf(t, a))

	eventually(t, func() bool { return a.ClusterView().Count(cluster.StatusActive) == 2 }, "a sees a and b active")
	v := a.ClusterView()
	assert.Equal(t, "a", v.Self)
	assert.Positive(t, v.Version)
	require.Len(t, v.Members, 2)
	assert.Equal(t, []string{"a", "b"}, []string{v.Members[0].ID, v.Members[1].ID}, "sorted by name")
	for i, s := range []*silo.Silo{a, b} {
		m := v.Members[i]
		assert.Equal(t, s.GatewayAddr().String(), m.Gateway, m.ID)
		assert.NotEmpty(t, m.Address, m.ID)
		assert.Equal(t, gossipOf(t, s), m.GossipAddress, m.ID)
		assert.Positive(t, m.Generation, m.ID)
		assert.Equal(t, cluster.StatusActive, m.Status, m.ID)
		assert.Equal(t, cluster.StatusActive, m.State, m.ID)
		assert.False(t, m.Since.IsZero(), m.ID)
	}
	assert.Equal(t, map[string]int64{"joining": 0, "active": 2, "shutting-down": 0}, membersIn(t, reader))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, b.Stop(ctx))
	eventually(t, func() bool { return len(a.ClusterView().Members) == 1 }, "a sees b leave")
	assert.Equal(t, map[string]int64{"joining": 0, "active": 1, "shutting-down": 0}, membersIn(t, reader))
}
