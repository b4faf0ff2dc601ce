package silo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/internal/examples/counter"
)

// Stop is documented as safe to call twice. When the first call runs out of
// time (a turn still blocks), a later call must finish the job: the host's
// actor system and its workers must not be left running for good.
func TestReviewStopAfterTimeoutFinishesOnRetry(t *testing.T) {
	e := startSilo(t, envConfig{})
	errc := make(chan error, 1)
	go func() {
		_, err := counter.NewCounterRef(e.silo.Caller(), "k").Block(context.Background(), &counter.BlockRequest{Tag: "b"})
		errc <- err
	}()
	require.Equal(t, "b", <-e.gate.Entered())

	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, e.silo.Stop(short), context.DeadlineExceeded, "the blocked turn keeps the host from stopping")
	require.Error(t, <-errc, "the caller is released by the closing silo")

	e.gate.Release("b")
	<-e.gate.Exited()
	ctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	require.NoError(t, e.silo.Stop(ctx))
	goleak.VerifyNone(t)
}
