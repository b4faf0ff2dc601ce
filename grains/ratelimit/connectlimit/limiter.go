package connectlimit

import (
	"errors"
	"log/slog"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/internal/calllimit"
	"github.com/granary-go/granary/proxy"
)

// ErrInvalidOptions is wrapped by every problem New reports.
var ErrInvalidOptions = errors.New("connectlimit: invalid options")

// DefaultKeyPrefix starts the limiter keys of a Limiter that sets no
// KeyPrefix; grpclimit's is the same, so that one service's grpc-go and
// connect-go handlers share their limiters.
const DefaultKeyPrefix = calllimit.DefaultKeyPrefix

// MetadataRetryAfter is the metadata of a rejection (a trailer over gRPC,
// a header over connect's own protocol) that says after how many whole
// seconds a retry may succeed, as HTTP's Retry-After does.
const MetadataRetryAfter = calllimit.MetadataRetryAfter

// Options configure a Limiter: its Rules (at least one; a call goes on
// only when every rule that applies to it grants a permit), the
// KeyPrefix of its limiter keys (default DefaultKeyPrefix) and FailOpen
// (let a call pass a rule whose limiter cannot be reached).
type Options = calllimit.Options

// Option changes how a Limiter is built: injected behaviour.
type Option = calllimit.Option

// WithLogger sets the logger of failed acquisitions and releases.
// Default slog.Default().
func WithLogger(l *slog.Logger) Option { return calllimit.WithLogger(l) }

// Limiter applies rules to the incoming calls of connect-go handlers.
// Build it once with New and give its Interceptor to the handlers. It is
// safe for concurrent use and holds no goroutines.
type Limiter struct{ core *calllimit.Limiter }

// New returns a limiter that acquires through caller (a client connected
// to a gateway, or a silo's own caller) from the limiters of its rules,
// each with the options of the configuration it names in configs. It does
// no I/O, and fails naming every problem: no rules, a rule without a key,
// two rules of one name, a configuration configs does not have.
func New(caller proxy.Caller, configs *ratelimit.Configs, opts Options, optFns ...Option) (*Limiter, error) {
	core, err := calllimit.New("connectlimit", ErrInvalidOptions, caller, configs, opts, optFns...)
	if err != nil {
		return nil, err
	}
	return &Limiter{core: core}, nil
}

// Call is what rules read of an incoming call: its procedure (the full
// method), its peer and its request headers (Metadata).
type Call = calllimit.Call

// Extractor reads one value from a call: an authenticated identity that an
// interceptor before this one put in ctx, a metadata value, any key. It
// returns false when the call has none, and its rule then does not apply
// to the call. Extractors run on every call, concurrently: they must be
// cheap and safe for concurrent use.
type Extractor = calllimit.Extractor

// Rule says which calls share a limiter: one limiter per value of its key
// (per method, per peer, per identity...), each with the options of the
// named configuration. Build rules with ByMethod, ByPeer, ByMetadata,
// ByIdentity or ByKey. The zero Rule is not valid.
type Rule = calllimit.Rule

// ByMethod limits each full method with the configuration called config:
// all callers of a method share its limiter.
func ByMethod(config string) Rule { return calllimit.ByMethod(config) }

// ByPeer limits each peer address (its host, without the port) with the
// configuration called config. Behind a proxy the peer is the proxy: key
// by a metadata value the proxy sets instead (ByMetadata).
func ByPeer(config string) Rule { return calllimit.ByPeer(config) }

// ByMetadata limits each value of the request header key with the
// configuration called config; calls without it pass the rule. The rule
// is named config:key (lower-cased) unless renamed, so that rules of one
// configuration on two keys differ.
func ByMetadata(config, key string) Rule { return calllimit.ByMetadata(config, key) }

// ByIdentity limits each authenticated identity that identity extracts
// (from what an authentication interceptor put in the context) with the
// configuration called config; calls without one pass the rule.
func ByIdentity(config string, identity Extractor) Rule {
	return calllimit.ByIdentity(config, identity)
}

// ByKey limits each value that key extracts with the configuration called
// config; calls for which key returns false pass the rule. name names the
// rule.
func ByKey(name, config string, key Extractor) Rule { return calllimit.ByKey(name, config, key) }
