package silo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

// forwarder is a grain that calls a counter grain through its silo.
type forwarder struct{ gc *actor.Context }

func (f *forwarder) OnActivate(_ context.Context, gc *actor.Context) error {
	f.gc = gc
	return nil
}

var forwardMethod = &proxy.MethodDesc{Service: "test.Forwarder", Name: "Forward", ID: proxy.MethodID("test.Forwarder", "Forward")}

var forwarderService = &proxy.ServiceDesc{Name: "test.Forwarder", Methods: []proxy.Method{{
	Desc:       forwardMethod,
	NewRequest: func() proto.Message { return new(wrapperspb.Int64Value) },
	Invoke: func(ctx context.Context, g any, req proto.Message) (proto.Message, error) {
		f := g.(*forwarder)
		ref := testgrain.NewCounterRef(silo.CallerOf(f.gc), f.gc.ID().Key)
		r, err := ref.Add(ctx, &testgrain.AddRequest{Delta: req.(*wrapperspb.Int64Value).Value})
		if err != nil {
			return nil, err
		}
		return wrapperspb.Int64(r.Value), nil
	},
}}}

func TestGrainCallsAnotherGrainThroughItsSilo(t *testing.T) {
	s, err := silo.New(silo.Options{GatewayAddress: "127.0.0.1:0"}, silo.WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, testgrain.RegisterCounterGrain(s, testgrain.New(nil)))
	require.NoError(t, s.RegisterGrain(forwarderService, func(actor.GrainID) any { return &forwarder{} }))
	require.NoError(t, s.Start(context.Background()))
	defer func() { require.NoError(t, s.Stop(context.Background())) }()

	c, err := client.New(client.Options{Gateways: []string{s.GatewayAddr().String()}}, client.WithLogger(quiet))
	require.NoError(t, err)
	defer c.Close()
	out := &wrapperspb.Int64Value{}
	fwd := proxy.NewRef(c, "test.Forwarder", "shared")
	for i := int64(1); i <= 2; i++ {
		require.NoError(t, fwd.Invoke(context.Background(), forwardMethod, wrapperspb.Int64(5), out))
		assert.Equal(t, 5*i, out.Value)
	}
	r, err := testgrain.NewCounterRef(c, "shared").Get(context.Background(), &testgrain.GetRequest{})
	require.NoError(t, err)
	assert.EqualValues(t, 10, r.Value, "the forwarder's calls reached the counter grain")
}

func TestRegisteringAGrainThatDoesNotImplementItsContractFailsItsCalls(t *testing.T) {
	s, err := silo.New(silo.Options{DisableGateway: true}, silo.WithLogger(quiet))
	require.NoError(t, err)
	desc := &proxy.ServiceDesc{Name: testgrain.CounterGrainType, Methods: testgrain.CounterService.Methods, HandlerType: (*testgrain.CounterGrain)(nil)}
	require.NoError(t, s.RegisterGrain(desc, func(actor.GrainID) any { return &forwarder{} }))
	require.Error(t, s.RegisterGrain(desc, func(actor.GrainID) any { return &forwarder{} }), "a type registers once")
	require.Error(t, s.RegisterGrain(desc, nil))
	require.NoError(t, s.Start(context.Background()))
	defer func() { require.NoError(t, s.Stop(context.Background())) }()
	_, err = testgrain.NewCounterRef(s.Caller(), "k").Get(context.Background(), &testgrain.GetRequest{})
	require.ErrorIs(t, err, actor.ErrActivation, "the factory's grain does not implement CounterGrain")
}
