package host

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/persistence"
)

const panicSaveType = "test.PanicSave"

// panicSaveGrain marks its state dirty on every call; its SaveState
// panics (a grain bug).
type panicSaveGrain struct {
	gc          *actor.Context
	deactivated *atomic.Int64
}

func (g *panicSaveGrain) OnActivate(_ context.Context, gc *actor.Context) error {
	g.gc = gc
	return nil
}

func (g *panicSaveGrain) OnDeactivate(context.Context, *actor.Context) error {
	g.deactivated.Add(1)
	return nil
}

func (g *panicSaveGrain) LoadState([]byte) error { return nil }
func (g *panicSaveGrain) SaveState() ([]byte, error) {
	panic("SaveState bug")
}

type panicSaveDispatcher struct{}

func (panicSaveDispatcher) Dispatch(_ context.Context, grain any, _ uint32, _ []byte) (proto.Message, error) {
	grain.(*panicSaveGrain).gc.MarkDirty()
	return wrapperspb.Int64(1), nil
}

// A SaveState that panics in the flusher's background snapshot turn is a
// grain panic like a method's: counted in HostStats.Panics, logged with its
// stack, and the activation deactivates. Persistence restores the record's
// state and lets the panic reach the host.
func TestBackgroundSnapshotPanicIsAGrainPanic(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	var deactivated atomic.Int64
	kind := &Kind{Type: panicSaveType, Dispatcher: panicSaveDispatcher{}, New: func(actor.GrainID) any {
		return &panicSaveGrain{deactivated: &deactivated}
	}}
	h, _ := startFlusherHost(t, clk, persistence.NewMemoryStore(), kind)

	id := actor.GrainID{Type: panicSaveType, Key: "a"}
	rc := make(chanReplier, 1)
	h.Deliver(&Request{Target: id, MethodID: 1, Reply: rc})
	require.NoError(t, (<-rc).err)

	clk.Advance(persistence.DefaultPeriod) // the background snapshot turn runs SaveState
	require.Eventually(t, func() bool { return h.Stats().Panics >= 1 }, 2*time.Second, time.Millisecond,
		"a panic of SaveState in a background snapshot turn is a grain panic: counted and logged with its stack")
	require.Eventually(t, func() bool { return deactivated.Load() == 1 && !h.IsActive(id) }, 2*time.Second, time.Millisecond,
		"an activation whose snapshot panicked deactivates, as after any contained panic")
}
