package ratelimitapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"connectrpc.com/connect"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/internal/retryafter"
	"github.com/granary-go/granary/grains/ratelimit/limiter"
	apiv1 "github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1/ratelimitv1connect"
	"github.com/granary-go/granary/proxy"
)

// Errors of the service's own checks, answered as connect codes.
var (
	// ErrInvalidOptions is wrapped by every problem Options.Validate
	// reports.
	ErrInvalidOptions = errors.New("ratelimitapi: invalid options")
	// errInvalid answers a request that makes no sense (InvalidArgument).
	errInvalid = errors.New("ratelimitapi: invalid request")
	// errChangesDisabled answers a change with Options.DisableChanges
	// (PermissionDenied).
	errChangesDisabled = errors.New("ratelimitapi: changes need the admin right, which this server does not grant")
	// errNoRight answers a change whose caller lacks the admin right
	// (PermissionDenied).
	errNoRight = errors.New("ratelimitapi: permission denied")
)

// The reasons a change is refused, as WithRefusals is told them.
const (
	RefusedChangesDisabled = "changes_disabled" // Options.DisableChanges
	RefusedNoAdminRight    = "no_admin_right"   // WithChangeRights: the caller lacks actor.RightAdmin
)

// compressMinBytes is the smallest reply the service compresses, when
// its client accepts compression.
const compressMinBytes = 1024

// Defaults of Options.
const (
	// DefaultMaxKeyBytes bounds a limiter key.
	DefaultMaxKeyBytes = 512
	// DefaultMaxRequestBytes bounds a request message.
	DefaultMaxRequestBytes = 64 << 10
)

// Options configure the service.
type Options struct {
	// MaxKeyBytes is the longest limiter key a request may name, in bytes:
	// a longer one is answered InvalidArgument (HTTP 400) before any grain
	// is called. A caller through a gateway has the gateway's bound too
	// (silo.Limits.MaxKeyLength), whose refusal is InvalidArgument as
	// well. Default DefaultMaxKeyBytes.
	MaxKeyBytes int
	// MaxRequestBytes is the largest request message the service reads,
	// before decompression is counted. Default DefaultMaxRequestBytes.
	MaxRequestBytes int
	// DisableChanges refuses, with PermissionDenied, every call that
	// changes a limiter's options or quota from outside: Configure, Reset,
	// DeleteState, TryReplenish, and Acquire with explicit options.
	// Acquisitions under the limiters' current options or under the
	// server's named configurations still work. Default false: every call
	// is served, so put the service behind whatever authenticates its
	// callers (see WithHandlerOptions for interceptors).
	DisableChanges bool
}

// EnsureDefaults fills the fields left zero with their defaults.
func (o *Options) EnsureDefaults() {
	if o.MaxKeyBytes == 0 {
		o.MaxKeyBytes = DefaultMaxKeyBytes
	}
	if o.MaxRequestBytes == 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
}

// Validate reports every invalid field.
func (o Options) Validate() error {
	var errs []error
	if o.MaxKeyBytes < 0 {
		errs = append(errs, fmt.Errorf("%w: MaxKeyBytes %d is negative", ErrInvalidOptions, o.MaxKeyBytes))
	}
	if o.MaxRequestBytes < 0 {
		errs = append(errs, fmt.Errorf("%w: MaxRequestBytes %d is negative", ErrInvalidOptions, o.MaxRequestBytes))
	}
	return errors.Join(errs...)
}

// Option changes how the handler is built: injected behaviour.
type Option func(*deps)

type deps struct {
	handlerOptions []connect.HandlerOption
	rights         func(ctx context.Context) actor.Rights
	refused        func(reason string)
}

// WithChangeRights makes every change (the calls Options.DisableChanges
// lists) need actor.RightAdmin of rights(ctx): the rights of the
// request's caller, which a middleware in front of the handler
// established (from a bearer token, a client certificate) and put in the
// request's context. A change refused for lack of it answers
// PermissionDenied, naming the right. Without it, every caller may change
// what DisableChanges leaves open.
func WithChangeRights(rights func(ctx context.Context) actor.Rights) Option {
	return func(d *deps) { d.rights = rights }
}

// WithRefusals has refused told of each change the service refuses, with
// its reason (RefusedChangesDisabled, RefusedNoAdminRight), to count it.
func WithRefusals(refused func(reason string)) Option {
	return func(d *deps) { d.refused = refused }
}

// WithHandlerOptions adds connect handler options, such as interceptors
// that authenticate callers or record metrics.
func WithHandlerOptions(opts ...connect.HandlerOption) Option {
	return func(d *deps) { d.handlerOptions = append(d.handlerOptions, opts...) }
}

// NewHandler returns the service for callers in any language: every
// method of ratelimitv1.RateLimitService over gRPC, gRPC-Web and the
// Connect protocol (HTTP/JSON and HTTP/protobuf), and the path to mount
// it at. Calls reach the limiter grains through caller (a silo's own
// caller, or a client of a gateway); configs are the named configurations
// requests may name (nil: none). Each call's context, with the deadline
// its client sent, is the grain call's: a client that goes away cancels a
// queued acquisition, and a deadline bounds its budget. gRPC needs
// HTTP/2: serve the handler with TLS, or enable unencrypted HTTP/2
// (http.Server.Protocols). NewHandler does no I/O.
func NewHandler(caller proxy.Caller, configs *ratelimit.Configs, opts Options, optFns ...Option) (string, http.Handler, error) {
	var d deps
	for _, f := range optFns {
		f(&d)
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return "", nil, err
	}
	if caller == nil {
		return "", nil, fmt.Errorf("%w: no caller", ErrInvalidOptions)
	}
	svc := &service{caller: caller, configs: configs, opts: opts, rights: d.rights, refused: d.refused}
	handlerOpts := append([]connect.HandlerOption{
		connect.WithReadMaxBytes(opts.MaxRequestBytes),
		// Compressing replies of a few dozen bytes costs more than it
		// saves: gzip's set-up was a third of the server's time.
		connect.WithCompressMinBytes(compressMinBytes),
	}, d.handlerOptions...)
	path, h := ratelimitv1connect.NewRateLimitServiceHandler(svc, handlerOpts...)
	return path, h, nil
}

// service implements the RateLimitService on the holders of package
// ratelimit.
type service struct {
	caller  proxy.Caller
	configs *ratelimit.Configs
	opts    Options
	rights  func(ctx context.Context) actor.Rights // nil: changes need no right
	refused func(reason string)                    // nil: refusals are not counted
}

var _ ratelimitv1connect.RateLimitServiceHandler = (*service)(nil)

// limiterOf checks a request's algorithm and key and returns the
// algorithm.
func (s *service) limiterOf(a apiv1.Algorithm, key string) (algorithm, error) {
	switch {
	case key == "":
		return nil, fmt.Errorf("%w: no key", errInvalid)
	case len(key) > s.opts.MaxKeyBytes:
		return nil, fmt.Errorf("%w: a key of %d bytes, more than %d", errInvalid, len(key), s.opts.MaxKeyBytes)
	}
	alg, ok := algorithms[a]
	if !ok {
		return nil, fmt.Errorf("%w: algorithm %v", errInvalid, a)
	}
	return alg, nil
}

// withOptions resolves a request's algorithm, key, configuration name and
// explicit options: the algorithm (said, or implied by the options or the
// configuration) and the options to apply, nil for none.
func (s *service) withOptions(ctx context.Context, a apiv1.Algorithm, key, config string, o *apiv1.Options) (algorithm, *apiv1.Options, error) {
	switch {
	case config != "" && o != nil:
		return nil, nil, fmt.Errorf("%w: config and options both given", errInvalid)
	case o != nil:
		implied, ok := algorithmOf(o)
		if !ok {
			return nil, nil, fmt.Errorf("%w: options name no algorithm", errInvalid)
		}
		if a != apiv1.Algorithm_ALGORITHM_UNSPECIFIED && a != implied {
			return nil, nil, fmt.Errorf("%w: %v options for a %v limiter", errInvalid, implied, a)
		}
		if err := s.change(ctx, "Acquire with explicit options"); err != nil {
			return nil, nil, err
		}
		if err := checkOptions(o); err != nil {
			return nil, nil, err
		}
		alg, err := s.limiterOf(implied, key)
		return alg, o, err
	case config != "":
		var found []apiv1.Algorithm
		var options *apiv1.Options
		for name, alg := range algorithms {
			if a != apiv1.Algorithm_ALGORITHM_UNSPECIFIED && a != name {
				continue
			}
			if named, ok := alg.named(s.configs, config); ok {
				found, options = append(found, name), named
			}
		}
		switch len(found) {
		case 0:
			return nil, nil, fmt.Errorf("%w: %q", ratelimit.ErrConfigNotFound, config)
		case 1:
			alg, err := s.limiterOf(found[0], key)
			return alg, options, err
		}
		return nil, nil, fmt.Errorf("%w: %q; say which algorithm", ratelimit.ErrAmbiguousConfig, config)
	}
	alg, err := s.limiterOf(a, key)
	return alg, nil, err
}

// change refuses a change when changes are disabled, or when its caller
// lacks the admin right they need.
func (s *service) change(ctx context.Context, what string) error {
	if s.opts.DisableChanges {
		s.refuse(RefusedChangesDisabled)
		return fmt.Errorf("%w: %s", errChangesDisabled, what)
	}
	if s.rights == nil {
		return nil
	}
	if have := s.rights(ctx); !have.Has(actor.RightAdmin) {
		s.refuse(RefusedNoAdminRight)
		return fmt.Errorf("%w: %s requires the %v right, which the request's credential does not grant (it grants %v): send a token that has it as Authorization: Bearer, or a client certificate that has it",
			errNoRight, what, actor.RightAdmin, have)
	}
	return nil
}

func (s *service) refuse(reason string) {
	if s.refused != nil {
		s.refused(reason)
	}
}

// Acquire takes permits; a rejection is a response whose acquired is
// false, with a Retry-After header.
func (s *service) Acquire(ctx context.Context, req *connect.Request[apiv1.AcquireRequest]) (*connect.Response[apiv1.AcquireResponse], error) {
	m := req.Msg
	alg, o, err := s.withOptions(ctx, m.GetAlgorithm(), m.GetKey(), m.GetConfig(), m.GetOptions())
	if err != nil {
		return nil, codeOf(err)
	}
	lease, err := alg.acquire(ctx, s.caller, m.GetKey(), permitsOf(m), o)
	if err != nil {
		return nil, codeOf(err)
	}
	lease.Detach() // the remote caller renews it (Renew)
	resp := connect.NewResponse(leaseResponse(lease))
	if !lease.Acquired() {
		resp.Header().Set("Retry-After", strconv.FormatInt(retryafter.Seconds(lease.RetryAfter()), 10))
	}
	return resp, nil
}

// Release gives a concurrency lease's permits back.
func (s *service) Release(ctx context.Context, req *connect.Request[apiv1.ReleaseRequest]) (*connect.Response[apiv1.ReleaseResponse], error) {
	alg, err := s.limiterOf(req.Msg.GetAlgorithm(), req.Msg.GetKey())
	if err != nil {
		return nil, codeOf(err)
	}
	released, err := alg.release(ctx, s.caller, req.Msg.GetKey(), req.Msg.GetLeaseId())
	if err != nil {
		return nil, codeOf(err)
	}
	return connect.NewResponse(&apiv1.ReleaseResponse{Released: released}), nil
}

// Statistics returns a limiter's counters.
func (s *service) Statistics(ctx context.Context, req *connect.Request[apiv1.StatisticsRequest]) (*connect.Response[apiv1.StatisticsResponse], error) {
	alg, err := s.limiterOf(req.Msg.GetAlgorithm(), req.Msg.GetKey())
	if err != nil {
		return nil, codeOf(err)
	}
	st, err := alg.limiter(s.caller, req.Msg.GetKey()).Statistics(ctx)
	if err != nil {
		return nil, codeOf(err)
	}
	return connect.NewResponse(&apiv1.StatisticsResponse{
		AvailablePermits:      st.AvailablePermits,
		QueuedPermits:         st.QueuedPermits,
		TotalFailedLeases:     st.TotalFailedLeases,
		TotalSuccessfulLeases: st.TotalSuccessfulLeases,
		ActiveLeases:          st.ActiveLeases,
		WaitingCalls:          st.WaitingCalls,
	}), nil
}

// Configure replaces a limiter's options.
func (s *service) Configure(ctx context.Context, req *connect.Request[apiv1.ConfigureRequest]) (*connect.Response[apiv1.ConfigureResponse], error) {
	m := req.Msg
	if err := s.change(ctx, "Configure"); err != nil {
		return nil, codeOf(err)
	}
	alg, o, err := s.withOptions(ctx, m.GetAlgorithm(), m.GetKey(), m.GetConfig(), m.GetOptions())
	if err != nil {
		return nil, codeOf(err)
	}
	if o == nil {
		return nil, codeOf(fmt.Errorf("%w: Configure needs config or options", errInvalid))
	}
	if err := alg.configure(ctx, s.caller, m.GetKey(), o); err != nil {
		return nil, codeOf(err)
	}
	return connect.NewResponse(&apiv1.ConfigureResponse{}), nil
}

// GetConfiguration returns a limiter's current options.
func (s *service) GetConfiguration(ctx context.Context, req *connect.Request[apiv1.GetConfigurationRequest]) (*connect.Response[apiv1.GetConfigurationResponse], error) {
	alg, err := s.limiterOf(req.Msg.GetAlgorithm(), req.Msg.GetKey())
	if err != nil {
		return nil, codeOf(err)
	}
	o, err := alg.configuration(ctx, s.caller, req.Msg.GetKey())
	if err != nil {
		return nil, codeOf(err)
	}
	return connect.NewResponse(&apiv1.GetConfigurationResponse{Options: o}), nil
}

// Reset gives a limiter its full quota back.
func (s *service) Reset(ctx context.Context, req *connect.Request[apiv1.ResetRequest]) (*connect.Response[apiv1.ResetResponse], error) {
	if err := s.limiterCall(ctx, "Reset", req.Msg.GetAlgorithm(), req.Msg.GetKey(), ratelimit.Limiter.Reset); err != nil {
		return nil, err
	}
	return connect.NewResponse(&apiv1.ResetResponse{}), nil
}

// DeleteState clears a limiter's stored state.
func (s *service) DeleteState(ctx context.Context, req *connect.Request[apiv1.DeleteStateRequest]) (*connect.Response[apiv1.DeleteStateResponse], error) {
	if err := s.limiterCall(ctx, "DeleteState", req.Msg.GetAlgorithm(), req.Msg.GetKey(), ratelimit.Limiter.DeleteState); err != nil {
		return nil, err
	}
	return connect.NewResponse(&apiv1.DeleteStateResponse{}), nil
}

// TryReplenish runs one manual replenishment.
func (s *service) TryReplenish(ctx context.Context, req *connect.Request[apiv1.TryReplenishRequest]) (*connect.Response[apiv1.TryReplenishResponse], error) {
	var replenished bool
	err := s.limiterCall(ctx, "TryReplenish", req.Msg.GetAlgorithm(), req.Msg.GetKey(), func(l ratelimit.Limiter, ctx context.Context) error {
		var err error
		replenished, err = l.TryReplenish(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&apiv1.TryReplenishResponse{Replenished: replenished}), nil
}

// limiterCall runs a change on the limiter a request names.
func (s *service) limiterCall(ctx context.Context, what string, a apiv1.Algorithm, key string, call func(ratelimit.Limiter, context.Context) error) error {
	if err := s.change(ctx, what); err != nil {
		return codeOf(err)
	}
	alg, err := s.limiterOf(a, key)
	if err != nil {
		return codeOf(err)
	}
	if err := call(alg.limiter(s.caller, key), ctx); err != nil {
		return codeOf(err)
	}
	return nil
}

// codeOf gives err the connect code a caller can act on.
func codeOf(err error) error {
	code := connect.CodeUnknown
	switch {
	case errors.Is(err, errInvalid), errors.Is(err, limiter.ErrInvalidOptions),
		errors.Is(err, ratelimit.ErrNegativeCount), errors.Is(err, ratelimit.ErrCountExceedsLimit),
		errors.Is(err, ratelimit.ErrAmbiguousConfig),
		// The silo's own refusal of what the service let through, such
		// as a gateway that takes shorter grain keys than MaxKeyBytes.
		errors.Is(err, proxy.ErrBadRequest):
		code = connect.CodeInvalidArgument
	case errors.Is(err, ratelimit.ErrConfigNotFound):
		code = connect.CodeNotFound
	case errors.Is(err, errChangesDisabled), errors.Is(err, errNoRight):
		code = connect.CodePermissionDenied
	case errors.Is(err, context.Canceled):
		code = connect.CodeCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, proxy.ErrTimeout), errors.Is(err, proxy.ErrBudgetExpired):
		code = connect.CodeDeadlineExceeded
	case errors.Is(err, proxy.ErrUnavailable):
		code = connect.CodeUnavailable
	}
	return connect.NewError(code, err)
}
