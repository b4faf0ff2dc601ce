package grainc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/examples/counter"
	"github.com/granary-go/granary/proxy"
)

// These tests run the checked-in generated code of the counter example,
// so that what the generator writes is shown to work, not only to compile.

// nilGrain answers every call with a nil reply and errNil.
type nilGrain struct{}

var errNil = errors.New("no reply")

func (nilGrain) Add(context.Context, *counter.AddRequest) (*counter.AddReply, error) {
	return nil, errNil
}
func (nilGrain) Get(context.Context, *counter.GetRequest) (*counter.GetReply, error) {
	return nil, errNil
}

func TestGeneratedServiceIsValid(t *testing.T) {
	require.NoError(t, counter.CounterService.Validate())
	assert.Equal(t, "granary.examples.counter.Counter", counter.CounterService.Name)
	_, ok := counter.CounterService.HandlerType.(*counter.CounterGrain)
	assert.True(t, ok)
}

func TestGeneratedInvokeReturnsUntypedNil(t *testing.T) {
	for _, m := range counter.CounterService.Methods {
		reply, err := m.Invoke(context.Background(), nilGrain{}, m.NewRequest())
		require.ErrorIs(t, err, errNil, m.Desc.Name)
		assert.True(t, reply == nil, "%s returned a non-nil interface holding %#v", m.Desc.Name, reply)
	}
}

// addGrain adds for real, to check that requests and replies are passed
// through Invoke unchanged.
type addGrain struct{ nilGrain }

func (addGrain) Add(_ context.Context, in *counter.AddRequest) (*counter.AddReply, error) {
	return &counter.AddReply{Value: in.GetDelta() + 1}, nil
}

func TestGeneratedInvokeDispatches(t *testing.T) {
	m := counter.CounterService.Method(counter.Counter_Add_Method.ID)
	require.NotNil(t, m)
	req := m.NewRequest()
	require.IsType(t, &counter.AddRequest{}, req)
	req.(*counter.AddRequest).Delta = 41
	reply, err := m.Invoke(context.Background(), addGrain{}, req)
	require.NoError(t, err)
	assert.Equal(t, int64(42), reply.(*counter.AddReply).GetValue())
}

// recordingRegistrar keeps what RegisterGrain was given.
type recordingRegistrar struct {
	desc    *proxy.ServiceDesc
	factory func(id actor.GrainID) any
}

func (r *recordingRegistrar) RegisterGrain(desc *proxy.ServiceDesc, factory func(id actor.GrainID) any) error {
	r.desc, r.factory = desc, factory
	return nil
}

func TestGeneratedRegisterPassesFactory(t *testing.T) {
	var r recordingRegistrar
	var got actor.GrainID
	require.NoError(t, counter.RegisterCounterGrain(&r, func(id actor.GrainID) counter.CounterGrain {
		got = id
		return addGrain{}
	}))
	assert.Same(t, counter.CounterService, r.desc)
	id := actor.GrainID{Type: counter.CounterGrainType, Key: "k"}
	assert.IsType(t, addGrain{}, r.factory(id))
	assert.Equal(t, id, got)
}

// fakeCaller answers calls by filling in the reply, and records them.
type fakeCaller struct {
	calls []proxy.Call
	err   error
}

func (c *fakeCaller) Call(_ context.Context, call proxy.Call, in, out proto.Message) error {
	c.calls = append(c.calls, call)
	if c.err != nil {
		return c.err
	}
	if reply, ok := out.(*counter.AddReply); ok {
		reply.Value = in.(*counter.AddRequest).GetDelta()
	}
	return nil
}

func (c *fakeCaller) ResponseTimeout() time.Duration { return 10 * time.Second }

func TestGeneratedRefCalls(t *testing.T) {
	c := &fakeCaller{}
	ref := counter.NewCounterRef(c, "key")
	assert.Equal(t, actor.GrainID{Type: counter.CounterGrainType, Key: "key"}, ref.GrainID())

	reply, err := ref.Add(context.Background(), &counter.AddRequest{Delta: 7}, proxy.WithTimeout(time.Second))
	require.NoError(t, err)
	assert.Equal(t, int64(7), reply.GetValue())
	_, err = ref.Get(context.Background(), &counter.GetRequest{})
	require.NoError(t, err)

	require.Len(t, c.calls, 2)
	assert.Same(t, counter.Counter_Add_Method, c.calls[0].Method)
	assert.Equal(t, 800*time.Millisecond, c.calls[0].Budget, "a bounded method gets 80% of the timeout")
	assert.Same(t, counter.Counter_Get_Method, c.calls[1].Method)
	assert.Zero(t, c.calls[1].Budget, "an unbounded method gets no budget")

	c.err = errNil
	reply, err = ref.Add(context.Background(), &counter.AddRequest{})
	require.ErrorIs(t, err, errNil)
	assert.Nil(t, reply)
}
