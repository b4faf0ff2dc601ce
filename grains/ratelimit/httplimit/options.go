package httplimit

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
)

// ErrInvalidOptions is wrapped by every problem Options.Validate reports.
var ErrInvalidOptions = errors.New("httplimit: invalid options")

// Defaults of Options.
const (
	// DefaultForwardedHeader is the header trusted proxies name the client
	// chain in.
	DefaultForwardedHeader = "X-Forwarded-For"
	// DefaultKeyPrefix starts the limiter keys of middleware that sets no
	// KeyPrefix.
	DefaultKeyPrefix = "http"
)

// Options configure a Middleware.
type Options struct {
	// Rules are the limits every request passes: one decision, sent at
	// once. A request is let through only when every rule that applies
	// to it grants a permit; otherwise what the others granted is given
	// back and the first refusing rule, in order, answers 429. At least
	// one rule is required.
	Rules []Rule

	// TrustedProxies lists the proxies (CIDR prefixes such as
	// "10.0.0.0/8", or single addresses) whose ForwardedHeader is
	// believed. Only when the connection's peer is one of them is the
	// header read, from the right, skipping trusted hops, up to the first
	// address that is not trusted: that is the client. Empty (the
	// default) trusts no proxy, and the peer address is the client
	// whatever the request's headers say.
	TrustedProxies []string

	// ForwardedHeader is the header trusted proxies append the client
	// address to. Default DefaultForwardedHeader.
	ForwardedHeader string

	// KeyPrefix is the first part of every limiter key the middleware
	// builds (Key(KeyPrefix, kind, rule name, value)), so that services
	// sharing a cluster keep their limiters apart. Default
	// DefaultKeyPrefix.
	KeyPrefix string

	// FailOpen lets a request pass a rule whose limiter cannot be reached
	// (a silo unavailable, a failed call); the failure is logged. Default
	// false: such a request is answered 503 Service Unavailable.
	FailOpen bool
}

// EnsureDefaults fills the fields left zero with their defaults.
func (o *Options) EnsureDefaults() {
	if o.ForwardedHeader == "" {
		o.ForwardedHeader = DefaultForwardedHeader
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
}

// Validate reports every problem of the options at once. It does not look
// the rules' configurations up: New does, against its Configs.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...))
	}
	if len(o.Rules) == 0 {
		bad("no rules")
	}
	names := make(map[string]int, len(o.Rules))
	for i, r := range o.Rules {
		switch {
		case r.kind == "":
			bad("Rules[%d] was not built by a rule constructor", i)
			continue
		case strings.TrimSpace(r.config) == "":
			bad("Rules[%d] (%s) names no configuration", i, r.kind)
		case r.key == nil && r.kind != kindIP:
			bad("Rules[%d] (%s %q) has no extractor", i, r.kind, r.Name())
		}
		name := r.Name()
		if !printableASCII(name) {
			bad("Rules[%d]: name %q is not printable ASCII", i, name)
		}
		if j, dup := names[name]; dup {
			bad("Rules[%d] and Rules[%d] are both named %q; name one with WithName", j, i, name)
		} else {
			names[name] = i
		}
	}
	for i, p := range o.TrustedProxies {
		if _, err := parseTrusted(p); err != nil {
			bad("TrustedProxies[%d] %q: %v", i, p, err)
		}
	}
	if o.ForwardedHeader != "" && !validHeaderName(o.ForwardedHeader) {
		bad("ForwardedHeader %q is not a header name", o.ForwardedHeader)
	}
	return errors.Join(errs...)
}

func (o Options) trustedPrefixes() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(o.TrustedProxies))
	for _, p := range o.TrustedProxies {
		if prefix, err := parseTrusted(p); err == nil {
			out = append(out, prefix)
		}
	}
	return out
}

// printableASCII reports whether s is non-empty and can be an sf-string
// of a structured header field unchanged but for escapes.
func printableASCII(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// validHeaderName reports whether s is an HTTP token.
func validHeaderName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return s != "" && http.CanonicalHeaderKey(s) != ""
}

// Option changes how a Middleware is built: injected behaviour.
type Option func(*deps)

type deps struct {
	log *slog.Logger
}

// WithLogger sets the logger that reports failed acquisitions and
// releases. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(d *deps) { d.log = l } }
