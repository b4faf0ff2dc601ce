package dispatch

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/proxy"
)

var doubled = &proxy.MethodDesc{Service: "s.S", Name: "U", ID: proxy.MethodID("s.S", "U")}

type echoGrain struct{}

func testService() *proxy.ServiceDesc {
	return &proxy.ServiceDesc{Name: "s.S", Methods: []proxy.Method{{
		Desc:       doubled,
		NewRequest: func() proto.Message { return new(wrapperspb.Int64Value) },
		Invoke: func(_ context.Context, g any, req proto.Message) (proto.Message, error) {
			_ = g.(echoGrain)
			return wrapperspb.Int64(req.(*wrapperspb.Int64Value).Value * 2), nil
		},
	}}}
}

func TestDispatcherDecodesRunsAndFilters(t *testing.T) {
	svc := testService()
	require.NoError(t, svc.Validate())
	payload, err := proto.Marshal(wrapperspb.Int64(21))
	require.NoError(t, err)

	d := &Dispatcher{Service: svc}
	reply, err := d.Dispatch(context.Background(), echoGrain{}, doubled.ID, payload)
	require.NoError(t, err)
	assert.EqualValues(t, 42, reply.(*wrapperspb.Int64Value).Value)
	assert.Equal(t, "U", d.MethodName(doubled.ID))
	assert.Equal(t, []uint32{doubled.ID}, d.MethodIDs(), "the host keeps a call counter per id")
	assert.Empty(t, d.MethodName(12345))

	_, err = d.Dispatch(context.Background(), echoGrain{}, 12345, payload)
	require.ErrorIs(t, err, proxy.ErrUnknownMethod)
	_, err = d.Dispatch(context.Background(), echoGrain{}, doubled.ID, []byte{0xff})
	require.ErrorIs(t, err, proxy.ErrBadRequest)

	var seen []string
	d.Filters = []proxy.IncomingFilter{func(ctx context.Context, call *proxy.IncomingCall, next proxy.IncomingInvoker) (proto.Message, error) {
		seen = append(seen, call.Method.FullName())
		call.Request = wrapperspb.Int64(1) // filters may replace the request
		return next(ctx, call)
	}}
	reply, err = d.Dispatch(context.Background(), echoGrain{}, doubled.ID, payload)
	require.NoError(t, err)
	assert.EqualValues(t, 2, reply.(*wrapperspb.Int64Value).Value)
	assert.Equal(t, []string{"s.S/U"}, seen)
}

// BenchmarkDispatch is the server side of a call without filters: find the
// method, decode the request, run the grain.
func BenchmarkDispatch(b *testing.B) {
	d := &Dispatcher{Service: testService()}
	payload, err := proto.Marshal(wrapperspb.Int64(21))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Dispatch(ctx, echoGrain{}, doubled.ID, payload); err != nil {
			b.Fatal(err)
		}
	}
}
