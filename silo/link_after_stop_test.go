package silo_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/silo"
)

// Once Stop has begun, a request for a link starts no dial: its callback
// hears at once that the silo stops, and nothing is left running.
func TestLinkLaterAfterStopStartsNothingAndReportsStopping(t *testing.T) {
	e := startSilo(t, envConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, e.silo.Stop(ctx))

	var got error
	called := false
	e.silo.LinkLater("another-silo", func(ep *rpc.Endpoint, err error) {
		called = true
		assert.Nil(t, ep)
		got = err
	})
	require.True(t, called, "the callback is answered before LinkLater returns")
	require.ErrorIs(t, got, silo.ErrNoLink)
	require.ErrorIs(t, got, silo.ErrStopping)
	goleak.VerifyNone(t)
}

// Requests for links that arrive while Stop waits for the silo's
// background work either dial before the wait began, and are joined by
// it, or are refused; under -race, no dial's start races the wait.
func TestLinkLaterWhileStoppingIsJoinedOrRefused(t *testing.T) {
	e := startSilo(t, envConfig{})
	var wg sync.WaitGroup
	var answered sync.WaitGroup
	stop := make(chan struct{})
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				answered.Add(1)
				// A silo that is not in any view: the dial fails at once,
				// so each request starts a background dial of its own.
				e.silo.LinkLater(string(rune('a'+i))+"-absent", func(_ *rpc.Endpoint, err error) {
					assert.ErrorIs(t, err, silo.ErrNoLink)
					answered.Done()
				})
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, e.silo.Stop(ctx))
	close(stop)
	wg.Wait()
	answered.Wait()
	goleak.VerifyNone(t)
}
