package silo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/proxy"
)

// A grain that calls another with its method's context passes on what is
// left of its own budget: an outer 80 ms budget (a 100 ms response
// timeout) caps the nested call's, where the silo's default would give it
// 24 s. The callee may be on the caller's silo or on another.
func TestNestedCallInheritsTheOuterBudget(t *testing.T) {
	p := startPair(t, false)
	p.locators[0].Place(counterID("outer"), "silo-0")
	p.locators[0].Place(counterID("near"), "silo-0")
	c := p.client(t, 0, client.Options{})
	outer := testgrain.NewCounterRef(c, "outer")
	for _, key := range []string{"near", "far"} {
		r, err := outer.Relay(context.Background(), &testgrain.RelayRequest{Key: key, Delta: 1}, proxy.WithTimeout(100*time.Millisecond))
		require.NoError(t, err, key)
		assert.Equal(t, int64(80*time.Millisecond), r.OuterBudgetNanos, key)
		assert.Positive(t, r.InnerBudgetNanos, key)
		assert.LessOrEqual(t, r.InnerBudgetNanos, r.OuterBudgetNanos, "%s: at most the time the outer call had left", key)
	}
	assert.True(t, p.silos[1].Host().IsActive(counterID("far")), "the second callee lived on the other silo")
	assert.True(t, p.silos[0].Host().IsActive(counterID("near")))

	// Without a budget of its own, the nested call gets its 80% rule.
	r, err := outer.Relay(context.Background(), &testgrain.RelayRequest{Key: "near", Delta: 1})
	require.NoError(t, err)
	assert.LessOrEqual(t, r.InnerBudgetNanos, int64(24*time.Second))
}

// Cancelling the outer call cancels the nested one, on another silo too.
func TestCancellingTheOuterCallCancelsTheNestedOne(t *testing.T) {
	p := startPair(t, false)
	p.locators[0].Place(counterID("outer"), "silo-0")
	ref := testgrain.NewCounterRef(p.client(t, 0, client.Options{}), "outer")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := ref.Nest(ctx, &testgrain.NestRequest{Key: "inner", Tag: "nested"}, proxy.WithTimeout(time.Minute))
		done <- err
	}()
	require.Equal(t, "nested", <-p.gates[1].Entered())
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	exit := <-p.gates[1].Exited()
	assert.Equal(t, testgrain.BlockExit{Tag: "nested", Cancelled: true}, exit, "the nested call on silo-1 saw the cancellation")
}

// A turn that waits on a nested call holds up only its own grain: with 16
// grains blocked so on one connection, a 17th grain on that connection
// still answers.
func TestGrainsWaitingOnNestedCallsDoNotHoldUpOthers(t *testing.T) {
	p := startPair(t, false)
	p.locators[0].PlaceOthers("silo-0") // every grain on silo-0, one connection from the client
	c := p.client(t, 0, client.Options{})
	const blocked = 16
	dones := make([]chan error, blocked)
	for i := range dones {
		dones[i] = make(chan error, 1)
		go func() {
			_, err := testgrain.NewCounterRef(c, fmt.Sprint("outer-", i)).Nest(context.Background(),
				&testgrain.NestRequest{Key: fmt.Sprint("inner-", i), Tag: fmt.Sprint("t", i)}, proxy.WithTimeout(time.Minute))
			dones[i] <- err
		}()
	}
	for range blocked {
		<-p.gates[0].Entered()
	}
	r, err := testgrain.NewCounterRef(c, "bystander").Add(context.Background(), &testgrain.AddRequest{Delta: 7})
	require.NoError(t, err)
	assert.EqualValues(t, 7, r.Value)
	for i := range blocked {
		p.gates[0].Release(fmt.Sprint("t", i))
	}
	for _, done := range dones {
		require.NoError(t, <-done)
	}
}
