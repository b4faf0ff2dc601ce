package envoyrls

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/proxy"
)

// Bounds of a request: Envoy sends a handful of descriptors of a few
// entries each, and a request beyond these is refused before any grain is
// asked.
const (
	MaxDescriptors = 64
	MaxEntries     = 32
)

// The response header names envoyproxy/ratelimit sends by default.
const (
	DefaultLimitHeader     = "RateLimit-Limit"
	DefaultRemainingHeader = "RateLimit-Remaining"
	DefaultResetHeader     = "RateLimit-Reset"
)

// Options say how the service answers beyond its configuration.
type Options struct {
	// ResponseHeaders adds RateLimit-Limit, RateLimit-Remaining and
	// RateLimit-Reset (under the names below) to every response, from the
	// descriptor closest to its limit, as envoyproxy/ratelimit does with
	// LIMIT_RESPONSE_HEADERS_ENABLED.
	ResponseHeaders bool
	// LimitHeader, RemainingHeader and ResetHeader name the headers;
	// empty takes the defaults above.
	LimitHeader, RemainingHeader, ResetHeader string
	// SkipRemaining leaves limit_remaining 0 in the statuses of
	// descriptors within their limit. The grains' answers carry it, so it
	// costs nothing but a few bytes, except against silos that predate it,
	// which need a second round of calls for it (see docs/envoy.md).
	SkipRemaining bool
	// ShadowMode answers OK whatever the limits say (envoyproxy/ratelimit's
	// global SHADOW_MODE); the limits still count.
	ShadowMode bool
}

// Server is envoy.service.ratelimit.v3.RateLimitService over a granary
// cluster: each descriptor's limit is a limiter grain, all of a request's
// descriptors are decided in one concurrent round of calls, all or nothing.
// It is safe for concurrent use; SetConfig swaps the configuration while it
// serves.
type Server struct {
	rlsv3.UnimplementedRateLimitServiceServer

	caller proxy.Caller
	opts   Options
	state  atomic.Pointer[serving]
}

// serving is a configuration with a holder per rule, built once per
// configuration so that requests only pick a key (Holder.ForKey).
type serving struct {
	config  *Config
	holders map[*rule]keyed
}

// keyed makes a holder of one rule's options for a key.
type keyed interface {
	forKey(key string) ratelimit.Limiter
}

type holderOf[O ratelimit.Options] struct{ h *ratelimit.Holder[O] }

func (p holderOf[O]) forKey(key string) ratelimit.Limiter { return p.h.ForKey(key) }

// NewServer returns a server acquiring through caller (a silo's own
// caller, or a client), which must not be nil. It answers Unavailable
// until SetConfig.
func NewServer(caller proxy.Caller, opts Options) *Server {
	if opts.LimitHeader == "" {
		opts.LimitHeader = DefaultLimitHeader
	}
	if opts.RemainingHeader == "" {
		opts.RemainingHeader = DefaultRemainingHeader
	}
	if opts.ResetHeader == "" {
		opts.ResetHeader = DefaultResetHeader
	}
	return &Server{caller: caller, opts: opts}
}

// SetConfig makes c the configuration of the requests that start from now.
func (s *Server) SetConfig(c *Config) {
	st := &serving{config: c, holders: make(map[*rule]keyed)}
	for _, root := range c.domains {
		root.walk(func(r *rule) {
			if r.options != nil {
				st.holders[r] = holderFor(s.caller, r.options)
			}
		})
	}
	s.state.Store(st)
}

// Config returns the configuration in use; nil before SetConfig.
func (s *Server) Config() *Config {
	if st := s.state.Load(); st != nil {
		return st.config
	}
	return nil
}

func (n *node) walk(f func(*rule)) {
	if n.rule != nil {
		f(n.rule)
	}
	for _, c := range n.children {
		c.walk(f)
	}
}

func holderFor(c proxy.Caller, options any) keyed {
	switch o := options.(type) {
	case ratelimit.SlidingWindowOptions:
		return holderOf[ratelimit.SlidingWindowOptions]{ratelimit.SlidingWindow(c, "", o)}
	case ratelimit.TokenBucketOptions:
		return holderOf[ratelimit.TokenBucketOptions]{ratelimit.TokenBucket(c, "", o)}
	default:
		return holderOf[ratelimit.FixedWindowOptions]{ratelimit.FixedWindow(c, "", o.(ratelimit.FixedWindowOptions))}
	}
}

// decision is one descriptor's part of a request.
type decision struct {
	rule    *rule
	key     string
	hits    uint64
	limiter ratelimit.Limiter // nil when no grain is asked
	status  *rlsv3.RateLimitResponse_DescriptorStatus
	over    bool // over its limit, shadow or not
	// unknown says the grain's answer did not carry what it had left (a
	// silo that predates it): the remaining round asks.
	unknown bool
}

// ShouldRateLimit decides a request: every descriptor that matches a
// limit takes hits_addend permits (1 when the request names none) from its
// grain, all in one round and as one decision: when one is over its limit
// the others' permits are given back. The overall code is OVER_LIMIT when
// any descriptor not in shadow mode is over its limit.
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	st := s.state.Load()
	if st == nil {
		return nil, status.Error(codes.Unavailable, "envoyrls: no configuration loaded")
	}
	ds, err := s.decisions(st, req)
	if err != nil {
		return nil, err
	}
	if err := s.decide(ctx, st, ds); err != nil {
		return nil, err
	}
	if !s.opts.SkipRemaining {
		s.remaining(ctx, ds)
	} else {
		for i := range ds {
			if !ds[i].over && ds[i].status.CurrentLimit != nil {
				ds[i].status.LimitRemaining = 0
			}
		}
	}
	return s.response(ds), nil
}

func checkRequest(req *rlsv3.RateLimitRequest) error {
	switch n := len(req.GetDescriptors()); {
	case req.GetDomain() == "":
		return status.Error(codes.InvalidArgument, "envoyrls: the domain is empty")
	case n == 0:
		return status.Error(codes.InvalidArgument, "envoyrls: the request has no descriptor")
	case n > MaxDescriptors:
		return status.Errorf(codes.InvalidArgument, "envoyrls: %d descriptors, more than %d", n, MaxDescriptors)
	}
	for _, d := range req.GetDescriptors() {
		if n := len(d.GetEntries()); n > MaxEntries {
			return status.Errorf(codes.InvalidArgument, "envoyrls: a descriptor of %d entries, more than %d", n, MaxEntries)
		}
	}
	return nil
}

// decisions matches every descriptor with its rule and answers those that
// need no grain.
func (s *Server) decisions(st *serving, req *rlsv3.RateLimitRequest) ([]decision, error) {
	domain := req.GetDomain()
	root := st.config.domains[domain]
	ds := make([]decision, len(req.GetDescriptors()))
	var replaced map[string]bool
	for i, d := range req.GetDescriptors() {
		hits := uint64(req.GetHitsAddend())
		if hits == 0 {
			hits = 1
		}
		if h := d.GetHitsAddend(); h != nil {
			hits = h.GetValue()
		}
		ds[i].hits = hits
		if root == nil {
			continue // an unknown domain limits nothing, overrides included, as in the reference
		}
		if o := d.GetLimit(); o != nil {
			r, ok := overrideRule(o.GetRequestsPerUnit(), rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit()), o.GetUnitMultiplier().GetValue())
			if !ok {
				return nil, status.Errorf(codes.InvalidArgument, "envoyrls: a limit override with unit %v", o.GetUnit())
			}
			// The override's size is part of the key: a grain keeps one
			// size, and routes asking for different ones must not take
			// turns resetting it.
			ds[i].rule = r
			ds[i].key = grainKey(domain, d.GetEntries(), nil) + " override " + strconv.FormatUint(uint64(o.GetRequestsPerUnit()), 10) + "/" + r.window.String()
		} else {
			ds[i].rule, ds[i].key = root.match(domain, d.GetEntries())
		}
		if r := ds[i].rule; r != nil && len(r.replaces) > 0 {
			if replaced == nil {
				replaced = make(map[string]bool)
			}
			for _, name := range r.replaces {
				replaced[name] = true
			}
		}
	}
	for i := range ds {
		d := &ds[i]
		if d.rule != nil && d.rule.name != "" && replaced[d.rule.name] {
			d.rule = nil // replaced: the limit is neither asked nor counted
		}
		r := d.rule
		switch {
		case r == nil:
			d.status = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		case r.unlimited:
			d.status = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
		case req.GetDescriptors()[i].GetIsNegativeHits():
			// A grain gives back only the permits of a grant it still
			// knows, so hits that add to the budget take nothing and add
			// nothing.
			d.status = okStatus(r, 0)
		case d.hits > uint64(r.limit.RequestsPerUnit):
			// More than the limit could ever grant (and every hit of a 0
			// limit): no grain needs asking.
			d.over = true
			d.status = overStatus(r, r.window)
		default:
			if r.options == nil {
				d.rule = nil
				d.status = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
				continue
			}
			if h, ok := st.holders[r]; ok {
				d.limiter = h.forKey(d.key)
			} else { // a limit override
				d.limiter = ratelimit.FixedWindow(s.caller, d.key, r.options.(ratelimit.FixedWindowOptions))
			}
		}
	}
	return ds, nil
}

// decide asks the grains of every descriptor that needs one, all at once:
// the enforced ones as one decision (AcquireMany, attempts that never
// queue), the shadow ones each on its own, so that a shadow limit over its
// count takes nothing back from the others.
func (s *Server) decide(ctx context.Context, st *serving, ds []decision) error {
	// Up to inlineDescriptors enforced descriptors need no allocation for
	// the decision's own bookkeeping: Envoy sends a handful.
	var inlineEnforced [inlineDescriptors]int
	var inlineAcquisitions [inlineDescriptors]ratelimit.Acquisition
	enforced, acquisitions := inlineEnforced[:0], inlineAcquisitions[:0]
	var shadows sync.WaitGroup
	var shadowErrs []error
	for i := range ds {
		d := &ds[i]
		if d.limiter == nil {
			continue
		}
		if d.rule.shadow {
			if shadowErrs == nil {
				shadowErrs = make([]error, len(ds))
			}
			shadows.Go(func() {
				l, err := d.limiter.TryAcquire(ctx, int64(d.hits))
				shadowErrs[i] = d.answer(l, err)
			})
			continue
		}
		enforced = append(enforced, i)
		acquisitions = append(acquisitions, ratelimit.Acquisition{Limiter: d.limiter, Permits: int64(d.hits)})
	}
	var errs []error
	if len(acquisitions) > 0 {
		outcomes, _ := ratelimit.AcquireMany(ctx, ratelimit.ManyOptions{Try: true}, acquisitions...)
		for j, o := range outcomes {
			if err := ds[enforced[j]].answer(o.Lease, o.Err); err != nil {
				errs = append(errs, err)
			}
		}
	}
	shadows.Wait()
	if err := errors.Join(append(errs, shadowErrs...)...); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return status.FromContextError(cerr).Err()
		}
		return status.Errorf(codes.Unavailable, "envoyrls: %v", err)
	}
	return nil
}

// inlineDescriptors is how many enforced descriptors a decision keeps
// without allocating.
const inlineDescriptors = 4

// answer sets the descriptor's status from its grain's answer. A lease
// given back because another limit refused is within its own limit: its
// status is OK, and the response's overall code tells the refusal.
func (d *decision) answer(l *ratelimit.Lease, err error) error {
	switch {
	case errors.Is(err, ratelimit.ErrCountExceedsLimit):
		d.over = true
		d.status = overStatus(d.rule, d.rule.window)
	case err != nil:
		return err
	case l.Acquired():
		remaining, known := l.Remaining()
		d.unknown = !known
		d.status = okStatus(d.rule, uint32(min(max(remaining, 0), math.MaxUint32)))
		if reset := l.ResetAfter(); reset > 0 && reset < d.rule.window {
			d.status.DurationUntilReset = durationpb.New(reset)
		}
	default:
		d.over = true
		reset := l.RetryAfter()
		if reset <= 0 {
			reset = d.rule.window
		}
		d.status = overStatus(d.rule, reset)
	}
	return nil
}

// okStatus is a status within the rule's limit. Its limit and reset are
// the rule's own messages, shared by every response: gRPC only reads them.
func okStatus(r *rule, remaining uint32) *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{
		Code: rlsv3.RateLimitResponse_OK, CurrentLimit: r.limit, LimitRemaining: remaining,
		DurationUntilReset: r.windowReset(),
	}
}

func overStatus(r *rule, reset time.Duration) *rlsv3.RateLimitResponse_DescriptorStatus {
	code := rlsv3.RateLimitResponse_OVER_LIMIT
	if r.shadow {
		code = rlsv3.RateLimitResponse_OK
	}
	until := r.windowReset()
	if reset != r.window {
		until = durationpb.New(reset)
	}
	return &rlsv3.RateLimitResponse_DescriptorStatus{Code: code, CurrentLimit: r.limit, DurationUntilReset: until}
}

// windowReset is the rule's window as a duration message, made once.
func (r *rule) windowReset() *durationpb.Duration {
	if r.reset == nil {
		return durationpb.New(r.window)
	}
	return r.reset
}

// remaining fills limit_remaining of the descriptors within their limit
// whose grains' answers did not carry it (silos that predate it) with
// their free permits, asked of all at once: a second round, which the
// answers of current silos make needless. A grain that does not answer
// leaves 0.
func (s *Server) remaining(ctx context.Context, ds []decision) {
	var wg sync.WaitGroup
	for i := range ds {
		d := &ds[i]
		if d.limiter == nil || d.over || !d.unknown {
			continue
		}
		wg.Go(func() {
			st, err := d.limiter.Statistics(ctx)
			if err == nil {
				d.status.LimitRemaining = uint32(min(max(st.AvailablePermits, 0), math.MaxUint32))
			}
		})
	}
	wg.Wait()
}

// response assembles the answer: the statuses in the request's order, the
// overall code, and the headers of the descriptor closest to its limit
// (the last one over it, else the one with the least remaining).
func (s *Server) response(ds []decision) *rlsv3.RateLimitResponse {
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(ds))}
	var closest *rlsv3.RateLimitResponse_DescriptorStatus
	least := uint32(math.MaxUint32)
	for i := range ds {
		st := ds[i].status
		resp.Statuses[i] = st
		if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
			closest, least = st, 0
		} else if st.CurrentLimit != nil && st.LimitRemaining < least {
			closest, least = st, st.LimitRemaining
		}
	}
	if s.opts.ResponseHeaders && closest != nil {
		resp.ResponseHeadersToAdd = []*corev3.HeaderValue{
			{Key: s.opts.LimitHeader, Value: strconv.FormatUint(uint64(closest.CurrentLimit.RequestsPerUnit), 10)},
			{Key: s.opts.RemainingHeader, Value: strconv.FormatUint(uint64(closest.LimitRemaining), 10)},
			{Key: s.opts.ResetHeader, Value: strconv.FormatInt(ceilSeconds(closest.DurationUntilReset.AsDuration()), 10)},
		}
	}
	if s.opts.ShadowMode {
		resp.OverallCode = rlsv3.RateLimitResponse_OK
	}
	return resp
}

func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}
