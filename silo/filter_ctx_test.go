package silo_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

// filterCallers starts a silo and returns, by name, a client and the
// silo's own caller, each carrying filter.
func filterCallers(t *testing.T, filter proxy.OutgoingFilter) map[string]func() (proxy.Caller, *env) {
	return map[string]func() (proxy.Caller, *env){
		"client": func() (proxy.Caller, *env) {
			e := startSilo(t, envConfig{})
			return e.client(client.Options{}, client.WithOutgoingFilters(filter)), e
		},
		"silo caller": func() (proxy.Caller, *env) {
			e := startSilo(t, envConfig{siloOpts: []silo.Option{silo.WithOutgoingFilters(filter)}})
			return e.silo.Caller(), e
		},
	}
}

// A filter may pass on a cancellable context of its own, as the usual
// "default deadline" filter does, although the caller's cannot be
// cancelled. Cancelling it ends the call at once with context.Canceled,
// and the cancel reaches the running grain method.
func TestFilterContextCancelsTheCall(t *testing.T) {
	var cancelFilterCtx atomic.Pointer[context.CancelFunc]
	filter := func(ctx context.Context, call proxy.Call, in, out proto.Message, next proxy.Invoker) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		cancelFilterCtx.Store(&cancel)
		return next(ctx, call, in, out)
	}
	for via, start := range filterCallers(t, filter) {
		t.Run(via, func(t *testing.T) {
			caller, e := start()
			errc := make(chan error, 1)
			go func() {
				_, err := testgrain.NewCounterRef(caller, "k").Block(context.Background(), &testgrain.BlockRequest{Tag: "f"})
				errc <- err
			}()
			require.Equal(t, "f", <-e.gate.Entered())
			(*cancelFilterCtx.Load())()

			select {
			case err := <-errc:
				assert.ErrorIs(t, err, context.Canceled)
			case <-time.After(10 * time.Second):
				e.gate.Release("f")
				<-errc
				t.Fatal("the filter's context was cancelled, but the call still waited for the grain")
			}
			exit := <-e.gate.Exited()
			assert.True(t, exit.Cancelled, "the grain method saw its context cancelled")
		})
	}
}

// A filter that gives the call a deadline shortens a bounded method's
// budget to the time left before it.
func TestFilterDeadlineShortensTheBudget(t *testing.T) {
	const limit = 5 * time.Second
	filter := func(ctx context.Context, call proxy.Call, in, out proto.Message, next proxy.Invoker) error {
		ctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		return next(ctx, call, in, out)
	}
	for via, start := range filterCallers(t, filter) {
		t.Run(via, func(t *testing.T) {
			caller, _ := start()
			r, err := testgrain.NewCounterRef(caller, "k").Add(context.Background(), &testgrain.AddRequest{Delta: 1})
			require.NoError(t, err)
			assert.Positive(t, r.BudgetNanos)
			assert.LessOrEqual(t, time.Duration(r.BudgetNanos), limit, "the filter's deadline, not 80%% of the response timeout")
		})
	}
}

// A call whose context is already cancelled fails with context.Canceled
// without being sent: the grain never runs it, and nothing is left pending.
func TestCancelledContextSendsNothing(t *testing.T) {
	e := startSilo(t, envConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for via, caller := range map[string]proxy.Caller{
		"client": e.client(client.Options{}), "silo caller": e.silo.Caller(),
	} {
		_, err := testgrain.NewCounterRef(caller, "k").Add(ctx, &testgrain.AddRequest{Delta: 1})
		assert.ErrorIs(t, err, context.Canceled, via)
	}
	st := e.silo.Stats()
	assert.Zero(t, st.Host.Invocations, "the grain ran nothing")
	assert.Zero(t, st.Host.Activations, "not even an activation")
	assert.Zero(t, st.Gateway.Transport.FramesRead, "the gateway received no request")
	r, err := testgrain.NewCounterRef(e.silo.Caller(), "k").Add(context.Background(), &testgrain.AddRequest{Delta: 1})
	require.NoError(t, err)
	assert.EqualValues(t, 1, r.Value, "the cancelled calls added nothing")
}
