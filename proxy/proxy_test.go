package proxy

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
)

// recordingCaller records the calls it is asked to make.
type recordingCaller struct {
	timeout time.Duration
	filters []OutgoingFilter
	calls   []Call
}

func (c *recordingCaller) Call(_ context.Context, call Call, in, out proto.Message) error {
	c.calls = append(c.calls, call)
	proto.Merge(out, in)
	return nil
}
func (c *recordingCaller) ResponseTimeout() time.Duration { return c.timeout }

type filteringCaller struct{ *recordingCaller }

func (f filteringCaller) OutgoingFilters() []OutgoingFilter { return f.filters }

var (
	bounded   = &MethodDesc{Service: "s.S", Name: "B", ID: MethodID("s.S", "B"), Bounded: true}
	unbounded = &MethodDesc{Service: "s.S", Name: "U", ID: MethodID("s.S", "U")}
)

func TestRefResolvesTimeoutsAndBudgets(t *testing.T) {
	c := &recordingCaller{timeout: 10 * time.Second}
	ref := NewRef(c, "s.S", "k")
	assert.Equal(t, actor.GrainID{Type: "s.S", Key: "k"}, ref.GrainID())
	assert.Same(t, c, ref.Caller())
	in, out := wrapperspb.Int64(1), &wrapperspb.Int64Value{}
	bg := context.Background()

	require.NoError(t, ref.Invoke(bg, bounded, in, out))
	require.NoError(t, ref.Invoke(bg, unbounded, in, out))
	require.NoError(t, ref.Invoke(bg, bounded, in, out, WithTimeout(time.Second), WithPlacementHint("silo-2")))
	ctx, cancel := context.WithTimeout(bg, 2*time.Second)
	defer cancel()
	require.NoError(t, ref.Invoke(ctx, bounded, in, out))

	require.Len(t, c.calls, 4)
	assert.Equal(t, 8*time.Second, c.calls[0].Budget, "80% of the caller's timeout")
	assert.Equal(t, 10*time.Second, c.calls[0].Timeout)
	assert.False(t, c.calls[0].Cancellable, "context.Background cannot cancel")
	assert.Zero(t, c.calls[1].Budget, "unbounded methods carry no budget")
	assert.Equal(t, 800*time.Millisecond, c.calls[2].Budget, "per-call timeout shapes the budget")
	assert.Equal(t, "silo-2", c.calls[2].PlacementHint)
	assert.LessOrEqual(t, c.calls[3].Budget, 2*time.Second, "the caller's shorter deadline wins")
	assert.Greater(t, c.calls[3].Budget, time.Second)
	assert.True(t, c.calls[3].Cancellable)
	assert.EqualValues(t, 1, out.Value)

	// The timeout was resolved when the reference was built.
	c.timeout = time.Hour
	require.NoError(t, ref.Invoke(bg, bounded, in, out))
	assert.Equal(t, 10*time.Second, c.calls[4].Timeout)
	assert.Equal(t, time.Hour, NewRef(c, "s.S", "k").timeout, "a new reference sees the new value")
}

func TestBudgetExpired(t *testing.T) {
	c := &recordingCaller{timeout: time.Second}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	err := NewRef(c, "s.S", "k").Invoke(ctx, bounded, wrapperspb.Int64(1), &wrapperspb.Int64Value{})
	require.ErrorIs(t, err, ErrBudgetExpired)
	assert.Empty(t, c.calls, "nothing is sent")
	// An unbounded method is not refused for its budget: the transport
	// reports the caller's deadline.
	require.NoError(t, NewRef(c, "s.S", "k").Invoke(ctx, unbounded, wrapperspb.Int64(1), &wrapperspb.Int64Value{}))
}

func TestOutgoingFiltersRunInOrder(t *testing.T) {
	var order []string
	filter := func(name string) OutgoingFilter {
		return func(ctx context.Context, call Call, in, out proto.Message, next Invoker) error {
			order = append(order, name)
			return next(ctx, call, in, out)
		}
	}
	c := &recordingCaller{timeout: time.Second, filters: []OutgoingFilter{filter("a"), filter("b")}}
	ref := NewRef(filteringCaller{c}, "s.S", "k")
	require.NoError(t, ref.Invoke(context.Background(), unbounded, wrapperspb.Int64(1), &wrapperspb.Int64Value{}))
	assert.Equal(t, []string{"a", "b"}, order)
	assert.Len(t, c.calls, 1)

	refuse := func(context.Context, Call, proto.Message, proto.Message, Invoker) error { return errors.New("refused") }
	c.filters = []OutgoingFilter{refuse}
	err := NewRef(filteringCaller{c}, "s.S", "k").Invoke(context.Background(), unbounded, wrapperspb.Int64(1), &wrapperspb.Int64Value{})
	require.EqualError(t, err, "refused")
	assert.Len(t, c.calls, 1, "a filter may stop the call")
}

type echoGrain struct{}

func testService() *ServiceDesc {
	return &ServiceDesc{Name: "s.S", Methods: []Method{{
		Desc:       unbounded,
		NewRequest: func() proto.Message { return new(wrapperspb.Int64Value) },
		Invoke: func(_ context.Context, g any, req proto.Message) (proto.Message, error) {
			_ = g.(echoGrain)
			return wrapperspb.Int64(req.(*wrapperspb.Int64Value).Value * 2), nil
		},
	}}}
}

func TestServiceDescValidate(t *testing.T) {
	for name, mutate := range map[string]func(*ServiceDesc){
		"no name":    func(s *ServiceDesc) { s.Name = "" },
		"incomplete": func(s *ServiceDesc) { s.Methods[0].Invoke = nil },
		"stale id": func(s *ServiceDesc) {
			s.Methods[0].Desc = &MethodDesc{Service: "s.S", Name: "U", ID: 7}
		},
		"wrong service": func(s *ServiceDesc) {
			s.Methods[0].Desc = &MethodDesc{Service: "x.X", Name: "U", ID: MethodID("x.X", "U")}
		},
		"duplicate": func(s *ServiceDesc) { s.Methods = append(s.Methods, s.Methods[0]) },
	} {
		t.Run(name, func(t *testing.T) {
			svc := testService()
			mutate(svc)
			require.ErrorIs(t, svc.Validate(), ErrInvalidDescriptor)
		})
	}
}

func TestMethodIDsAreStable(t *testing.T) {
	// FNV-1a of "service/method": a fixed value, so a change to the
	// derivation (which would break every deployed peer) fails here.
	assert.Equal(t, uint32(0x67bcee54), MethodID("granary.examples.counter.Counter", "Add"))
	assert.NotEqual(t, MethodID("a.B", "C"), MethodID("a.B", "D"))
}

func TestGrainErrorsMatchByCode(t *testing.T) {
	notFound := NewError(404, "not found")
	err := fmt.Errorf("lookup: %w", Errorf(404, "no user %q", "ann"))
	assert.ErrorIs(t, err, notFound, "the same code matches whatever the message")
	assert.ErrorIs(t, err, ErrApplication)
	assert.NotErrorIs(t, err, NewError(403, "not found"))
	assert.NotErrorIs(t, err, ErrUnavailable)
	assert.Equal(t, `no user "ann" (code 404)`, errors.Unwrap(err).Error())
	assert.Equal(t, "plain", NewError(0, "plain").Error(), "code 0 adds nothing to the message")

	withDetail, err := notFound.WithDetails(wrapperspb.String("user ann"))
	require.NoError(t, err)
	require.Len(t, withDetail.Details, 1)
	assert.Empty(t, notFound.Details, "WithDetails copies")
	var got wrapperspb.StringValue
	require.NoError(t, withDetail.Details[0].UnmarshalTo(&got))
	assert.Equal(t, "user ann", got.Value)
}

func TestCallErrorsMatchTheirSentinelOnce(t *testing.T) {
	for _, tc := range []struct {
		err      *CallError
		sentinel error
		text     string
	}{
		{&CallError{Code: CodeTimeout}, ErrTimeout, ErrTimeout.Error()},
		{&CallError{Code: CodeCancelled, Message: "gone"}, context.Canceled, "context canceled: gone"},
		{&CallError{Code: CodeUnavailable, Message: "actor: grain unavailable: actor: host is stopping"}, ErrUnavailable, "actor: grain unavailable: actor: host is stopping"},
		{&CallError{Code: CodeForwardLimit, Message: "x"}, ErrForwardLimit, "proxy: forwarding limit reached: x"},
		{&CallError{Code: Code(200), Message: "future"}, ErrUnavailable, "actor: grain unavailable: future"},
	} {
		assert.ErrorIs(t, tc.err, tc.sentinel, "%v", tc.err)
		assert.NotErrorIs(t, tc.err, ErrApplication)
		assert.Equal(t, tc.text, tc.err.Error(), "the sentinel is said once")
	}
	assert.Contains(t, (&TimeoutError{Target: actor.GrainID{Type: "t", Key: "k"}, Method: "t/M", Timeout: time.Second}).Error(), "t/k")
}

// Method finds a method by id whether the service is small (scanned) or
// large (indexed), and reports unknown ids as nil.
func TestServiceDescMethodLookup(t *testing.T) {
	for _, n := range []int{1, linearMethods, linearMethods + 1, 40} {
		desc := &ServiceDesc{Name: "test.Big"}
		for i := range n {
			name := fmt.Sprintf("M%d", i)
			desc.Methods = append(desc.Methods, Method{Desc: &MethodDesc{Service: desc.Name, Name: name, ID: MethodID(desc.Name, name)}})
		}
		for i := range n {
			m := desc.Method(MethodID(desc.Name, fmt.Sprintf("M%d", i)))
			require.NotNil(t, m, "%d methods, M%d", n, i)
			assert.Equal(t, fmt.Sprintf("M%d", i), m.Desc.Name)
		}
		assert.Nil(t, desc.Method(MethodID(desc.Name, "missing")), "%d methods", n)
	}
}
