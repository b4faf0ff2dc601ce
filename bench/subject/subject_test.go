package subject_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/bench"
	"github.com/granary-go/granary/bench/subject"
	"github.com/granary-go/granary/grains/ratelimit"
)

func started(t *testing.T) (*subject.Cluster, *subject.Granary) {
	t.Helper()
	topo := subject.NewCluster()
	g := subject.New(topo)
	require.NoError(t, g.Start(t.Context()))
	t.Cleanup(func() {
		require.NoError(t, g.Stop(context.Background()))
		require.NoError(t, g.Stop(context.Background()), "Stop twice")
	})
	return topo, g
}

func statistics(t *testing.T, topo *subject.Cluster, c bench.Case, key int) ratelimit.Statistics {
	t.Helper()
	var h ratelimit.Limiter
	name := fmt.Sprintf("bench/%s/%d", c, key)
	switch c.Algorithm {
	case bench.Concurrency:
		h = ratelimit.Concurrency(topo.Caller(), name)
	case bench.FixedWindow, bench.FixedWindowLeased:
		h = ratelimit.FixedWindow(topo.Caller(), name)
	}
	st, err := h.Statistics(t.Context())
	require.NoError(t, err)
	return st
}

func TestConcurrencyOperationsReleaseWhatTheyAcquire(t *testing.T) {
	topo, g := started(t)
	c := bench.Case{Algorithm: bench.Concurrency, Scenario: bench.Partitioned, Cancellable: true}
	wl, err := g.Prepare(t.Context(), c)
	require.NoError(t, err)
	checked, err := wl.CheckPlacement(t.Context())
	require.True(t, checked)
	require.NoError(t, err, "placed by Prepare")
	for w := range 32 {
		require.NoError(t, wl.Do(t.Context(), w%c.Scenario.Workers()))
	}
	for key := range c.Scenario.Keys() {
		st := statistics(t, topo, c, key)
		assert.EqualValues(t, 2, st.TotalSuccessfulLeases, "key %d: two operations of 32 over 16 keys", key)
		assert.EqualValues(t, bench.Quota, st.AvailablePermits, "key %d: every permit back", key)
		assert.Zero(t, st.ActiveLeases)
	}
	require.NoError(t, wl.Close(t.Context()))
}

func TestAbandonedAcquisitionsKeepTheirPermits(t *testing.T) {
	topo, g := started(t)
	c := bench.Case{Algorithm: bench.FixedWindow, Scenario: bench.Abandoned}
	wl, err := g.Prepare(t.Context(), c)
	require.NoError(t, err)
	for w := range 10 {
		require.NoError(t, wl.Do(context.Background(), w))
	}
	st := statistics(t, topo, c, 0)
	assert.EqualValues(t, 10, st.TotalSuccessfulLeases)
	assert.EqualValues(t, bench.Quota-10, st.AvailablePermits, "bound options configured the grain: the quota, no replenishment")
}

func TestLeasedOperationsChargeWhatTheyTakeAndCloseGivesTheRestBack(t *testing.T) {
	topo, g := started(t)
	c := bench.Case{Algorithm: bench.FixedWindowLeased, Scenario: bench.HotKey}
	wl, err := g.Prepare(t.Context(), c)
	require.NoError(t, err)
	for w := range 64 {
		require.NoError(t, wl.Do(context.Background(), w%c.Scenario.Workers()))
	}
	require.NoError(t, wl.Close(t.Context()))
	st := statistics(t, topo, c, 0)
	assert.EqualValues(t, bench.LeasedQuota-64, st.AvailablePermits, "per call or from a slice, every operation took one permit, and no more")
}

func TestEveryCaseOfTheMatrixRunsOnTwoSilos(t *testing.T) {
	o := bench.Options{Operations: 32, Repetitions: 1, WarmupPerHolder: 1, Revision: "test"}
	o.EnsureDefaults()
	rep := bench.Run(t.Context(), o, []bench.System{subject.New(subject.NewCluster())}, nil, io.Discard)
	require.Empty(t, rep.Failures)
	doc, err := json.Marshal(rep)
	require.NoError(t, err)
	require.NoError(t, bench.Check(doc, bench.Expectation{Repetitions: 1, Operations: 32, Placement: []string{bench.Granary}}))
	assert.Len(t, rep.Results, len(o.Matrix().Cases()))
	assert.Contains(t, rep.Results[0].Topology, "two silos")
}

// elsewhere is a topology whose grains are all found on another silo.
type elsewhere struct{ *subject.Cluster }

func (elsewhere) SiloOf(context.Context, actor.GrainID) (string, error) { return "silo-1", nil }

func TestAGrainOffItsSiloFailsThePlacementCheck(t *testing.T) {
	topo := elsewhere{subject.NewCluster()}
	g := subject.New(topo)
	require.NoError(t, g.Start(t.Context()))
	defer func() { require.NoError(t, g.Stop(context.Background())) }()
	wl, err := g.Prepare(t.Context(), bench.Case{Algorithm: bench.TokenBucket, Scenario: bench.HotKey})
	require.NoError(t, err)
	checked, err := wl.CheckPlacement(t.Context())
	assert.True(t, checked)
	require.ErrorIs(t, err, subject.ErrMoved)
	assert.Contains(t, err.Error(), `on "silo-1", not "silo-0"`)
}

func TestPrepareRefusesAnAlgorithmGranaryHasNot(t *testing.T) {
	_, g := started(t)
	_, err := g.Prepare(t.Context(), bench.Case{Algorithm: bench.GCRA, Scenario: bench.Sequential})
	assert.ErrorIs(t, err, bench.ErrInvalidOption)
}
