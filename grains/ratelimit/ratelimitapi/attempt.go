package ratelimitapi

import (
	"context"
	"strconv"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/internal/retryafter"
	apiv1 "github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1"
)

// TryAcquire takes permits only if they are free now; a rejection is a
// response whose acquired is false, with a Retry-After header, as for
// Acquire.
func (s *service) TryAcquire(ctx context.Context, req *connect.Request[apiv1.AcquireRequest]) (*connect.Response[apiv1.AcquireResponse], error) {
	m := req.Msg
	alg, o, err := s.withOptions(m.GetAlgorithm(), m.GetKey(), m.GetConfig(), m.GetOptions())
	if err != nil {
		return nil, codeOf(err)
	}
	lease, err := alg.tryAcquire(ctx, s.caller, m.GetKey(), permitsOf(m), o)
	if err != nil {
		return nil, codeOf(err)
	}
	resp := connect.NewResponse(leaseResponse(lease))
	if !lease.Acquired() {
		resp.Header().Set("Retry-After", strconv.FormatInt(retryafter.Seconds(lease.RetryAfter()), 10))
	}
	return resp, nil
}

// permitsOf is a request's permit count: 1 when absent.
func permitsOf(m *apiv1.AcquireRequest) int64 {
	if m.Permits != nil {
		return m.GetPermits()
	}
	return 1
}

// leaseResponse describes a lease as the API answers it.
func leaseResponse(lease *ratelimit.Lease) *apiv1.AcquireResponse {
	out := &apiv1.AcquireResponse{
		Acquired:        lease.Acquired(),
		LeaseId:         lease.ID(),
		ReleaseOptional: lease.ReleaseOptional(),
		Reason:          lease.Reason(),
	}
	if d := lease.RetryAfter(); d > 0 {
		out.RetryAfter = durationpb.New(d)
	}
	for name, value := range lease.Metadata() {
		if out.Metadata == nil {
			out.Metadata = make(map[string]string, 2)
		}
		out.Metadata[name] = value
	}
	return out
}
