package counter

import (
	"context"
	"errors"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/granary-go/granary/actor"
)

// Grain is the Counter grain: a number kept in the grain's state.
type Grain struct {
	gc    *actor.Context
	value int64
}

// Compile-time checks of the interfaces the runtime looks for.
var (
	_ CounterGrain    = (*Grain)(nil)
	_ actor.Activator = (*Grain)(nil)
	_ actor.Stateful  = (*Grain)(nil)
)

// New is the grain factory to register: RegisterCounterGrain(silo, New).
func New(actor.GrainID) CounterGrain { return &Grain{} }

// OnActivate keeps the grain context, to mark the state dirty later.
func (g *Grain) OnActivate(_ context.Context, gc *actor.Context) error {
	g.gc = gc
	return nil
}

// LoadState restores the value SaveState wrote.
func (g *Grain) LoadState(data []byte) error {
	v, n := protowire.ConsumeVarint(data)
	if n < 0 {
		return errors.New("counter: corrupt state")
	}
	g.value = int64(v)
	return nil
}

// SaveState encodes the value.
func (g *Grain) SaveState() ([]byte, error) {
	return protowire.AppendVarint(nil, uint64(g.value)), nil
}

// Add adds delta to the value and marks the state dirty: the silo writes
// it within one flush period (50 ms by default).
func (g *Grain) Add(_ context.Context, in *AddRequest) (*AddReply, error) {
	g.value += in.GetDelta()
	g.gc.MarkDirty()
	return &AddReply{Value: g.value}, nil
}

// Get returns the value.
func (g *Grain) Get(context.Context, *GetRequest) (*GetReply, error) {
	return &GetReply{Value: g.value}, nil
}
