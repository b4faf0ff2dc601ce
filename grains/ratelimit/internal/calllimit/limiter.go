package calllimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/httplimit"
	"github.com/granary-go/granary/grains/ratelimit/internal/retryafter"
	"github.com/granary-go/granary/proxy"
)

// DefaultKeyPrefix starts the limiter keys of a Limiter that sets no
// KeyPrefix: "grpc" for grpc-go and connect-go alike, so that one
// service's handlers of either framework share their limiters.
const DefaultKeyPrefix = "grpc"

// Options configure a Limiter.
type Options struct {
	// Rules are the limits every call passes: one decision, sent at once.
	// A call goes on only when every rule that applies to it grants a
	// permit; otherwise what the others granted is given back and the
	// first refusing rule, in order, answers. At least one rule.
	Rules []Rule
	// KeyPrefix is the first part of every limiter key (httplimit.Key of
	// KeyPrefix, the rule's kind, its name and the value), so that
	// services sharing a cluster keep their limiters apart. Default
	// DefaultKeyPrefix.
	KeyPrefix string
	// FailOpen lets a call pass a rule whose limiter cannot be reached;
	// the failure is logged. Default false: the call fails Unavailable.
	FailOpen bool
}

// Option changes how a Limiter is built: injected behaviour.
type Option func(*Limiter)

// WithLogger sets the logger of failed acquisitions and releases.
// Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(m *Limiter) { m.log = l } }

// Limiter applies rules to incoming calls, whatever framework serves
// them: grpclimit's and connectlimit's interceptors are built on it. It
// is safe for concurrent use and holds no goroutines.
type Limiter struct {
	name        string // the package it serves, which starts its messages
	rules       []rule
	failOpen    bool
	concurrency bool // a rule's configuration is a concurrency limiter
	log         *slog.Logger
}

// rule is a Rule resolved against the configurations.
type rule struct {
	Rule
	prefix  string // httplimit.Key(KeyPrefix, kind, name)
	limiter func(key string) ratelimit.Limiter
}

// New returns a limiter for the package called name, which starts its
// messages, that acquires through caller (a client connected to a
// gateway, or a silo's own caller) from the limiters of its rules, each
// with the options of the configuration it names in configs. It does no
// I/O, and fails naming every problem, each wrapping invalid: no rules, a
// rule without a key, two rules of one name, a configuration configs does
// not have.
func New(name string, invalid error, caller proxy.Caller, configs *ratelimit.Configs, opts Options, optFns ...Option) (*Limiter, error) {
	m := &Limiter{name: name, failOpen: opts.FailOpen, log: slog.Default()}
	for _, f := range optFns {
		f(m)
	}
	prefix := opts.KeyPrefix
	if prefix == "" {
		prefix = DefaultKeyPrefix
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{invalid}, args...)...))
	}
	if caller == nil {
		bad("no caller")
	}
	if len(opts.Rules) == 0 {
		bad("no rules")
	}
	names := make(map[string]int, len(opts.Rules))
	for i, r := range opts.Rules {
		if r.kind == "" || r.key == nil {
			bad("Rules[%d] was not built by a rule constructor", i)
			continue
		}
		if j, dup := names[r.Name()]; dup {
			bad("Rules[%d] and Rules[%d] are both named %q; name one with WithName", j, i, r.Name())
			continue
		}
		names[r.Name()] = i
		if caller == nil {
			continue // nothing to resolve the rule with
		}
		probe, err := configs.Limiter(caller, r.config, "")
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: rule %q: %w", invalid, r.Name(), err))
			continue
		}
		resolved := rule{Rule: r, prefix: httplimit.Key(prefix, r.kind, r.Name())}
		switch h := probe.(type) {
		case *ratelimit.Holder[ratelimit.ConcurrencyOptions]:
			resolved.limiter, m.concurrency = forKey(h), true
		case *ratelimit.Holder[ratelimit.FixedWindowOptions]:
			resolved.limiter = forKey(h)
		case *ratelimit.Holder[ratelimit.SlidingWindowOptions]:
			resolved.limiter = forKey(h)
		case *ratelimit.Holder[ratelimit.TokenBucketOptions]:
			resolved.limiter = forKey(h)
		}
		m.rules = append(m.rules, resolved)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// forKey returns a constructor of holders like template for any key: the
// template's options were validated and encoded once, for all keys.
func forKey[O ratelimit.Options](template *ratelimit.Holder[O]) func(string) ratelimit.Limiter {
	return func(key string) ratelimit.Limiter { return template.ForKey(key) }
}

// inlineRules is how many applicable rules a call keeps without
// allocating.
const inlineRules = 4

// Refusal is why a call may not go on: a rule's rejection, or no
// limiter that could be reached (Err set).
type Refusal struct {
	// Err is the failure when no limiter answered (ctx's error when it
	// ended); nil for a rule's rejection.
	Err    error
	name   string // the Limiter's
	rule   string
	reason string
	retry  time.Duration // the limiter's hint; 0: none
}

// HasConcurrency reports whether a rule's configuration is a concurrency
// limiter, whose permits a call holds until it ends.
func (m *Limiter) HasConcurrency() bool { return m.concurrency }

// Admit takes the call's permits from every rule that applies, as one
// decision. It returns the leases to release when the call ends (nil
// when none needs it) or why the call is refused.
func (m *Limiter) Admit(ctx context.Context, c *Call) ([]*ratelimit.Lease, *Refusal) {
	var inlineAcquisitions [inlineRules]ratelimit.Acquisition
	var inlineApplied [inlineRules]*rule
	acquisitions, applied := inlineAcquisitions[:0], inlineApplied[:0]
	for i := range m.rules {
		r := &m.rules[i]
		if !r.appliesTo(c.Method) {
			continue
		}
		value, ok := r.key(ctx, c)
		if !ok {
			continue
		}
		acquisitions = append(acquisitions, ratelimit.Acquisition{Limiter: r.limiter(httplimit.Key(r.prefix, value)), Permits: 1})
		applied = append(applied, r)
	}
	if len(acquisitions) == 0 {
		return nil, nil
	}
	outcomes, ok := ratelimit.AcquireMany(ctx, ratelimit.ManyOptions{SkipErrors: m.failOpen}, acquisitions...)
	for i, o := range outcomes {
		if o.Err != nil && ctx.Err() == nil {
			m.log.LogAttrs(ctx, slog.LevelWarn, m.name+": acquisition failed", slog.String("rule", applied[i].Name()), slog.Any("error", o.Err))
		}
	}
	if !ok {
		return nil, m.refuse(ctx, applied, outcomes)
	}
	var held []*ratelimit.Lease
	for _, o := range outcomes {
		if o.Lease != nil && !o.Lease.ReleaseOptional() {
			held = append(held, o.Lease)
		}
	}
	return held, nil
}

// refuse says why a decision failed: the first rule in order that
// rejected, or the failure of a limiter that could not be reached.
func (m *Limiter) refuse(ctx context.Context, applied []*rule, outcomes []ratelimit.Outcome) *Refusal {
	if err := ctx.Err(); err != nil {
		return &Refusal{Err: err}
	}
	for i, o := range outcomes {
		switch {
		case o.Err != nil && !m.failOpen:
			return &Refusal{Err: o.Err}
		case o.Lease != nil && !o.Lease.Acquired():
			return &Refusal{name: m.name, rule: applied[i].Name(), reason: o.Lease.Reason(), retry: o.Lease.RetryAfter()}
		}
	}
	return &Refusal{Err: errors.New(m.name + ": the decision failed")}
}

// Release gives leases back, even when the call's context has ended: that
// is often why they come back.
func (m *Limiter) Release(ctx context.Context, leases []*ratelimit.Lease) {
	ctx = context.WithoutCancel(ctx)
	for _, l := range leases {
		if err := l.Release(ctx); err != nil {
			m.log.LogAttrs(ctx, slog.LevelWarn, m.name+": release failed", slog.String("lease", l.String()), slog.Any("error", err))
		}
	}
}

// MetadataRetryAfter is the trailer (or, for connect's own protocol, the
// header) of a rejection that says after how many whole seconds a retry
// may succeed, as HTTP's Retry-After does.
const MetadataRetryAfter = "retry-after"

// Message is the status message of a rejection.
func (r *Refusal) Message() string {
	var b strings.Builder
	b.WriteString(r.name)
	b.WriteString(": rule ")
	b.WriteString(strconv.Quote(r.rule))
	b.WriteString(": ")
	b.WriteString(r.reason)
	return b.String()
}

// RetryDelay is the delay a rejection tells the client: the limiter's
// hint in whole seconds, rounded up, 1 s without one (a concurrency
// limit), as the HTTP middleware's Retry-After.
func (r *Refusal) RetryDelay() time.Duration {
	return time.Duration(retryafter.Seconds(r.retry)) * time.Second
}

// RetrySeconds is RetryDelay in whole seconds, as MetadataRetryAfter
// carries it.
func (r *Refusal) RetrySeconds() string { return strconv.FormatInt(retryafter.Seconds(r.retry), 10) }
