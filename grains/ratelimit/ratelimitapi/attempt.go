package ratelimitapi

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/internal/retryafter"
	apiv1 "github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
)

// TryAcquire takes permits only if they are free now; a rejection is a
// response whose acquired is false, with a Retry-After header, as for
// Acquire.
func (s *service) TryAcquire(ctx context.Context, req *connect.Request[apiv1.AcquireRequest]) (*connect.Response[apiv1.AcquireResponse], error) {
	m := req.Msg
	alg, o, err := s.withOptions(ctx, m.GetAlgorithm(), m.GetKey(), m.GetConfig(), m.GetOptions())
	if err != nil {
		return nil, codeOf(err)
	}
	lease, err := alg.tryAcquire(ctx, s.caller, m.GetKey(), permitsOf(m), o)
	if err != nil {
		return nil, codeOf(err)
	}
	lease.Detach() // the remote caller renews it
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
	if d := lease.TTL(); d > 0 {
		out.LeaseTtl = durationpb.New(d)
	}
	for name, value := range lease.Metadata() {
		if out.Metadata == nil {
			out.Metadata = make(map[string]string, 2)
		}
		out.Metadata[name] = value
	}
	return out
}

// maxAcquisitions bounds the acquisitions of one AcquireMany.
const maxAcquisitions = 64

// AcquireMany decides over several limits at once, all or nothing.
func (s *service) AcquireMany(ctx context.Context, req *connect.Request[apiv1.AcquireManyRequest]) (*connect.Response[apiv1.AcquireManyResponse], error) {
	reqs := req.Msg.GetAcquisitions()
	switch {
	case len(reqs) == 0:
		return nil, codeOf(fmt.Errorf("%w: no acquisitions", errInvalid))
	case len(reqs) > maxAcquisitions:
		return nil, codeOf(fmt.Errorf("%w: %d acquisitions, more than %d", errInvalid, len(reqs), maxAcquisitions))
	}
	acquisitions := make([]ratelimit.Acquisition, len(reqs))
	for i, m := range reqs {
		alg, o, err := s.withOptions(ctx, m.GetAlgorithm(), m.GetKey(), m.GetConfig(), m.GetOptions())
		if err != nil {
			return nil, codeOf(fmt.Errorf("acquisition %d: %w", i, err))
		}
		acquisitions[i] = ratelimit.Acquisition{Limiter: alg.bound(s.caller, m.GetKey(), o), Permits: permitsOf(m)}
	}
	outcomes, ok := ratelimit.AcquireMany(ctx, ratelimit.ManyOptions{Try: req.Msg.GetAttempt()}, acquisitions...)
	out := &apiv1.AcquireManyResponse{Acquired: ok, Leases: make([]*apiv1.AcquireResponse, len(outcomes))}
	var retry time.Duration
	for i, o := range outcomes {
		if o.Err != nil {
			// What the others granted went back before AcquireMany returned.
			return nil, codeOf(fmt.Errorf("acquisition %d: %w", i, o.Err))
		}
		o.Lease.Detach() // the remote caller renews it
		out.Leases[i] = leaseResponse(o.Lease)
		if o.GivenBack {
			out.GivenBack = append(out.GivenBack, int32(i))
		}
		if !o.Lease.Acquired() {
			retry = max(retry, o.Lease.RetryAfter())
		}
	}
	if !ok && ctx.Err() != nil {
		return nil, codeOf(ctx.Err())
	}
	resp := connect.NewResponse(out)
	if !ok {
		// The decision can succeed only once every refusing limit could:
		// the longest of their hints.
		resp.Header().Set("Retry-After", strconv.FormatInt(retryafter.Seconds(retry), 10))
	}
	return resp, nil
}

// Renew keeps a remote caller's concurrency leases alive.
func (s *service) Renew(ctx context.Context, req *connect.Request[apiv1.RenewRequest]) (*connect.Response[apiv1.RenewResponse], error) {
	m := req.Msg
	if _, err := s.limiterOf(m.GetAlgorithm(), m.GetKey()); err != nil {
		return nil, codeOf(err)
	}
	if m.GetAlgorithm() != apiv1.Algorithm_ALGORITHM_CONCURRENCY || len(m.GetLeaseIds()) == 0 {
		return connect.NewResponse(&apiv1.RenewResponse{Unknown: m.GetLeaseIds()}), nil
	}
	if len(m.GetLeaseIds()) > maxRenewals {
		return nil, codeOf(fmt.Errorf("%w: %d lease ids, more than %d", errInvalid, len(m.GetLeaseIds()), maxRenewals))
	}
	reply, err := pb.NewConcurrencyLimiterRef(s.caller, m.GetKey()).Renew(ctx, &pb.RenewRequest{LeaseIds: m.GetLeaseIds()})
	if err != nil {
		return nil, codeOf(err)
	}
	return connect.NewResponse(&apiv1.RenewResponse{Unknown: reply.Unknown}), nil
}

// maxRenewals bounds the lease ids of one Renew.
const maxRenewals = 4096
