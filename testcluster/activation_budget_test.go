package testcluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/granary-go/granary/examples/counter"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/testcluster"
)

// A client connection's budget of new activations holds for the grains
// its gateway places on other silos too: a client that asks, by hint or
// by luck of placement, for its new grains to live elsewhere gets no
// more of them than the budget allows, where before every one of them
// was created, without bound, on the silo it named.
func TestTheActivationBudgetHoldsForGrainsPlacedOnOtherSilos(t *testing.T) {
	const burst, rate = 5, 1
	c := testcluster.New(t, testcluster.Options{
		Silos: 2, OnlyFirstGateway: true, Register: registerCounter,
		Configure: func(_ int, o *silo.Options) {
			o.Limits.ActivationBurst, o.Limits.ActivationRate = burst, rate
		},
	})
	cl := c.Client()
	ctx := context.Background()

	const grains = 40
	start := time.Now()
	created, refused := 0, 0
	for i := range grains {
		_, err := counter.NewCounterRef(cl, fmt.Sprintf("elsewhere-%d", i)).Add(ctx, &counter.AddRequest{Delta: 1}, c.PlaceOn(1))
		switch {
		case err == nil:
			created++
		case assert.ErrorIs(t, err, proxy.ErrOverloaded, "grain %d", i):
			refused++
		}
	}
	// The budget refills at rate a second: what the loop's own duration
	// adds is an upper bound, not a timing the test depends on.
	allowed := burst + rate*(int(time.Since(start)/time.Second)+1)
	assert.LessOrEqual(t, created, allowed, "new activations on the other silo")
	assert.Equal(t, grains, created+refused)
	assert.Positive(t, c.Silo(0).Stats().Rejected.OverBudget, "the gateway counted the refusals")
}
