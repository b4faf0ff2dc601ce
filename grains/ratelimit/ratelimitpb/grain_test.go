package ratelimitpb

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/proxy/granarypb"
)

// recorder is a caller that records the calls references make.
type recorder struct{ calls []proxy.Call }

func (r *recorder) Call(_ context.Context, call proxy.Call, _, _ proto.Message) error {
	r.calls = append(r.calls, call)
	return nil
}

func (r *recorder) ResponseTimeout() time.Duration { return time.Second }

// stub implements every limiter service; each method answers nothing.
type stub[P, R any] struct{}

func (stub[P, R]) Acquire(context.Context, *AcquireRequest) (*LeaseMetadata, error) { return nil, nil }
func (stub[P, R]) AcquireAndCheckConfiguration(context.Context, R) (*LeaseMetadata, error) {
	return nil, nil
}
func (stub[P, R]) TryAcquire(context.Context, R) (*LeaseMetadata, error)           { return nil, nil }
func (stub[P, R]) Refund(context.Context, *RefundRequest) (*RefundReply, error)    { return nil, nil }
func (stub[P, R]) Renew(context.Context, *RenewRequest) (*RenewReply, error)       { return nil, nil }
func (stub[P, R]) Release(context.Context, *ReleaseRequest) (*ReleaseReply, error) { return nil, nil }
func (stub[P, R]) Statistics(context.Context, *StatisticsRequest) (*StatisticsReply, error) {
	return nil, nil
}
func (stub[P, R]) Configure(context.Context, P) (*ConfigureReply, error) { return nil, nil }
func (stub[P, R]) Configuration(context.Context, *ConfigurationRequest) (P, error) {
	var p P
	return p, nil
}
func (stub[P, R]) Reset(context.Context, *ResetRequest) (*ResetReply, error) { return nil, nil }
func (stub[P, R]) DeleteState(context.Context, *DeleteStateRequest) (*DeleteStateReply, error) {
	return nil, nil
}
func (stub[P, R]) TryReplenish(context.Context, *TryReplenishRequest) (*TryReplenishReply, error) {
	return nil, nil
}
func (stub[P, R]) LeaseQuota(context.Context, *QuotaRequest) (*QuotaReply, error) { return nil, nil }
func (stub[P, R]) ReturnQuota(context.Context, *ReturnQuotaRequest) (*ReturnQuotaReply, error) {
	return nil, nil
}

// TestReferencesCallTheirMethodsAndTheServicesDispatchThem checks the
// generated code of each service against its contract: every reference
// method calls the method of the same name, bounded exactly when the
// .proto says so, and every method of the service descriptor reaches the
// grain's method.
func TestReferencesCallTheirMethodsAndTheServicesDispatchThem(t *testing.T) {
	r := &recorder{}
	for _, svc := range []struct {
		desc  *proxy.ServiceDesc
		ref   any
		grain any
	}{
		{ConcurrencyLimiterService, NewConcurrencyLimiterRef(r, "k"), stub[*ConcurrencyOptions, *ConcurrencyAcquireRequest]{}},
		{FixedWindowLimiterService, NewFixedWindowLimiterRef(r, "k"), stub[*FixedWindowOptions, *FixedWindowAcquireRequest]{}},
		{SlidingWindowLimiterService, NewSlidingWindowLimiterRef(r, "k"), stub[*SlidingWindowOptions, *SlidingWindowAcquireRequest]{}},
		{TokenBucketLimiterService, NewTokenBucketLimiterRef(r, "k"), stub[*TokenBucketOptions, *TokenBucketAcquireRequest]{}},
	} {
		require.NoError(t, svc.desc.Validate())
		sd := File_grains_ratelimit_ratelimitpb_ratelimit_proto.Services().ByName(svcName(svc.desc.Name))
		require.NotNil(t, sd)
		ref := reflect.ValueOf(svc.ref)
		assert.Equal(t, actor.GrainID{Type: svc.desc.Name, Key: "k"}, ref.MethodByName("GrainID").Call(nil)[0].Interface())
		for _, m := range svc.desc.Methods {
			md := sd.Methods().ByName(protoName(m.Desc.Name))
			require.NotNil(t, md, "%s is in the contract", m.Desc.FullName())
			bounded := proto.GetExtension(md.Options(), granarypb.E_Bounded).(bool)
			assert.Equal(t, bounded, m.Desc.Bounded, "%s", m.Desc.FullName())

			call := ref.MethodByName(m.Desc.Name)
			require.True(t, call.IsValid(), "the reference has %s", m.Desc.Name)
			out := call.Call([]reflect.Value{reflect.ValueOf(context.Background()), reflect.ValueOf(m.NewRequest())})
			require.True(t, out[1].IsNil(), "%s: %v", m.Desc.Name, out[1])
			last := r.calls[len(r.calls)-1]
			assert.Equal(t, m.Desc, last.Method)
			assert.Equal(t, bounded, last.Budget > 0, "%s carries a budget exactly when bounded", m.Desc.FullName())

			reply, err := m.Invoke(context.Background(), svc.grain, m.NewRequest())
			require.NoError(t, err)
			assert.Nil(t, reply, "a nil reply stays a nil interface")
		}
	}
}

// svcName is the short name of a service of this file.
func svcName(full string) protoreflect.Name {
	return protoreflect.Name(full[len(File_grains_ratelimit_ratelimitpb_ratelimit_proto.Package())+1:])
}

func protoName(s string) protoreflect.Name { return protoreflect.Name(s) }
