package host

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
)

const halfBuiltType = "test.HalfBuilt"

// halfBuiltGrain marks its state dirty in OnActivate (say, a migration)
// and then fails the first time; a grain whose activation failed is half
// built, and its SaveState panics on what OnActivate did not set up.
type halfBuiltGrain struct {
	failOnce *atomic.Bool
	state    *int64 // set by a successful OnActivate
}

func (g *halfBuiltGrain) OnActivate(_ context.Context, gc *actor.Context) error {
	gc.MarkDirty()
	if g.failOnce.CompareAndSwap(true, false) {
		return errors.New("dependency unavailable")
	}
	g.state = new(int64)
	return nil
}

func (g *halfBuiltGrain) LoadState([]byte) error { return nil }

func (g *halfBuiltGrain) SaveState() ([]byte, error) {
	return proto.Marshal(wrapperspb.Int64(*g.state)) // nil pointer when activation failed
}

type halfBuiltDispatcher struct{}

func (halfBuiltDispatcher) Dispatch(context.Context, any, uint32, []byte) (proto.Message, error) {
	return wrapperspb.Int64(1), nil
}

// A panic of SaveState in the state flush that closes the record of a
// failed activation must be contained like any other grain panic: the
// failed activation must still leave the catalog, so that the next call
// activates the grain again and Stop does not hang.
func TestActivationFailureWithPanickingSaveStateDoesNotWedgeGrain(t *testing.T) {
	var failOnce atomic.Bool
	failOnce.Store(true)
	kind := &Kind{Type: halfBuiltType, Dispatcher: halfBuiltDispatcher{}, New: func(actor.GrainID) any {
		return &halfBuiltGrain{failOnce: &failOnce}
	}}
	store := &memStore{data: map[actor.GrainID][]byte{}}
	h, err := NewHost(HostOptions{}, []*Kind{kind}, WithClock(clock.NewFake(time.Unix(1, 0))), WithStateStore(store),
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	require.NoError(t, h.Start(context.Background()))
	id := actor.GrainID{Type: halfBuiltType, Key: "a"}
	defer func() {
		// Unwedge a failed activation left behind, so that the host can stop
		// and leaks no goroutine whatever the outcome.
		h.mu.RLock()
		a := h.mu.acts.get(id)
		h.mu.RUnlock()
		if a != nil {
			a.finish()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, h.Stop(ctx))
	}()

	call := func() error {
		rc := make(chanReplier, 1)
		h.Deliver(&Request{Target: id, MethodID: 1, Reply: rc})
		select {
		case r := <-rc:
			return r.err
		case <-time.After(5 * time.Second):
			t.Fatal("no reply")
			return nil
		}
	}
	require.ErrorIs(t, call(), actor.ErrActivation, "the first activation fails")

	assert.NoError(t, call(), "the next call must activate the grain again")
	assert.EqualValues(t, 1, h.Stats().ActivationFailures, "one activation failed")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	assert.NoError(t, h.Stop(ctx), "Stop must not wait for ever on the failed activation")
}
