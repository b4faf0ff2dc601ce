package httplimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/internal/retryafter"
	"github.com/granary-go/granary/proxy"
)

// Middleware limits the requests of the handlers it wraps by its rules.
// Build it once with New and wrap any number of handlers; it is safe for
// concurrent use and holds no goroutines, so it needs no stopping.
type Middleware struct {
	rules    []rule
	ips      clientIPs
	failOpen bool
	log      *slog.Logger
}

// rule is a Rule resolved against the configurations.
type rule struct {
	name   string
	key    Extractor // nil for an IP rule, whose key is the client's address
	prefix string    // Key(KeyPrefix, kind, name): a request's key is prefix:value
	// limiter returns the holder of one key, bound to the rule's options.
	limiter func(key string) ratelimit.Limiter
	policy  []string // the RateLimit-Policy field of the rule's rejections, shared by them
	quoted  string   // the rule's name as an sf-string, for the RateLimit field
}

// New returns middleware that acquires from the limiters of its rules
// through caller (a client connected to a gateway, or a silo's own
// caller), each with the options of the configuration it names in
// configs. It does no I/O. It fails, naming every problem, when the
// options are invalid or a rule names a configuration configs does not
// have (ratelimit.ErrConfigNotFound) or has for several algorithms
// (ratelimit.ErrAmbiguousConfig): a missing limit is a startup error, not
// a request that passes.
func New(caller proxy.Caller, configs *ratelimit.Configs, opts Options, optFns ...Option) (*Middleware, error) {
	d := deps{log: slog.Default()}
	for _, f := range optFns {
		f(&d)
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if caller == nil {
		return nil, fmt.Errorf("%w: no caller", ErrInvalidOptions)
	}
	m := &Middleware{
		rules:    make([]rule, 0, len(opts.Rules)),
		ips:      clientIPs{trusted: opts.trustedPrefixes(), header: http.CanonicalHeaderKey(opts.ForwardedHeader)},
		failOpen: opts.FailOpen,
		log:      d.log,
	}
	var errs []error
	for _, r := range opts.Rules {
		resolved, err := m.resolve(caller, configs, opts.KeyPrefix, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.rules = append(m.rules, resolved)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// resolve looks r's configuration up and prepares what each request
// needs of it.
func (m *Middleware) resolve(caller proxy.Caller, configs *ratelimit.Configs, keyPrefix string, r Rule) (rule, error) {
	probe, err := configs.Limiter(caller, r.config, "")
	if err != nil {
		return rule{}, fmt.Errorf("httplimit: rule %q: %w", r.Name(), err)
	}
	out := rule{
		name:   r.Name(),
		key:    r.key,
		prefix: Key(keyPrefix, r.kind, r.Name()),
		quoted: sfString(r.Name()),
	}
	var q, w int64
	switch h := probe.(type) {
	case *ratelimit.Holder[ratelimit.ConcurrencyOptions]:
		o, _ := h.Bound()
		out.limiter = forKey(h)
		q = o.PermitLimit
	case *ratelimit.Holder[ratelimit.FixedWindowOptions]:
		o, _ := h.Bound()
		out.limiter = forKey(h)
		q, w = o.PermitLimit, retryafter.Ceil(float64(o.Window))
	case *ratelimit.Holder[ratelimit.SlidingWindowOptions]:
		o, _ := h.Bound()
		out.limiter = forKey(h)
		q, w = o.PermitLimit, retryafter.Ceil(float64(o.Window))
	case *ratelimit.Holder[ratelimit.TokenBucketOptions]:
		o, _ := h.Bound()
		out.limiter = forKey(h)
		// A bucket has no window; the time it takes to fill from empty is
		// the span its quota is measured over.
		periods := (o.TokenLimit-1)/o.TokensPerPeriod + 1
		q, w = o.TokenLimit, retryafter.Ceil(float64(o.ReplenishmentPeriod)*float64(periods))
	default:
		return rule{}, fmt.Errorf("httplimit: rule %q: limiter of type %T", r.Name(), probe)
	}
	out.policy = []string{policyField(out.quoted, q, w)}
	return out, nil
}

// forKey returns a constructor of holders like template for any key: the
// template's options were validated and encoded once, for all keys.
func forKey[O ratelimit.Options](template *ratelimit.Holder[O]) func(string) ratelimit.Limiter {
	return func(key string) ratelimit.Limiter { return template.ForKey(key) }
}

// Handler returns next limited by the middleware's rules: a request that
// every applicable rule grants runs next, holding its concurrency permits
// until next returns (or panics); any other request is answered 429 Too
// Many Requests (or 503 when a limiter cannot be reached, see
// Options.FailOpen) and never reaches next.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

// inlineRules is how many applicable rules, and leases needing release,
// a request keeps without allocating.
const inlineRules = 4

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	ctx := r.Context()
	var inlineAcquisitions [inlineRules]ratelimit.Acquisition
	var inlineApplied [inlineRules]*rule
	acquisitions, applied := inlineAcquisitions[:0], inlineApplied[:0]
	for i := range m.rules {
		ru := &m.rules[i]
		var key string
		if ru.key == nil {
			key = m.ips.clientKey(ru.prefix, r)
		} else {
			value, ok := ru.key(r)
			if !ok {
				continue
			}
			key = keyWithPrefix(ru.prefix, value)
		}
		acquisitions = append(acquisitions, ratelimit.Acquisition{Limiter: ru.limiter(key), Permits: 1})
		applied = append(applied, ru)
	}
	if len(acquisitions) == 0 {
		next.ServeHTTP(w, r)
		return
	}
	// One decision, all rules at once: one round trip whatever their
	// number, and when one refuses, what the others granted is given back
	// (time-based quota refunded too). The request's context is the
	// acquisitions': a client that goes away cancels their waits in the
	// limiters' queues, and the request's deadline bounds their budgets.
	outcomes, ok := ratelimit.AcquireMany(ctx, ratelimit.ManyOptions{SkipErrors: m.failOpen}, acquisitions...)
	for i, o := range outcomes {
		if o.Err != nil && ctx.Err() == nil {
			m.log.LogAttrs(ctx, slog.LevelWarn, "httplimit: acquisition failed",
				slog.String("rule", applied[i].name), slog.Any("error", o.Err))
		}
	}
	if !ok {
		m.refuse(ctx, w, applied, outcomes)
		return
	}
	var inlineHeld [inlineRules]*ratelimit.Lease
	held := inlineHeld[:0]
	for _, o := range outcomes {
		if o.Lease != nil && !o.Lease.ReleaseOptional() {
			held = append(held, o.Lease)
		}
	}
	if len(held) > 0 {
		// Deferred, so that a handler that panics releases too; the
		// panic goes on once the permits are back.
		defer m.release(ctx, held)
	}
	next.ServeHTTP(w, r)
}

// refuse answers a request whose decision failed, by the first rule in
// order that did not grant: 429 for a rejection, 503 for a limiter that
// could not be reached (unless the middleware fails open). A request
// whose context ended gets a rejection when its deadline passed (the
// limit held it back, as when the grain ends the wait) and no answer
// when it was cancelled: the client is gone.
func (m *Middleware) refuse(ctx context.Context, w http.ResponseWriter, applied []*rule, outcomes []ratelimit.Outcome) {
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(cerr, context.DeadlineExceeded) {
			i := max(slices.IndexFunc(outcomes, func(o ratelimit.Outcome) bool { return o.Err != nil }), 0)
			applied[i].reject(w, ratelimit.ReasonLeaseNotAcquired, 0)
		}
		return
	}
	for i, o := range outcomes {
		switch {
		case o.Err != nil && !m.failOpen:
			writeUnavailable(w)
			return
		case o.Lease != nil && !o.Lease.Acquired():
			applied[i].reject(w, o.Lease.Reason(), o.Lease.RetryAfter())
			return
		}
	}
	writeUnavailable(w)
}

// release gives leases back, even when the request's context has ended:
// that is often why they come back.
func (m *Middleware) release(ctx context.Context, leases []*ratelimit.Lease) {
	if len(leases) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for _, l := range leases {
		if err := l.Release(ctx); err != nil {
			m.log.LogAttrs(ctx, slog.LevelWarn, "httplimit: release failed",
				slog.String("lease", l.String()), slog.Any("error", err))
		}
	}
}
