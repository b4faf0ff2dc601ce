package httplimit

import (
	"net/http"
)

// Extractor reads one value from a request: an identity (user, group,
// tenant, role) that an authentication layer put in the request's context
// or headers, or any other key. It returns false when the request has
// none, and the rule it serves then does not apply to the request (an
// anonymous request passes a user rule). Extractors run on every request,
// concurrently: they must be cheap and safe for concurrent use.
type Extractor func(r *http.Request) (string, bool)

// Rule says which requests share a limiter: one limiter per value of its
// key (one per client address, per user, per route...), each with the
// options of the named configuration. Build rules with ByIP, ByUser,
// ByGroup, ByTenant, ByRole, ByEndpoint or ByKey. The zero Rule is not
// valid.
type Rule struct {
	name   string
	config string
	kind   string
	key    Extractor // nil for ByIP: the middleware's client address
}

// Rule kinds, the second part of every limiter key a rule makes.
const (
	kindIP       = "ip"
	kindUser     = "user"
	kindGroup    = "group"
	kindTenant   = "tenant"
	kindRole     = "role"
	kindEndpoint = "endpoint"
	kindCustom   = "key"
)

// ByIP limits each client address with the configuration called config.
// The address is the connection's peer, or the forwarded client address
// when the peer is a trusted proxy (see Options.TrustedProxies).
func ByIP(config string) Rule { return Rule{config: config, kind: kindIP} }

// ByUser limits each user that user extracts with the configuration
// called config; requests without a user pass the rule.
func ByUser(config string, user Extractor) Rule {
	return Rule{config: config, kind: kindUser, key: user}
}

// ByGroup limits each group that group extracts with the configuration
// called config; requests without a group pass the rule.
func ByGroup(config string, group Extractor) Rule {
	return Rule{config: config, kind: kindGroup, key: group}
}

// ByTenant limits each tenant that tenant extracts with the configuration
// called config; requests without a tenant pass the rule.
func ByTenant(config string, tenant Extractor) Rule {
	return Rule{config: config, kind: kindTenant, key: tenant}
}

// ByRole limits each role that role extracts with the configuration called
// config (for a request with several roles, the extractor picks the one
// it is limited as); requests without a role pass the rule.
func ByRole(config string, role Extractor) Rule {
	return Rule{config: config, kind: kindRole, key: role}
}

// ByEndpoint limits each route with the configuration called config: all
// clients of a route share its limiter. The route is the pattern of the
// ServeMux entry that matched ("GET /items/{id}"), so "/items/1" and
// "/items/2" are one endpoint. It is r.Pattern, which ServeMux sets when
// the middleware wraps the handlers registered on it; for middleware
// wrapping the mux itself, pass the mux, which is asked for the pattern
// when r.Pattern is empty (nil: r.Pattern only). Requests that match no
// route pass the rule.
func ByEndpoint(config string, mux *http.ServeMux) Rule {
	return Rule{config: config, kind: kindEndpoint, key: func(r *http.Request) (string, bool) {
		if r.Pattern != "" {
			return r.Pattern, true
		}
		if mux == nil {
			return "", false
		}
		_, pattern := mux.Handler(r)
		return pattern, pattern != ""
	}}
}

// ByKey limits each value that key extracts with the configuration called
// config; requests for which key returns false pass the rule. name names
// the rule (see WithName); join several values into one with Key.
func ByKey(name, config string, key Extractor) Rule {
	return Rule{name: name, config: config, kind: kindCustom, key: key}
}

// WithName returns the rule renamed. A rule's name is part of its limiter
// keys and appears in the RateLimit headers of its rejections; it defaults
// to its configuration's name. Two rules of one middleware need different
// names, so name one of two rules that share a configuration.
func (r Rule) WithName(name string) Rule {
	r.name = name
	return r
}

// Name returns the rule's name: the one given, or its configuration's.
func (r Rule) Name() string {
	if r.name != "" {
		return r.name
	}
	return r.config
}

// Config returns the name of the rule's configuration.
func (r Rule) Config() string { return r.config }
