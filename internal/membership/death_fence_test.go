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
	verdicts chan string
}

func newFakeReachability(members ...cluster.Reachability) *fakeReachability {
	return &fakeReachability{members: members, changed: make(chan struct{}, 1), verdicts: make(chan string, 1)}
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

func (f *fakeReachability) ReachabilityChanged() <-chan struct{} { return f.changed }
func (f *fakeReachability) DeathVerdicts() <-chan string         { return f.verdicts }

const (
	testStall = time.Second
	testHold  = 500 * time.Millisecond
)

// deathWiring is the wiring of silo "a", in a view where it is active,
// with the minority fence off and the death fence watching src on clk.
func deathWiring(t *testing.T, clk *clock.Fake, src Reachability) *Wiring {
	t.Helper()
	members, err := cluster.New(cluster.Options{SiloID: "a", Address: "127.0.0.1:1", BindAddress: "127.0.0.1:0"})
	require.NoError(t, err)
	_, sub := members.Subscribe()
	w := New(Options{Self: "a", Clock: clk, Log: slog.New(slog.DiscardHandler), Host: func() *host.Host { return nil },
		Fence: FenceOptions{Disabled: true, Every: time.Millisecond, Death: DeathFenceOptions{Stall: testStall, Hold: testHold}}})
	base := clk.Now()
	w.fence.elapsed = func() time.Duration { return clk.Now().Sub(base) }
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
	require.Eventually(t, w.fence.watching.Load, time.Second, time.Millisecond, "the watch started")
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

// A death verdict raises the fence; it stays up while a member says it
// lost the silo, and while the silo's own view does not show it active,
// and lifts once neither holds and Hold has passed.
func TestADeathVerdictRaisesTheFenceUntilTheClusterTakesTheSiloBack(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	src := newFakeReachability(cluster.Reachability{ID: "a", Reachable: true}, cluster.Reachability{ID: "b", Reachable: true})
	w := deathWiring(t, clk, src)
	require.NoError(t, w.Admit())

	src.set(cluster.Reachability{ID: "a", Reachable: true}, cluster.Reachability{ID: "b", Reachable: true, SaysDead: true})
	src.verdicts <- "b"
	require.Eventually(t, func() bool { return w.Admit() != nil }, time.Second, time.Millisecond, "the verdict raised no fence")
	err := w.Admit()
	require.ErrorIs(t, err, ErrDeclaredDead)
	assert.ErrorContains(t, err, "declared dead by b while it ran")

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
