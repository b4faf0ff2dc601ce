package proxy

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A bounded call always carries a budget, however small or large its
// response timeout: a zero budget would read as "no budget at all" on the
// server, and 80% of the largest timeout must not overflow.
func TestEveryTimeoutGivesABudget(t *testing.T) {
	for _, timeout := range []time.Duration{1, 2, 3, 4, 5, 10, time.Second, math.MaxInt64 / 4, math.MaxInt64/4 + 1, math.MaxInt64} {
		budget, err := Budget(context.Background(), timeout)
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
