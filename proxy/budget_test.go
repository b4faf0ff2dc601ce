package proxy

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/internal/turn"
)

// A bounded call always carries a budget, however small or large its
// response timeout: a zero budget would read as "no budget at all" on the
// server, and 80% of the largest timeout must not overflow.
func TestEveryTimeoutGivesABudget(t *testing.T) {
	for _, timeout := range []time.Duration{1, 2, 3, 4, 5, 10, time.Second, math.MaxInt64 / 4, math.MaxInt64/4 + 1, math.MaxInt64} {
		budget, err := callBudget(context.Background(), timeout)
		require.NoError(t, err)
		assert.Positive(t, budget, "timeout %v", timeout)
		assert.LessOrEqual(t, budget, timeout, "timeout %v", timeout)
		if timeout >= 5 {
			assert.InDelta(t, float64(timeout)*0.8, float64(budget), float64(timeout)/1e6+1, "timeout %v", timeout)
		}
	}
	c := &recordingCaller{timeout: time.Second}
	require.NoError(t, NewRef(c, "s.S", "k").Invoke(context.Background(), bounded, wrapperspb.Int64(1), &wrapperspb.Int64Value{}, WithTimeout(4)))
	require.Len(t, c.calls, 1)
	assert.Positive(t, c.calls[0].Budget, "a bounded call must carry a budget")
}

// turnContext is a grain method's context as the call path sees it: a
// budget with left remaining.
type turnContext struct {
	context.Context
	left time.Duration
}

func (c turnContext) Value(key any) any {
	if key == (turn.Key{}) {
		return c
	}
	return c.Context.Value(key)
}

func (c turnContext) TimeLeft() (time.Duration, bool)   { return c.left, true }
func (c turnContext) CallBudget() (time.Duration, bool) { return time.Minute, true }
func (c turnContext) BudgetDeadline() (time.Time, bool) { return time.Now().Add(c.left), true }

// A call a grain makes with its method's context inherits what is left of
// the method's budget: its budget is min(80% of its own timeout, that),
// it waits no longer than that, and once that is spent nothing is sent.
func TestACallFromAGrainInheritsItsBudget(t *testing.T) {
	c := &recordingCaller{timeout: 30 * time.Second}
	ref := NewRef(c, "s.S", "k")
	outer := turnContext{Context: context.Background(), left: 50 * time.Millisecond}
	require.NoError(t, ref.Invoke(outer, bounded, wrapperspb.Int64(1), &wrapperspb.Int64Value{}))
	require.NoError(t, ref.Invoke(outer, unbounded, wrapperspb.Int64(1), &wrapperspb.Int64Value{}))
	require.NoError(t, ref.Invoke(outer, bounded, wrapperspb.Int64(1), &wrapperspb.Int64Value{}, WithTimeout(20*time.Millisecond)))
	require.Len(t, c.calls, 3)
	assert.Equal(t, 50*time.Millisecond, c.calls[0].Budget)
	assert.Equal(t, 50*time.Millisecond, c.calls[0].Timeout, "the outer caller waits no longer")
	assert.Zero(t, c.calls[1].Budget)
	assert.Equal(t, 50*time.Millisecond, c.calls[1].Timeout)
	assert.Equal(t, 16*time.Millisecond, c.calls[2].Budget, "its own 80% rule when that is shorter")
	assert.Equal(t, 20*time.Millisecond, c.calls[2].Timeout)

	spent := turnContext{Context: context.Background(), left: -time.Millisecond}
	for _, m := range []*MethodDesc{bounded, unbounded} {
		err := ref.Invoke(spent, m, wrapperspb.Int64(1), &wrapperspb.Int64Value{})
		require.ErrorIs(t, err, ErrBudgetExpired, m.Name)
	}
	assert.Len(t, c.calls, 3, "nothing was sent once the budget was spent")
}
