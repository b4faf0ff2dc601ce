package ratelimit

import (
	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
)

// changeMethods are the limiter grains' methods that change what the
// operator configured or the quota callers have: they need the admin
// right of a client that calls them through a gateway.
// AcquireAndCheckConfiguration and TryAcquire are not among them: a
// holder bound to options calls them on every acquisition, and they
// change the grain only when the options differ, which only the grain can
// tell, so the grain asks for the right itself (limitgrain's
// mayChangeOptions, from the caller's actor.Identity).
var changeMethods = []*proxy.MethodDesc{
	ratelimitpb.ConcurrencyLimiter_Configure_Method,
	ratelimitpb.ConcurrencyLimiter_Reset_Method,
	ratelimitpb.ConcurrencyLimiter_DeleteState_Method,
	ratelimitpb.FixedWindowLimiter_Configure_Method,
	ratelimitpb.FixedWindowLimiter_Reset_Method,
	ratelimitpb.FixedWindowLimiter_DeleteState_Method,
	ratelimitpb.FixedWindowLimiter_TryReplenish_Method,
	ratelimitpb.SlidingWindowLimiter_Configure_Method,
	ratelimitpb.SlidingWindowLimiter_Reset_Method,
	ratelimitpb.SlidingWindowLimiter_DeleteState_Method,
	ratelimitpb.SlidingWindowLimiter_TryReplenish_Method,
	ratelimitpb.TokenBucketLimiter_Configure_Method,
	ratelimitpb.TokenBucketLimiter_Reset_Method,
	ratelimitpb.TokenBucketLimiter_DeleteState_Method,
	ratelimitpb.TokenBucketLimiter_TryReplenish_Method,
}

// rightsRegistrar is a registrar that guards methods with rights
// (*silo.Silo).
type rightsRegistrar interface {
	RequireRights(m *proxy.MethodDesc, r actor.Rights) error
}

// requireAdminForChanges makes the limiters' changes need actor.RightAdmin
// of clients on a registrar that guards methods.
func requireAdminForChanges(r proxy.Registrar) error {
	rr, ok := r.(rightsRegistrar)
	if !ok {
		return nil
	}
	for _, m := range changeMethods {
		if err := rr.RequireRights(m, actor.RightAdmin); err != nil {
			return err
		}
	}
	return nil
}
