package testcluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/examples/counter"
	"github.com/granary-go/granary/internal/ring"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/testcluster"
)

// untilOK calls fn until it succeeds, each call within timeout, and
// returns how many calls failed first. A call that failed must have failed
// clearly, as unavailable or timed out; none may hang past its timeout.
func untilOK(t *testing.T, timeout time.Duration, fn func(ctx context.Context) error) int {
	t.Helper()
	failures := 0
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		start := time.Now()
		err := fn(ctx)
		took := time.Since(start)
		cancel()
		if err == nil {
			return failures
		}
		failures++
		require.Less(t, took, timeout+time.Second, "a call hung past its timeout: %v", err)
		require.True(t, errors.Is(err, proxy.ErrUnavailable) || errors.Is(err, proxy.ErrTimeout) ||
			errors.Is(err, context.DeadlineExceeded), "a clear failure, not %v", err)
		require.True(t, time.Now().Before(deadline), "the grain never came back: %v", err)
		time.Sleep(10 * time.Millisecond) // a caller's retry
	}
}

// When the silo that hosts a grain dies, the grain comes back on a live
// silo, with the state it last wrote.
func TestAGrainOfAKilledSiloComesBackOnALiveOne(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Silos: 3, Register: registerCounter})
	ctx := context.Background()
	ref := counter.NewCounterRef(c.NewClient(client.Options{Gateways: []string{c.Silo(0).GatewayAddr().String()}}), "survivor")
	_, err := ref.Add(ctx, &counter.AddRequest{Delta: 5}, c.PlaceOn(2))
	require.NoError(t, err)
	where, _, err := c.Locate(ctx, ref.GrainID())
	require.NoError(t, err)
	require.Equal(t, testcluster.Name(2), where)
	require.Eventually(t, func() bool { return c.Silo(2).Stats().Flusher.WritesSucceeded > 0 }, 10*time.Second, time.Millisecond, "the state was written")

	killed := time.Now()
	c.Kill(2)
	failures := untilOK(t, time.Second, func(ctx context.Context) error {
		r, err := ref.Get(ctx, &counter.GetRequest{}, proxy.WithTimeout(time.Second))
		if err == nil && r.Value != 5 {
			return fmt.Errorf("the grain came back with %d, not 5", r.Value)
		}
		return err
	})
	t.Logf("back %v after the kill, %d calls failed first", time.Since(killed).Round(time.Millisecond), failures)
	where, found, err := c.Locate(ctx, ref.GrainID())
	require.NoError(t, err)
	require.True(t, found)
	assert.Contains(t, []string{testcluster.Name(0), testcluster.Name(1)}, where)
	assert.Equal(t, 1, c.Activations(ref.GrainID()))
}

// grainsOwnedBy returns n counter grains whose directory entries silo owns
// in a ring of silos.
func grainsOwnedBy(owner string, n int, silos ...string) []actor.GrainID {
	var members []ring.Silo
	for _, s := range silos {
		members = append(members, ring.Silo{ID: s})
	}
	r := ring.New(members, 0)
	var out []actor.GrainID
	for i := 0; len(out) < n; i++ {
		id := actor.GrainID{Type: counter.CounterGrainType, Key: fmt.Sprint("owned-", i)}
		if o, _ := r.OwnerOf(id); o.ID == owner {
			out = append(out, id)
		}
	}
	return out
}

// When the silo that owns part of the directory dies, the new owners
// rebuild it from what the live silos host: the grains that live elsewhere
// keep their one activation, and are not deactivated.
func TestADeadOwnersRangeIsRebuiltAndGrainsElsewhereStay(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Silos: 3, Register: registerCounter})
	ctx := context.Background()
	names := []string{testcluster.Name(0), testcluster.Name(1), testcluster.Name(2)}
	ids := grainsOwnedBy(testcluster.Name(2), 20, names...)
	for i, id := range ids {
		_, err := counter.NewCounterRef(c.Client(), id.Key).Add(ctx, &counter.AddRequest{Delta: 1}, c.PlaceOn(i%2))
		require.NoError(t, err)
	}
	before := c.Silo(0).Stats().Host.Activations + c.Silo(1).Stats().Host.Activations
	c.Kill(2)
	c.WaitForMembership()
	for i, id := range ids {
		where, found, err := c.Locate(ctx, id)
		require.NoError(t, err)
		require.True(t, found, "%s was rebuilt", id)
		assert.Equal(t, testcluster.Name(i%2), where)
		r, err := counter.NewCounterRef(c.Client(), id.Key).Get(ctx, &counter.GetRequest{})
		require.NoError(t, err)
		assert.EqualValues(t, 1, r.Value, "%s kept its activation and state", id)
		assert.Equal(t, 1, c.Activations(id))
	}
	after := c.Silo(0).Stats().Host.Activations + c.Silo(1).Stats().Host.Activations
	assert.Equal(t, before, after, "no grain on the survivors was activated again")
	assert.Zero(t, c.Silo(0).Stats().Host.Deactivations+c.Silo(1).Stats().Host.Deactivations, "nor deactivated")
}

// A graceful stop flushes the leaving silo's grains, hands its part of the
// directory over, and touches no grain on the other silos.
func TestAGracefulStopTouchesNothingElsewhere(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Silos: 3, Register: registerCounter})
	ctx := context.Background()
	for i := range 30 {
		_, err := counter.NewCounterRef(c.Client(), fmt.Sprint("g", i)).Add(ctx, &counter.AddRequest{Delta: int64(i)}, c.PlaceOn(i%3))
		require.NoError(t, err)
	}
	activations := func() int64 { return c.Silo(0).Stats().Host.Activations + c.Silo(1).Stats().Host.Activations }
	before := activations()
	require.NoError(t, c.Stop(2))
	c.WaitForMembership()
	for i := range 30 {
		r, err := counter.NewCounterRef(c.Client(), fmt.Sprint("g", i)).Get(ctx, &counter.GetRequest{})
		require.NoError(t, err)
		assert.EqualValues(t, i, r.Value, "g%d kept its state", i)
	}
	// The leaving silo's ten grains come back on the survivors; the others
	// were never activated again, nor deactivated.
	assert.Equal(t, before+10, activations())
	assert.Zero(t, c.Silo(0).Stats().Host.Deactivations+c.Silo(1).Stats().Host.Deactivations)
	assert.Zero(t, c.Silo(0).Stats().Directory.Rebuilds+c.Silo(1).Stats().Directory.Rebuilds, "the range was handed over, not rebuilt")
}

// A client given two gateways keeps working when one is killed.
func TestAClientOutlivesOneOfItsGateways(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Silos: 2, Register: registerCounter})
	cl := c.NewClient(client.Options{ResponseTimeout: 2 * time.Second})
	require.NoError(t, cl.Connect(context.Background()))
	first := cl.Gateway()
	victim := 0
	if first == c.Silo(1).GatewayAddr().String() {
		victim = 1
	}
	ref := counter.NewCounterRef(cl, "steady")
	_, err := ref.Add(context.Background(), &counter.AddRequest{Delta: 1}, c.PlaceOn(1-victim))
	require.NoError(t, err)
	c.Kill(victim)
	untilOK(t, 2*time.Second, func(ctx context.Context) error {
		_, err := ref.Add(ctx, &counter.AddRequest{Delta: 1})
		return err
	})
	assert.NotEqual(t, first, cl.Gateway(), "the client moved to the live gateway")
}

// While the owner of part of the directory dies and its range is rebuilt,
// callers keep calling grains through both surviving gateways; a grain
// never has two activations on live silos, during the change or after.
func TestNoGrainHasTwoActivationsWhileAnOwnerDies(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Silos: 3, Register: registerCounter})
	names := []string{testcluster.Name(0), testcluster.Name(1), testcluster.Name(2)}
	ids := grainsOwnedBy(testcluster.Name(2), 16, names...)
	clients := []*client.Client{
		c.NewClient(client.Options{Gateways: []string{c.Silo(0).GatewayAddr().String()}}),
		c.NewClient(client.Options{Gateways: []string{c.Silo(1).GatewayAddr().String()}}),
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	for w := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := ids[(w+i)%len(ids)]
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, _ = counter.NewCounterRef(clients[w%2], id.Key).Add(ctx, &counter.AddRequest{Delta: 1}, proxy.WithTimeout(time.Second))
				cancel()
			}
		}()
	}
	maxSeen := 0
	sample := func() {
		for _, id := range ids {
			maxSeen = max(maxSeen, c.Activations(id))
		}
	}
	for range 20 {
		sample()
	}
	killed := time.Now()
	c.Kill(2)
	for time.Since(killed) < 2*time.Second {
		sample()
	}
	close(stop)
	for range 8 {
		<-done
	}
	c.WaitForMembership()
	sample()
	assert.Equal(t, 1, maxSeen, "no grain ever had two live activations")
	for _, id := range ids {
		assert.LessOrEqual(t, c.Activations(id), 1, "%s", id)
	}
}
