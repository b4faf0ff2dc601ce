package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// On a filtered call the budget follows what reaches the caller: a
// filter that raises the call's timeout raises the budget with it (80% of
// the call's response timeout), and one that detaches the call from the
// caller's context drops that context's deadline from the budget.
func TestFilterBudgetFollowsWhatReachesTheCaller(t *testing.T) {
	in, out := wrapperspb.Int64(1), &wrapperspb.Int64Value{}

	t.Run("raised timeout", func(t *testing.T) {
		c := &recordingCaller{timeout: time.Second}
		c.filters = []OutgoingFilter{func(ctx context.Context, call Call, in, out proto.Message, next Invoker) error {
			call.Timeout = 10 * time.Second // e.g. a per-method timeout table
			return next(ctx, call, in, out)
		}}
		require.NoError(t, NewRef(filteringCaller{c}, "s.S", "k").Invoke(context.Background(), bounded, in, out))
		require.Len(t, c.calls, 1)
		assert.Equal(t, 10*time.Second, c.calls[0].Timeout)
		assert.Equal(t, 8*time.Second, c.calls[0].Budget, "80% of the call's response timeout as the caller sends it")
	})

	t.Run("detached context", func(t *testing.T) {
		c := &recordingCaller{timeout: 10 * time.Second}
		c.filters = []OutgoingFilter{func(ctx context.Context, call Call, in, out proto.Message, next Invoker) error {
			return next(context.WithoutCancel(ctx), call, in, out) // the call outlives its caller
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		require.NoError(t, NewRef(filteringCaller{c}, "s.S", "k").Invoke(ctx, bounded, in, out))
		require.Len(t, c.calls, 1)
		assert.False(t, c.calls[0].Cancellable, "cancellability follows the filter's context")
		assert.Equal(t, 8*time.Second, c.calls[0].Budget, "so should the budget: the context reaching the caller has no deadline")
	})
}
