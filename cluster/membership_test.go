package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
)

var discard = slog.New(slog.DiscardHandler)

// siloOptions are the options of a test silo on loopback: an ephemeral
// gossip port and the fast timings. Address and Gateway are never dialled
// by membership; they only need to be well-formed and distinct.
func siloOptions(id string, seeds ...string) Options {
	return Options{
		SiloID:      id,
		Address:     "127.0.0.1:" + fmt.Sprint(11000+len(id)),
		Gateway:     "127.0.0.1:" + fmt.Sprint(30000+len(id)),
		BindAddress: "127.0.0.1:0",
		Seeds:       seeds,
		Timings:     FastTimings(),
	}
}

// startSilo starts a Membership and kills it when the test ends.
func startSilo(t testing.TB, opts Options, optFns ...Option) *Membership {
	t.Helper()
	m, err := New(opts, append([]Option{WithLogger(discard)}, optFns...)...)
	require.NoError(t, err)
	t.Cleanup(m.Kill)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, m.Start(ctx))
	return m
}

// startSilos starts n silos, silo-0 first and the others seeded with it,
// and waits until every view shows all of them.
func startSilos(t testing.TB, n int) []*Membership {
	t.Helper()
	return startSilosWith(t, n, FastTimings())
}

// startSilosWith is startSilos with other timings.
func startSilosWith(t testing.TB, n int, timings Timings) []*Membership {
	t.Helper()
	options := func(id string, seeds ...string) Options {
		o := siloOptions(id, seeds...)
		o.Timings = timings
		return o
	}
	ms := []*Membership{startSilo(t, options("silo-0"))}
	for i := 1; i < n; i++ {
		ms = append(ms, startSilo(t, options(fmt.Sprintf("silo-%d", i), ms[0].GossipAddress())))
	}
	waitForViews(t, ms, ms...)
	return ms
}

func ids(ms []*Membership) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Local().ID
	}
	slices.Sort(out)
	return out
}

func viewIDs(v View) []string {
	out := make([]string, len(v.Members))
	for i, m := range v.Members {
		out[i] = m.ID
	}
	return out
}

// waitForViews waits until the view of every silo in at shows exactly the
// silos in want.
func waitForViews(t testing.TB, at []*Membership, want ...*Membership) {
	t.Helper()
	wantIDs := ids(want)
	for _, m := range at {
		require.Eventually(t, func() bool { return slices.Equal(wantIDs, viewIDs(m.View())) },
			waitFor, 5*time.Millisecond, "%s sees %v, want %v", m.Local().ID, viewIDs(m.View()), wantIDs)
	}
}

// waitForEvent takes events from s until one satisfies match, within d.
func waitForEvent(t testing.TB, s *Subscription, d time.Duration, match func(Event) bool) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		events, err := s.Next(ctx)
		require.NoError(t, err, "no matching event within %v", d)
		for _, e := range events {
			if match(e) {
				return e
			}
		}
	}
}

func departureOf(id string) func(Event) bool {
	return func(e Event) bool {
		return e.Member.ID == id && (e.Kind == EventLeft || e.Kind == EventFailed)
	}
}

// detectionBound is the longest memberlist should take, with timings t in
// a healthy cluster of n silos, from a silo's crash to the others' dead
// verdict (docs/cluster.md derives it): the dead silo may be probed last
// in every prober's round, the probe round runs its full interval, the
// suspicion runs to its maximum, and the verdict needs a few gossip rounds.
// Twice that leaves room for a loaded test machine.
func detectionBound(t Timings, n int) time.Duration {
	scale := math.Max(1, math.Log10(float64(n)))
	suspicion := time.Duration(float64(t.SuspicionMaxTimeoutMult*t.SuspicionMult) * scale * float64(t.ProbeInterval))
	return 2 * (time.Duration(n)*t.ProbeInterval + suspicion + 5*t.GossipInterval)
}

// Five silos converge: there is a moment when every view holds every silo
// as it describes itself. The views are read together, in one condition
// polled until it holds: checked one after the other, a view seen complete
// may lose a member before the last is read, as a loaded machine's stall
// makes a live silo suspect for a while. The test is of joins, not of
// failure detection, so its probes are slow enough that a stall of a
// loaded machine (hundreds of milliseconds at a load average of 18 on two
// cores) does not make a live silo dead and the moment never come.
func TestSilosJoinAndConverge(t *testing.T) {
	timings := FastTimings()
	timings.ProbeInterval, timings.ProbeTimeout = 500*time.Millisecond, 250*time.Millisecond
	ms := startSilosWith(t, 5, timings)
	// why is written by the condition, which may still run when Eventually
	// has given up, and read after.
	var whyMu sync.Mutex
	var why string
	converged := func() bool {
		whyMu.Lock()
		defer whyMu.Unlock()
		for _, m := range ms {
			v := m.View()
			if len(v.Members) != len(ms) {
				why = fmt.Sprintf("%s sees %v", m.Local().ID, viewIDs(v))
				return false
			}
			for _, other := range ms {
				got, ok := v.Member(other.Local().ID)
				if !ok || got.Since.IsZero() {
					why = fmt.Sprintf("%s does not see %s, or sees it untimed", m.Local().ID, other.Local().ID)
					return false
				}
				got.Since = time.Time{} // Local has none
				if got != other.Local() {
					why = fmt.Sprintf("%s sees %s as %+v, not %+v", m.Local().ID, other.Local().ID, got, other.Local())
					return false
				}
			}
		}
		return true
	}
	if !assert.Eventually(t, converged, waitFor, 5*time.Millisecond) {
		whyMu.Lock()
		defer whyMu.Unlock()
		t.Fatalf("the views never agreed at once; last: %s", why)
	}
	assert.NotEqual(t, ms[0].GossipAddress(), ms[1].GossipAddress())
}

// The event of a join carries the member as it announced itself, timed by
// the receiving membership's clock.
func TestAJoiningSiloIsAnnouncedToSubscribers(t *testing.T) {
	seen := clock.NewFake(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	first := startSilo(t, siloOptions("first"), WithClock(seen))
	view, sub := first.Subscribe()
	assert.Equal(t, []string{"first"}, viewIDs(view))
	second := startSilo(t, siloOptions("second", first.GossipAddress()))
	e := waitForEvent(t, sub, waitFor, func(e Event) bool { return e.Member.ID == "second" })
	assert.Equal(t, EventJoined, e.Kind)
	assert.Equal(t, seen.Now(), e.Member.Since, "by first's clock")
	e.Member.Since = time.Time{}
	assert.Equal(t, second.Local(), e.Member)
	assert.Greater(t, e.Version, view.Version)
}

func TestMetadataUpdatesPropagate(t *testing.T) {
	ms := startSilos(t, 3)
	_, sub := ms[0].Subscribe()
	require.NoError(t, ms[1].SetStatus(StatusActive))
	ms[1].SetLoad(42)
	ms[2].SetLoad(-5)

	for _, m := range ms {
		require.Eventually(t, func() bool {
			got, _ := m.View().Member("silo-1")
			return got.Status == StatusActive && got.Load == 42
		}, waitFor, 5*time.Millisecond, "%s never saw silo-1's update", m.Local().ID)
	}
	e := waitForEvent(t, sub, waitFor, func(e Event) bool { return e.Member.ID == "silo-1" && e.Member.Load == 42 })
	assert.Equal(t, EventUpdated, e.Kind)
	assert.Equal(t, StatusActive, e.Member.Status)
	assert.Zero(t, ms[2].Local().Load, "a negative load counts as zero")
	assert.ErrorIs(t, ms[1].SetStatus(Status(0)), ErrInvalidStatus)
}

func TestAGracefulStopIsSeenAsLeft(t *testing.T) {
	ms := startSilos(t, 3)
	_, sub0 := ms[0].Subscribe()
	_, sub1 := ms[1].Subscribe()
	_, own := ms[2].Subscribe()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, ms[2].Stop(ctx))
	for _, sub := range []*Subscription{sub0, sub1} {
		e := waitForEvent(t, sub, waitFor, departureOf("silo-2"))
		assert.Equal(t, EventLeft, e.Kind)
		assert.Equal(t, StatusShuttingDown, e.Member.Status, "it announced shutting down before leaving")
	}
	waitForViews(t, ms[:2], ms[:2]...)

	// The leaver's own subscription saw its departure, then closed.
	e := waitForEvent(t, own, waitFor, departureOf("silo-2"))
	assert.Equal(t, EventLeft, e.Kind)
	_, err := own.Next(ctx)
	for err == nil {
		_, err = own.Next(ctx)
	}
	assert.ErrorIs(t, err, ErrSubscriptionClosed)

	assert.Equal(t, StatusShuttingDown, ms[2].Local().Status)
	assert.NoError(t, ms[2].Stop(ctx), "Stop twice")
	ms[2].Kill()
	assert.ErrorIs(t, ms[2].SetStatus(StatusActive), ErrStopped)
}

func TestAKilledSiloIsReportedFailedWithinTheDetectionTime(t *testing.T) {
	ms := startSilos(t, 4)
	var subs []*Subscription
	for _, m := range ms[:3] {
		_, s := m.Subscribe()
		subs = append(subs, s)
	}
	bound := detectionBound(FastTimings(), len(ms))
	killed := time.Now()
	ms[3].Kill()
	for i, s := range subs {
		e := waitForEvent(t, s, bound, departureOf("silo-3"))
		assert.Equal(t, EventFailed, e.Kind)
		t.Logf("silo-%d saw the failure after %v (bound %v)", i, time.Since(killed).Round(time.Millisecond), bound)
	}
	waitForViews(t, ms[:3], ms[:3]...)
}

func TestViewVersionsOnlyIncrease(t *testing.T) {
	first := startSilo(t, siloOptions("silo-0"))
	view, sub := first.Subscribe()

	// A reader polls the view while the membership churns.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var polled []uint64
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				polled = append(polled, first.View().Version)
			}
		}
	})

	ms := []*Membership{first}
	for i := 1; i <= 3; i++ {
		ms = append(ms, startSilo(t, siloOptions(fmt.Sprintf("silo-%d", i), first.GossipAddress())))
	}
	waitForViews(t, ms, ms...)
	for round := int64(1); round <= 3; round++ {
		for _, m := range ms {
			m.SetLoad(round)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, ms[3].Stop(ctx))
	ms[2].Kill()
	waitForEvent(t, sub, detectionBound(FastTimings(), 4), func(e Event) bool { return e.Member.ID == "silo-2" && e.Kind == EventFailed })
	close(stop)
	wg.Wait()

	events, err := sub.Take()
	require.NoError(t, err)
	last := view.Version
	seenVersion := first.View().Version
	for _, e := range events {
		assert.Greater(t, e.Version, last)
		last = e.Version
	}
	assert.LessOrEqual(t, last, seenVersion)
	for i := 1; i < len(polled); i++ {
		require.GreaterOrEqual(t, polled[i], polled[i-1], "the view version went back")
	}
}

func TestAWrongSecretOrClusterIDNeverJoins(t *testing.T) {
	secret := []byte("the cluster's own secret")
	cases := []struct {
		name          string
		cluster, silo func(o *Options)
	}{
		{"wrong secret", func(o *Options) { o.Secret = secret }, func(o *Options) { o.Secret = []byte("some other secret!!") }},
		{"no secret against a secret", func(o *Options) { o.Secret = secret }, func(o *Options) {}},
		{"a secret against none", func(o *Options) {}, func(o *Options) { o.Secret = secret }},
		{"wrong cluster id", func(o *Options) { o.ClusterID = "prod" }, func(o *Options) { o.ClusterID = "staging" }},
		{"wrong cluster id, same secret", func(o *Options) { o.ClusterID, o.Secret = "prod", secret }, func(o *Options) { o.ClusterID, o.Secret = "staging", secret }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := siloOptions("member")
			tc.cluster(&opts)
			member := startSilo(t, opts)
			_, sub := member.Subscribe()

			opts = siloOptions("intruder", member.GossipAddress())
			tc.silo(&opts)
			intruder, err := New(opts, WithLogger(discard))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err = intruder.Start(ctx)
			require.ErrorIs(t, err, ErrJoin)
			assert.ErrorIs(t, err, context.DeadlineExceeded)

			assert.Equal(t, []string{"intruder"}, viewIDs(intruder.View()))
			assert.Equal(t, []string{"member"}, viewIDs(member.View()))
			assert.Equal(t, 1, member.mu.ml.NumMembers(), "memberlist itself never admitted it")
			events, err := sub.Take()
			require.NoError(t, err)
			assert.Empty(t, events)
		})
	}

	t.Run("the same secret and cluster id join", func(t *testing.T) {
		opts := siloOptions("member")
		opts.ClusterID, opts.Secret = "prod", secret
		member := startSilo(t, opts)
		opts = siloOptions("friend", member.GossipAddress())
		opts.ClusterID, opts.Secret = "prod", secret
		friend := startSilo(t, opts)
		waitForViews(t, []*Membership{member, friend}, member, friend)
	})
}

// garbledMeta is a memberlist delegate that publishes metadata no granary
// silo can read.
type garbledMeta struct{}

func (garbledMeta) NodeMeta(int) []byte             { return []byte{metaVersion, 0xee, 0xff} }
func (garbledMeta) NotifyMsg([]byte)                {}
func (garbledMeta) GetBroadcasts(int, int) [][]byte { return nil }
func (garbledMeta) LocalState(bool) []byte          { return nil }
func (garbledMeta) MergeRemoteState([]byte, bool)   {}

func TestAMemberWithUnreadableMetadataIsInvisible(t *testing.T) {
	log, rec := newRecorder()
	member := startSilo(t, siloOptions("member"), WithLogger(log))
	versionBefore := member.View().Version

	// A memberlist node of the same cluster that speaks no granary.
	stranger, err := New(siloOptions("stranger"))
	require.NoError(t, err)
	conf := stranger.memberlistConfig()
	conf.Delegate, conf.Events = garbledMeta{}, nil
	conf.Logger = memberlistLogger(discard)
	ml, err := memberlist.Create(conf)
	require.NoError(t, err)
	defer func() { _ = ml.Shutdown() }()
	_, err = ml.Join([]string{member.GossipAddress()})
	require.NoError(t, err)

	require.Eventually(t, func() bool { return member.mu.ml.NumMembers() == 2 }, waitFor, 5*time.Millisecond,
		"memberlist knows the stranger")
	require.Eventually(t, func() bool {
		return len(rec.find(func(r logRecord) bool { return r.level == slog.LevelWarn && r.attrs["member"] == "stranger" })) > 0
	}, waitFor, 5*time.Millisecond, "the stranger's metadata is reported")
	v := member.View()
	assert.Equal(t, []string{"member"}, viewIDs(v))
	assert.Equal(t, versionBefore, v.Version)
}

// The silos probe with partitionTimings: the test counts departures, and a
// live silo falsely declared dead on a loaded machine (and revived by the
// rejoin loop) would add departures and joins that say nothing of the
// subscriber's queue.
func TestASlowSubscriberDoesNotStallGossip(t *testing.T) {
	ms := startSilosWith(t, 3, partitionTimings())
	_, slow := ms[0].Subscribe() // never read until the end
	_, watcher := ms[0].Subscribe()

	for round := int64(1); round <= 20; round++ {
		for _, m := range ms {
			m.SetLoad(round)
		}
		for _, m := range ms {
			require.Eventually(t, func() bool {
				got, _ := ms[0].View().Member(m.Local().ID)
				return got.Load == round
			}, waitFor, time.Millisecond)
		}
	}
	ms[2].Kill()
	e := waitForEvent(t, watcher, detectionBound(partitionTimings(), 3), departureOf("silo-2"))
	assert.Equal(t, EventFailed, e.Kind)

	// The slow queue kept every departure and, per member, only the newest
	// of its many updates.
	events, err := slow.Take()
	require.NoError(t, err)
	updates := map[string]int{}
	var failed int
	for _, e := range events {
		switch e.Kind {
		case EventUpdated:
			updates[e.Member.ID]++
		case EventFailed:
			failed++
		}
	}
	assert.Equal(t, 1, failed)
	for id, n := range updates {
		assert.Equal(t, 1, n, "queued updates of %s", id)
	}
	assert.LessOrEqual(t, len(events), len(ms)+1)
}

func TestMemberlistLogsThroughTheInjectedLogger(t *testing.T) {
	// Anything memberlist wrote to stderr would land in this pipe.
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stderr := os.Stderr
	os.Stderr = w
	defer func() { os.Stderr = stderr }()

	log, rec := newRecorder()
	a := startSilo(t, siloOptions("a"), WithLogger(log))
	b := startSilo(t, siloOptions("b", a.GossipAddress()), WithLogger(log))
	waitForViews(t, []*Membership{a, b}, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.Stop(ctx))
	a.Kill()

	os.Stderr = stderr
	require.NoError(t, w.Close())
	printed, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Empty(t, string(printed))

	fromMemberlist := rec.find(func(r logRecord) bool { return r.attrs["component"] == "memberlist" })
	require.NotEmpty(t, fromMemberlist)
	assert.NotEmpty(t, fromMemberlist[0].attrs["silo"], "memberlist's lines name the silo")
}

func TestStopInterruptsAStartThatWaitsForSeeds(t *testing.T) {
	lonely, err := New(siloOptions("lonely", "127.0.0.1:1"), WithLogger(discard)) // nobody listens there
	require.NoError(t, err)
	started := make(chan error, 1)
	go func() { started <- lonely.Start(context.Background()) }()
	require.Eventually(t, func() bool { return lonely.GossipAddress() != "" }, waitFor, time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, lonely.Stop(ctx))
	assert.ErrorIs(t, <-started, ErrStopped)
	assert.ErrorIs(t, lonely.Start(ctx), ErrStarted)
}

func TestAFailedStartLeavesTheMembershipStopped(t *testing.T) {
	taken := startSilo(t, siloOptions("taken"))
	opts := siloOptions("clash")
	opts.BindAddress = taken.GossipAddress()
	m, err := New(opts, WithLogger(discard))
	require.NoError(t, err, "New does no I/O")
	_, sub := m.Subscribe()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = m.Start(ctx)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrJoin)
	assert.ErrorIs(t, m.Start(ctx), ErrStarted)
	assert.ErrorIs(t, m.SetStatus(StatusActive), ErrStopped)
	_, err = sub.Take()
	assert.ErrorIs(t, err, ErrSubscriptionClosed)
	assert.NoError(t, m.Stop(ctx))
}

func TestStopBeforeStart(t *testing.T) {
	m, err := New(siloOptions("never"), WithLogger(discard))
	require.NoError(t, err)
	ctx := context.Background()
	assert.NoError(t, m.Stop(ctx))
	m.Kill()
	assert.ErrorIs(t, m.Start(ctx), ErrStopped)
	_, sub := m.Subscribe()
	_, err = sub.Take()
	assert.ErrorIs(t, err, ErrSubscriptionClosed)
}

func TestASiloListingItselfAsSeedStartsACluster(t *testing.T) {
	opts := siloOptions("alone")
	opts.BindAddress = "127.0.0.1:0"
	m := startSilo(t, opts)
	// A second silo that lists both itself and the first.
	opts = siloOptions("second", m.GossipAddress())
	second := startSilo(t, opts)
	waitForViews(t, []*Membership{m, second}, m, second)
}
