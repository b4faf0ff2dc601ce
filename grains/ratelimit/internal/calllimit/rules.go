package calllimit

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
)

// Call is what rules read of an incoming call, whichever framework
// serves it (grpc-go or connect-go).
type Call struct {
	// Method is the call's full method, "/package.Service/Method"
	// (connect's procedure). Empty where the framework does not say, as
	// in go-grpc-middleware's client interceptors.
	Method string
	// Peer is the remote address as the transport gives it, usually
	// host:port; empty when unknown.
	Peer string

	md     map[string][]string // grpc-go's incoming metadata (metadata.MD), keys lower-case
	header http.Header         // connect-go's request headers
	tls    *tls.ConnectionState
}

// GRPCCall is a grpc-go call: its metadata.MD as md (nil for none) and
// the connection's TLS state, when it has one.
func GRPCCall(method, peer string, md map[string][]string, state *tls.ConnectionState) Call {
	if md == nil {
		md = map[string][]string{} // Metadata reads metadata, not connect's headers
	}
	return Call{Method: method, Peer: peer, md: md, tls: state}
}

// ConnectCall is a connect-go call with its request headers.
func ConnectCall(method, peer string, header http.Header) Call {
	return Call{Method: method, Peer: peer, header: header}
}

// Metadata returns the first value of the incoming metadata (or request
// header) key, case-insensitively, and whether it was sent.
func (c *Call) Metadata(key string) (string, bool) {
	if c.md != nil {
		if v := c.md[strings.ToLower(key)]; len(v) > 0 {
			return v[0], true
		}
		return "", false
	}
	if c.header != nil {
		if v := c.header.Values(key); len(v) > 0 {
			return v[0], true
		}
	}
	return "", false
}

// TLS returns the connection's TLS state when the call came over TLS and
// the framework tells it (grpc-go with TLS credentials); else nil.
func (c *Call) TLS() *tls.ConnectionState { return c.tls }

// peerHost is the peer's address without its port.
func (c *Call) peerHost() (string, bool) {
	if c.Peer == "" {
		return "", false
	}
	if host, _, err := net.SplitHostPort(c.Peer); err == nil {
		return host, true
	}
	return c.Peer, true
}

// Extractor reads one value from a call: an authenticated identity that an
// interceptor before this one put in ctx, a metadata value, any key. It
// returns false when the call has none, and its rule then does not apply
// to the call. Extractors run on every call, concurrently: they must be
// cheap and safe for concurrent use.
type Extractor func(ctx context.Context, c *Call) (string, bool)

// Rule says which calls share a limiter: one limiter per value of its key
// (per method, per peer, per identity...), each with the options of the
// named configuration. Build rules with ByMethod, ByPeer, ByMetadata,
// ByIdentity or ByKey. The zero Rule is not valid.
type Rule struct {
	name    string
	config  string
	kind    string
	key     Extractor
	methods []string // full methods, or "/package.Service/" prefixes; none: every method
}

// Rule kinds, the second part of every limiter key a rule makes.
const (
	kindMethod   = "method"
	kindPeer     = "peer"
	kindMetadata = "metadata"
	kindIdentity = "identity"
	kindCustom   = "key"
)

// ByMethod limits each full method with the configuration called config:
// all callers of a method share its limiter.
func ByMethod(config string) Rule {
	return Rule{config: config, kind: kindMethod, key: func(_ context.Context, c *Call) (string, bool) {
		return c.Method, c.Method != ""
	}}
}

// ByPeer limits each peer address (its host, without the port) with the
// configuration called config. Behind a proxy the peer is the proxy: key
// by a metadata value the proxy sets instead (ByMetadata).
func ByPeer(config string) Rule {
	return Rule{config: config, kind: kindPeer, key: func(_ context.Context, c *Call) (string, bool) {
		return c.peerHost()
	}}
}

// ByMetadata limits each value of the incoming metadata key (a header for
// connect-go) with the configuration called config; calls without it
// pass the rule. The rule is named config:key (lower-cased) unless
// renamed, so that rules of one configuration on two keys differ.
func ByMetadata(config, key string) Rule {
	key = strings.ToLower(key)
	return Rule{name: config + ":" + key, config: config, kind: kindMetadata, key: func(_ context.Context, c *Call) (string, bool) {
		return c.Metadata(key)
	}}
}

// ByIdentity limits each authenticated identity that identity extracts
// (from what an authentication interceptor put in the context, or the
// client certificate: TLSIdentity) with the configuration called config;
// calls without one pass the rule.
func ByIdentity(config string, identity Extractor) Rule {
	return Rule{config: config, kind: kindIdentity, key: identity}
}

// ByKey limits each value that key extracts with the configuration called
// config; calls for which key returns false pass the rule. name names the
// rule.
func ByKey(name, config string, key Extractor) Rule {
	return Rule{name: name, config: config, kind: kindCustom, key: key}
}

// TLSIdentity extracts the verified client certificate's identity: its
// first URI SAN (a SPIFFE ID), else its subject's common name. Calls
// without a verified client certificate have none.
func TLSIdentity(_ context.Context, c *Call) (string, bool) {
	st := c.TLS()
	if st == nil || len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return "", false
	}
	cert := st.VerifiedChains[0][0]
	if len(cert.URIs) > 0 {
		return cert.URIs[0].String(), true
	}
	return cert.Subject.CommonName, cert.Subject.CommonName != ""
}

// ForMethods returns the rule applied only to the given full methods
// ("/package.Service/Method") and services (a prefix ending in '/':
// "/package.Service/").
func (r Rule) ForMethods(methods ...string) Rule {
	r.methods = append([]string(nil), methods...)
	return r
}

// WithName returns the rule renamed. A rule's name is part of its limiter
// keys and of its rejections' messages; it defaults to its
// configuration's name. Two rules of one limiter need different names.
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

// appliesTo reports whether the rule covers method.
func (r *Rule) appliesTo(method string) bool {
	if len(r.methods) == 0 {
		return true
	}
	for _, m := range r.methods {
		if m == method || (strings.HasSuffix(m, "/") && strings.HasPrefix(method, m)) {
			return true
		}
	}
	return false
}
