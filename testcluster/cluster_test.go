package testcluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/examples/counter"
	"github.com/granary-go/granary/internal/silohost"
	"github.com/granary-go/granary/placement"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/testcluster"
)

func registerCounter(s *silo.Silo) error { return counter.RegisterCounterGrain(s, counter.New) }

// A grain called through silo 0's gateway with a hint for silo 1 runs on
// silo 1, and keeps its state across calls.
func TestAHintPlacesTheGrainOnAnotherSilo(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Silos: 2, OnlyFirstGateway: true, Register: registerCounter})
	ref := counter.NewCounterRef(c.Client(), "hinted")
	ctx := context.Background()
	for i := int64(1); i <= 3; i++ {
		r, err := ref.Add(ctx, &counter.AddRequest{Delta: 1}, c.PlaceOn(1))
		require.NoError(t, err)
		assert.Equal(t, i, r.Value)
	}
	assertLivesOn(t, c, ref.GrainID(), 1)
	assert.Equal(t, 1, c.Activations(ref.GrainID()))
}

// Sixteen callers entering through three gateways at once, on a grain
// nobody has activated yet, make one activation between them.
func TestConcurrentCallersThroughEveryGatewayMakeOneActivation(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Silos: 3, Register: registerCounter, Logger: logOnFailure(t, 2000)})
	const callers = 16
	gateways := c.Gateways()
	require.Len(t, gateways, 3)
	refs := make([]counter.CounterRef, callers)
	for i := range refs {
		cl := c.NewClient(client.Options{Gateways: []string{gateways[i%3]}})
		require.NoError(t, cl.Connect(context.Background()))
		refs[i] = counter.NewCounterRef(cl, "contended")
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for _, ref := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := ref.Add(context.Background(), &counter.AddRequest{Delta: 1})
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	id := refs[0].GrainID()
	assert.Equal(t, 1, c.Activations(id), "one activation cluster-wide")
	r, err := refs[0].Get(context.Background(), &counter.GetRequest{})
	require.NoError(t, err)
	assert.EqualValues(t, callers, r.Value, "every call reached that one activation")
}

// Hash-based placement puts a grain on the same silo whichever gateway
// first routes it; activation-count spreads a thousand grains evenly.
func TestPlacementStrategiesPlaceWhereTheyShould(t *testing.T) {
	t.Run("hash-based is stable", func(t *testing.T) {
		c := testcluster.New(t, testcluster.Options{Silos: 3, Register: registerCounter,
			Configure: func(_ int, o *silo.Options) {
				o.Cluster.Placement = map[string]placement.Strategy{counter.CounterGrainType: placement.HashBased{}}
			}})
		ctx := context.Background()
		for i := range 30 {
			ref := counter.NewCounterRef(c.Client(), fmt.Sprint("h", i))
			_, err := ref.Add(ctx, &counter.AddRequest{Delta: 1})
			require.NoError(t, err)
			where, _, err := c.Locate(ctx, ref.GrainID())
			require.NoError(t, err)
			candidates := []placement.Candidate{{Silo: testcluster.Name(0)}, {Silo: testcluster.Name(1)}, {Silo: testcluster.Name(2)}}
			want, err := placement.Place(placement.HashBased{}, &placement.Request{Grain: ref.GrainID(), Candidates: candidates})
			require.NoError(t, err)
			assert.Equal(t, want, where, "%s", ref.GrainID())
		}
	})
	t.Run("activation-count spreads", func(t *testing.T) {
		c := testcluster.New(t, testcluster.Options{Silos: 3, Register: registerCounter,
			Configure: func(_ int, o *silo.Options) {
				o.Cluster.Placement = map[string]placement.Strategy{counter.CounterGrainType: placement.ActivationCount{}}
			}})
		const grains = 1000
		ctx := context.Background()
		for i := range grains {
			_, err := counter.NewCounterRef(c.Client(), fmt.Sprint("a", i)).Add(ctx, &counter.AddRequest{Delta: 1})
			require.NoError(t, err)
		}
		// The tolerance: each silo within 15% of a third. Placement from
		// several gateways sees loads that lag by up to a second.
		for _, i := range c.Live() {
			n := silohost.Host(c.Silo(i)).Stats().Active
			assert.InDelta(t, grains/3, n, grains/3*0.15, "silo %d hosts %d of %d", i, n, grains)
		}
	})
}

// assertLivesOn checks that the grain's activation is on silo i, as the
// directory says.
func assertLivesOn(t *testing.T, c *testcluster.Cluster, id actor.GrainID, i int, msgAndArgs ...any) {
	t.Helper()
	where, found, err := c.Locate(context.Background(), id)
	require.NoError(t, err)
	require.True(t, found, msgAndArgs...)
	assert.Equal(t, testcluster.Name(i), where, msgAndArgs...)
}
