package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// freeGossipAddress returns a loopback address nobody listens on, for a
// silo that must know its gossip address before it starts.
func freeGossipAddress(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// everySeed are options for silo id on the fixed gossip address bind,
// seeded with every address in all, its own included: the recipe
// docs/cluster.md gives.
func everySeed(id, bind string, all []string) Options {
	o := siloOptions(id, all...)
	o.BindAddress = bind
	return o
}

func TestARestartedSiloRejoinsItsClusterAndNeverFormsItsOwn(t *testing.T) {
	addrs := []string{freeGossipAddress(t), freeGossipAddress(t), freeGossipAddress(t)}
	// All three start at once with the same seeds: whichever dials second
	// finds the first listening, so the cluster forms without a bootstrap.
	ms := make([]*Membership, 3)
	var wg sync.WaitGroup
	for i := range ms {
		wg.Go(func() { ms[i] = startSilo(t, everySeed(fmt.Sprintf("silo-%d", i), addrs[i], addrs)) })
	}
	wg.Wait()
	waitForViews(t, ms, ms...)
	_, sub := ms[1].Subscribe()
	defer sub.Close()

	old := ms[0].Local()
	ms[0].Kill()
	waitForEvent(t, sub, detectionBound(ms[0].opts.Timings, 3), departureOf(old.ID))

	restarted := startSilo(t, everySeed(old.ID, addrs[0], addrs)) // the same command again
	require.Greater(t, restarted.Local().Generation, old.Generation)
	assert.Greater(t, len(restarted.View().Members), 1, "Start returned before the silo met its cluster")
	ms[0] = restarted
	for _, m := range ms {
		require.Eventually(t, func() bool {
			got, _ := m.View().Member(old.ID)
			return len(m.View().Members) == 3 && got.Generation == restarted.Local().Generation
		}, waitFor, 5*time.Millisecond, "%s never saw the new incarnation in a view of 3: %v", m.Local().ID, m.View())
	}
}

func TestASiloWhoseSeedsDoNotAnswerFormsNoCluster(t *testing.T) {
	self := freeGossipAddress(t)
	opts := everySeed("lonely", self, []string{self, "127.0.0.1:1", "127.0.0.1:2"}) // nobody listens there
	logger, logs := newRecorder()
	m, err := New(opts, WithLogger(logger))
	require.NoError(t, err)
	t.Cleanup(m.Kill)
	ctx, cancel := context.WithTimeout(context.Background(), 30*opts.Timings.JoinRetryInterval)
	defer cancel()
	err = m.Start(ctx)
	assert.ErrorIs(t, err, ErrJoin)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, m.SetStatus(StatusActive), ErrStopped, "a failed Start leaves it stopped")
	assert.Empty(t, logs.find(func(r logRecord) bool { return r.message == "cluster: no seed but this silo: starting a new cluster" }))
	assert.Len(t, logs.find(func(r logRecord) bool {
		return r.message == "cluster: waiting for a seed to answer; a silo that names other seeds never starts a cluster alone"
	}), 1)
}

func TestASiloWaitingForSeedsJoinsTheFirstThatStarts(t *testing.T) {
	addrs := []string{freeGossipAddress(t), freeGossipAddress(t)}
	first, err := New(everySeed("first", addrs[0], addrs), WithLogger(discard))
	require.NoError(t, err)
	t.Cleanup(first.Kill)
	started := make(chan error, 1)
	go func() { started <- first.Start(context.Background()) }()
	require.Eventually(t, func() bool { return first.GossipAddress() != "" }, waitFor, time.Millisecond)
	select {
	case err := <-started:
		t.Fatalf("Start returned alone: %v", err)
	default:
	}

	second := startSilo(t, everySeed("second", addrs[1], addrs))
	require.NoError(t, <-started)
	waitForViews(t, []*Membership{first, second}, first, second)
}

func TestBootstrapFormsANewClusterWhenNoSeedAnswers(t *testing.T) {
	self := freeGossipAddress(t)
	opts := everySeed("phoenix", self, []string{self, "127.0.0.1:1"})
	opts.Bootstrap = true
	logger, logs := newRecorder()
	m := startSilo(t, opts, WithLogger(logger))
	assert.Equal(t, []string{"phoenix"}, viewIDs(m.View()))
	warned := logs.find(func(r logRecord) bool {
		return r.level == slog.LevelWarn && r.message == "cluster: no seed answered; starting a new cluster, as Bootstrap asks"
	})
	assert.Len(t, warned, 1)
}

func TestBootstrapStillJoinsASeedThatAnswers(t *testing.T) {
	first := startSilo(t, siloOptions("first"))
	opts := siloOptions("second", first.GossipAddress())
	opts.Bootstrap = true
	second := startSilo(t, opts)
	waitForViews(t, []*Membership{first, second}, first, second)
}

func TestASeedThatIsThisSiloUnderAnotherNameIsSkipped(t *testing.T) {
	self := freeGossipAddress(t)
	_, port, _ := net.SplitHostPort(self)
	logger, logs := newRecorder()
	m := startSilo(t, everySeed("named", self, []string{"localhost:" + port}), WithLogger(logger))
	assert.Equal(t, []string{"named"}, viewIDs(m.View()))
	assert.NotEmpty(t, logs.find(func(r logRecord) bool { return r.message == "cluster: seed is this silo; skipping it" }))
	assert.True(t, slices.ContainsFunc(logs.find(func(r logRecord) bool { return true }), func(r logRecord) bool {
		return r.message == "cluster: no seed but this silo: starting a new cluster"
	}))
}
