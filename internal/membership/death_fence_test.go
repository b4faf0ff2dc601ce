package membership

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/proxy"
)

// fakeReachability is what the fences watch, set by the test.
type fakeReachability struct {
	mu       sync.Mutex
	members  []cluster.Reachability
	changed  chan struct{}
	verdicts chan cluster.DeathVerdict
}

func newFakeReachability(members ...cluster.Reachability) *fakeReachability {
	return &fakeReachability{members: members, changed: make(chan struct{}, 1), verdicts: make(chan cluster.DeathVerdict, 1)}
}

func (f *fakeReachability) Reachability() []cluster.Reachability {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]cluster.Reachability(nil), f.members...)
}

func (f *fakeReachability) set(members ...cluster.Reachability) {
	f.mu.Lock()
	f.members = members
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *fakeReachability) ReachabilityChanged() <-chan struct{}       { return f.changed }
func (f *fakeReachability) DeathVerdicts() <-chan cluster.DeathVerdict { return f.verdicts }

const (
	testStall = time.Second
	testHold  = 500 * time.Millisecond
	testGrace = time.Second
)

// deathWiring is the wiring of silo "a", in a view where it is active,
// with the minority fence off and the death fence watching src on clk.
func deathWiring(t *testing.T, clk *clock.Fake, src Reachability) *Wiring {
	t.Helper()
	return startDeathWiring(t, clk, src, FenceOptions{Disabled: true, Every: time.Millisecond,
		Death: DeathFenceOptions{Stall: testStall, Hold: testHold, Grace: testGrace}})
}

// startDeathWiring is deathWiring with the fence's options given; clk nil:
// the fence keeps its real elapsed clock.
func startDeathWiring(t *testing.T, clk *clock.Fake, src Reachability, fo FenceOptions) *Wiring {
	t.Helper()
	members, err := cluster.New(cluster.Options{SiloID: "a", Address: "127.0.0.1:1", BindAddress: "127.0.0.1:0"})
	require.NoError(t, err)
	_, sub := members.Subscribe()
	var c clock.Clock = clock.Real{}
	if clk != nil {
		c = clk
	}
	w := New(Options{Self: "a", Clock: c, Log: slog.New(slog.DiscardHandler), Host: func() *host.Host { return nil }, Fence: fo})
	if clk != nil {
		base := clk.Now()
		w.fence.elapsed = func() time.Duration { return clk.Now().Sub(base) }
	}
	w.view = cluster.View{Version: 1, Members: []cluster.Member{{ID: "a", Status: cluster.StatusActive}, {ID: "b", Status: cluster.StatusActive}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.watchFence(ctx, src, sub)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	if fo.Death.Stall > 0 {
		require.Eventually(t, w.fence.watching.Load, time.Second, time.Millisecond, "the watch started")
	}
	return w
}

// beaten waits until the watch has run at the clock's time.
func beaten(t *testing.T, w *Wiring, clk *clock.Fake) {
	t.Helper()
	at := int64(w.fence.elapsed())
	require.Eventually(t, func() bool { return w.fence.ran.Load() == at }, time.Second, time.Millisecond, "the watch ran")
}

// A silo that did not run for longer than Stall takes itself for dead: a
// call that comes first after the stall finds it, before the watch does,
// and is refused. Runs shorter than Stall apart are no stall.
func TestAStallLongerThanTheLimitRaisesTheDeathFence(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	w := deathWiring(t, clk, newFakeReachability())
	for range 3 {
		clk.Advance(testStall * 9 / 10)
		beaten(t, w, clk)
		require.NoError(t, w.Admit(), "runs %v apart are no stall", testStall*9/10)
	}

	clk.Advance(2 * testStall)
	err := w.Admit()
	require.ErrorIs(t, err, ErrDeclaredDead, "the first call after the stall is refused")
	require.ErrorIs(t, err, proxy.ErrUnavailable)
	assert.ErrorContains(t, err, "did not run for 2s")
	assert.EqualValues(t, 1, w.FenceStats().Deaths)
	assert.True(t, w.FenceStats().Fenced)

	// Up for Hold at least, then down.
	beaten(t, w, clk)
	clk.Advance(testHold / 2)
	beaten(t, w, clk)
	require.Error(t, w.Admit(), "still within the hold")
	clk.Advance(testHold / 2)
	require.Eventually(t, func() bool { return w.Admit() == nil }, time.Second, time.Millisecond, "the fence never lifted")
	assert.EqualValues(t, 1, w.FenceStats().Deaths)
}

// verdictRound is the probe round the tests' verdicts answer.
const verdictRound = 7

// saysDead has b say that it lost silo a, or take it back: answer a
// later round than the verdict's.
func saysDead(src *fakeReachability, dead bool) {
	b := cluster.Reachability{ID: "b", Reachable: true, SaysDead: true, Acked: verdictRound - 1}
	if !dead {
		b.SaysDead, b.Acked = false, verdictRound+1
	}
	src.set(cluster.Reachability{ID: "a", Reachable: true}, b)
}

// A death verdict past the grace raises the fence at once; it stays up
// while a member says it lost the silo, and while the silo's own view
// does not show it active, and lifts once neither holds and Hold has
// passed.
func TestADeathVerdictRaisesTheFenceUntilTheClusterTakesTheSiloBack(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	src := newFakeReachability(cluster.Reachability{ID: "a", Reachable: true}, cluster.Reachability{ID: "b", Reachable: true})
	w := deathWiring(t, clk, src)
	require.NoError(t, w.Admit())

	saysDead(src, true)
	src.verdicts <- cluster.DeathVerdict{By: "b", Round: verdictRound, Age: testGrace - verdictMargin(testGrace)}
	require.Eventually(t, func() bool { return w.Admit() != nil }, time.Second, time.Millisecond, "the verdict raised no fence")
	err := w.Admit()
	require.ErrorIs(t, err, ErrDeclaredDead)
	assert.ErrorContains(t, err, "declared dead by b while it ran, 750ms ago, past the grace of 1s")

	clk.Advance(testHold)
	beaten(t, w, clk)
	require.Error(t, w.Admit(), "b still says it lost the silo")

	setSelf := func(st cluster.Status) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.view = cluster.View{Version: w.view.Version + 1, Members: []cluster.Member{{ID: "a", Status: st}, {ID: "b", Status: cluster.StatusActive}}}
	}
	setSelf(cluster.StatusJoining)
	src.set(cluster.Reachability{ID: "a", Reachable: true}, cluster.Reachability{ID: "b", Reachable: true})
	clk.Advance(time.Millisecond)
	beaten(t, w, clk)
	require.Error(t, w.Admit(), "the silo's view does not show it active")

	setSelf(cluster.StatusActive)
	require.Eventually(t, func() bool { return w.Admit() == nil }, time.Second, time.Millisecond, "the fence never lifted")
	assert.EqualValues(t, 1, w.FenceStats().Deaths)
	assert.False(t, w.FenceStats().Fenced)
}

// A verdict younger than the grace waits, since its declarer places the
// silo's grains nowhere else meanwhile: a declarer that takes the silo
// back in time (a death refuted, as after a healed cut's gossip) costs
// nothing. One not taken back raises the fence a margin before the grace
// ends, counted from the verdict's age.
func TestAYoungDeathVerdictRaisesTheFenceOnlyIfNotTakenBackWithinTheGrace(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	src := newFakeReachability(cluster.Reachability{ID: "a", Reachable: true}, cluster.Reachability{ID: "b", Reachable: true})
	w := deathWiring(t, clk, src)
	const age = 100 * time.Millisecond
	due := testGrace - verdictMargin(testGrace) - age // from the verdict

	heard := func() {
		t.Helper()
		n := w.FenceStats().Verdicts
		saysDead(src, true)
		src.verdicts <- cluster.DeathVerdict{By: "b", Round: verdictRound, Age: age}
		require.Eventually(t, func() bool { return w.FenceStats().Verdicts == n+1 }, time.Second, time.Millisecond, "the verdict was never heard")
	}
	heard()
	clk.Advance(due - time.Millisecond)
	beaten(t, w, clk)
	require.NoError(t, w.Admit(), "within the grace")
	saysDead(src, false)
	require.Eventually(t, func() bool { return w.fence.due.Load() == nil }, time.Second, time.Millisecond,
		"the watch never saw the take-back")
	clk.Advance(time.Second)
	beaten(t, w, clk)
	require.NoError(t, w.Admit(), "taken back within the grace")
	assert.Zero(t, w.FenceStats().Deaths)

	heard()
	clk.Advance(due - time.Millisecond)
	beaten(t, w, clk)
	require.NoError(t, w.Admit(), "within the grace")
	clk.Advance(time.Millisecond)
	require.Eventually(t, func() bool { return w.Admit() != nil }, time.Second, time.Millisecond, "due, and not taken back")
	assert.ErrorContains(t, w.Admit(), "declared dead by b while it ran, and not taken back within the death's grace")
	assert.EqualValues(t, 1, w.FenceStats().Deaths)
	assert.EqualValues(t, 2, w.FenceStats().Verdicts)
}

// Taken back is an answer to a later round than the verdict's, not the
// lack of a dead answer: a declarer that leaves the silo's view before its
// verdict is due, or leaves and comes back into it silent (a member never
// probed: not saying dead, never answered), has not taken the silo back,
// and the fence goes up when the verdict is due.
func TestADeclarerThatLeftOrCameBackSilentHasNotTakenTheSiloBack(t *testing.T) {
	for name, after := range map[string][]cluster.Reachability{
		"gone from the view": {{ID: "a", Reachable: true}},
		"back in it, silent": {{ID: "a", Reachable: true}, {ID: "b", Reachable: true}},
	} {
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1_000_000, 0))
			src := newFakeReachability(cluster.Reachability{ID: "a", Reachable: true}, cluster.Reachability{ID: "b", Reachable: true})
			w := deathWiring(t, clk, src)
			saysDead(src, true)
			src.verdicts <- cluster.DeathVerdict{By: "b", Round: verdictRound}
			require.Eventually(t, func() bool { return w.FenceStats().Verdicts == 1 }, time.Second, time.Millisecond, "the verdict was never heard")
			src.set(after...)
			clk.Advance(time.Millisecond)
			beaten(t, w, clk)
			require.NoError(t, w.Admit(), "within the grace")
			clk.Advance(testGrace - verdictMargin(testGrace))
			require.Eventually(t, func() bool { return w.Admit() != nil }, time.Second, time.Millisecond, "due, and b never answered")
		})
	}
}

// A verdict that follows a take-back of the same declarer within the
// grace is dated from the first: the declarer's directory may not have
// seen the silo back in between.
func TestADeclarersSecondVerdictIsDatedFromTheFirst(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	src := newFakeReachability(cluster.Reachability{ID: "a", Reachable: true}, cluster.Reachability{ID: "b", Reachable: true})
	w := deathWiring(t, clk, src)
	due := testGrace - verdictMargin(testGrace)
	hear := func(n int64) {
		t.Helper()
		saysDead(src, true)
		src.verdicts <- cluster.DeathVerdict{By: "b", Round: verdictRound}
		require.Eventually(t, func() bool { return w.FenceStats().Verdicts == n }, time.Second, time.Millisecond, "the verdict was never heard")
	}
	hear(1)
	clk.Advance(due / 2)
	beaten(t, w, clk)
	saysDead(src, false)
	clk.Advance(time.Millisecond)
	beaten(t, w, clk)
	hear(2) // a fresh verdict, of age zero
	clk.Advance(due / 2)
	require.Eventually(t, func() bool { return w.Admit() != nil }, time.Second, time.Millisecond,
		"due from the first verdict, half its wait after the second")
}

// bareWiring is a wiring whose watch never runs, for tests that drive its
// steps: the death fence on, stalls not watched.
func bareWiring() *Wiring {
	return New(Options{Self: "a", Clock: clock.Real{}, Log: slog.New(slog.DiscardHandler),
		Fence: FenceOptions{Disabled: true, Death: DeathFenceOptions{Stall: -1, Hold: testHold, Grace: testGrace}}})
}

// The watch's steps, one at a time: a verdict due fences though the
// watch sees the declarer's take-back only with it, since that may have
// come after the grace; the next due is published for the calls, and
// cleared when there is none.
func TestAVerdictDueFencesThoughTheTakeBackIsSeenWithIt(t *testing.T) {
	due := testGrace - verdictMargin(testGrace)
	src := newFakeReachability(cluster.Reachability{ID: "a", Reachable: true}, cluster.Reachability{ID: "b", Reachable: true})
	saysDead(src, true)
	w := bareWiring()
	p := pendingVerdicts{}
	w.heard(p, cluster.DeathVerdict{By: "b", Round: verdictRound}, 0)
	w.settle(p, time.Millisecond, src)
	require.Equal(t, &verdictDue{at: due, by: "b"}, w.fence.due.Load(), "published")
	saysDead(src, false)
	w.settle(p, due, src)
	require.ErrorIs(t, w.Fenced(), ErrDeclaredDead)
	assert.Nil(t, w.fence.due.Load(), "none pending")

	w = bareWiring()
	p = pendingVerdicts{}
	w.heard(p, cluster.DeathVerdict{By: "b", Round: verdictRound}, 0)
	w.settle(p, due-time.Millisecond, src)
	require.NoError(t, w.Fenced(), "taken back in time")
	assert.Nil(t, w.fence.due.Load(), "none pending")
}

// A take-back is remembered until the grace it dates from is over, not
// only until its verdict would have fallen due: a verdict of the same
// declarer before then is dated from the first.
func TestATakeBackIsRememberedUntilItsGraceIsOver(t *testing.T) {
	due := testGrace - verdictMargin(testGrace)
	for name, tc := range map[string]struct {
		second time.Duration // when the second verdict comes
		fenced bool
	}{
		"past the due time, within the grace": {second: due + time.Millisecond, fenced: true},
		"past the grace":                      {second: testGrace, fenced: false},
	} {
		t.Run(name, func(t *testing.T) {
			src := newFakeReachability(cluster.Reachability{ID: "a", Reachable: true}, cluster.Reachability{ID: "b", Reachable: true})
			w := bareWiring()
			p := pendingVerdicts{}
			w.heard(p, cluster.DeathVerdict{By: "b", Round: verdictRound}, 0)
			saysDead(src, false)
			w.settle(p, time.Millisecond, src)
			w.settle(p, tc.second, src)
			saysDead(src, true)
			w.heard(p, cluster.DeathVerdict{By: "b", Round: verdictRound + 2}, tc.second)
			w.settle(p, tc.second, src)
			assert.Equal(t, tc.fenced, w.Fenced() != nil)
		})
	}
}

// A verdict's wait for the watch counts into its age: one read a grace
// ago raises the fence at once.
func TestAVerdictsWaitForTheWatchCountsIntoItsAge(t *testing.T) {
	w := bareWiring()
	w.heard(pendingVerdicts{}, cluster.DeathVerdict{By: "b", Round: verdictRound, At: time.Now().Add(-testGrace)}, 0)
	require.ErrorIs(t, w.Fenced(), ErrDeclaredDead)
	w = bareWiring()
	w.heard(pendingVerdicts{}, cluster.DeathVerdict{By: "b", Round: verdictRound, At: time.Now()}, 0)
	require.NoError(t, w.Fenced())
}

// A call that comes once a verdict is due is refused though the watch has
// not run since: after a pause, the calls that waited may run first.
func TestACallFindsAVerdictDueBeforeTheWatch(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	w := New(Options{Self: "a", Clock: clk, Log: slog.New(slog.DiscardHandler),
		Fence: FenceOptions{Disabled: true, Death: DeathFenceOptions{Stall: -1, Hold: testHold, Grace: testGrace}}})
	base := clk.Now()
	w.fence.elapsed = func() time.Duration { return clk.Now().Sub(base) }
	w.fence.due.Store(&verdictDue{at: time.Second, by: "b"})
	clk.Advance(time.Second - time.Millisecond)
	require.NoError(t, w.Admit(), "not due yet")
	clk.Advance(time.Millisecond)
	err := w.Admit()
	require.ErrorIs(t, err, ErrDeclaredDead)
	assert.ErrorContains(t, err, "declared dead by b while it ran, and not taken back within the death's grace")
}

// The watch wakes when a verdict falls due, whatever its ticker: a silo
// that serves no calls still deactivates its grains on time.
func TestTheWatchWakesWhenAVerdictFallsDue(t *testing.T) {
	src := newFakeReachability(cluster.Reachability{ID: "a", Reachable: true}, cluster.Reachability{ID: "b", Reachable: true})
	const grace = 40 * time.Millisecond
	w := startDeathWiring(t, nil, src, FenceOptions{Disabled: true, Every: time.Hour,
		Death: DeathFenceOptions{Stall: -1, Hold: testHold, Grace: grace}})
	saysDead(src, true)
	select { // nothing else is to wake the watch: no reachability news
	case <-src.changed:
	default:
	}
	src.verdicts <- cluster.DeathVerdict{By: "b", Round: verdictRound}
	require.Eventually(t, func() bool { return w.FenceStats().Fenced }, 10*time.Second, time.Millisecond,
		"the watch never woke for the verdict due")
}

// The minority fence and the death fence are separate: lifting one
// leaves the other's refusal.
func TestTheMinorityFenceLiftsWithoutLiftingTheDeathFence(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	w := deathWiring(t, clk, newFakeReachability())
	clk.Advance(2 * testStall)
	require.ErrorIs(t, w.Admit(), ErrDeclaredDead)
	w.fence.mu.Lock()
	w.fence.mu.minority = ErrFenced
	w.refuseLocked()
	w.fence.mu.Unlock()
	require.ErrorIs(t, w.Fenced(), ErrFenced, "the minority's refusal comes first")
	w.unfence()
	require.ErrorIs(t, w.Fenced(), ErrDeclaredDead, "the death fence is still up")
}

// BenchmarkAdmit measures what the fences ask of each turn while the death
// fence watches stalls: an atomic load, the clock, another load.
func BenchmarkAdmit(b *testing.B) {
	w := New(Options{Self: "a", Clock: clock.Real{}, Log: slog.New(slog.DiscardHandler),
		Fence: FenceOptions{Death: DeathFenceOptions{Stall: time.Hour}}})
	w.fence.ran.Store(int64(w.fence.elapsed()))
	w.fence.watching.Store(true)
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Admit(); err != nil {
			b.Fatal(err)
		}
	}
}
