package silo_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/proxy"
)

// A request whose grain key is not UTF-8 fails alone: the connection it
// came on, and the calls in flight on it, carry on.
func TestABadGrainKeyFailsOneCallNotTheConnection(t *testing.T) {
	e := startSilo(t, envConfig{})
	c := e.client(client.Options{})
	const callers, rounds = 8, 50
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for w := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref := testgrain.NewCounterRef(c, fmt.Sprint("good-", w))
			<-start
			for range rounds {
				if _, err := ref.Add(context.Background(), &testgrain.AddRequest{Delta: 1}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	close(start)
	_, err := testgrain.NewCounterRef(c, "bad-\xff").Get(context.Background(), &testgrain.GetRequest{})
	require.ErrorIs(t, err, proxy.ErrBadRequest)
	assert.Contains(t, err.Error(), "UTF-8")
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "a call on the same connection failed")
	}
	for w := range callers {
		r, err := testgrain.NewCounterRef(c, fmt.Sprint("good-", w)).Get(context.Background(), &testgrain.GetRequest{})
		require.NoError(t, err)
		assert.EqualValues(t, rounds, r.Value)
	}
	st := e.silo.Stats()
	assert.Equal(t, 1, st.Clients, "the client's one connection is still there")
	assert.EqualValues(t, 1, st.Gateway.BadRequests)
}
