package silo

import (
	"crypto/tls"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/optcheck"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/proxy"
)

// validateSiloCredential checks that the listener for other silos asks
// something of a silo that a client does not hold: the cluster secret, or
// a certificate under LinkTLS. A link bypasses every limit and reaches the
// system services, so a cluster without either would let anyone who
// reaches the port act as a silo.
func (s *Security) validateSiloCredential(c *optcheck.Checks) {
	if len(s.Secret) > 0 {
		return
	}
	switch {
	case s.LinkTLS != nil && requiresCertificate(s.LinkTLS):
		return
	case s.LinkTLS == nil && s.TLS != nil && requiresCertificate(s.TLS):
		c.Bad("Security.Secret", "is needed: the gateway and the listener for other silos share Security.TLS, so a client's certificate would pass for a silo's; set Secret, or LinkTLS with a CA of the silos' own")
	default:
		c.Bad("Security.Secret", "is needed in a cluster (or LinkTLS that requires and verifies certificates): without it anyone who reaches the listener for other silos could act as a silo")
	}
}

// requiresCertificate reports whether a server configuration refuses a
// dialler without a verified certificate.
func requiresCertificate(c *tls.Config) bool {
	return c.ClientAuth == tls.RequireAndVerifyClientCert
}

// validateClientTokens checks the clients' credentials.
func (s *Security) validateClientTokens(c *optcheck.Checks) {
	seen := make(map[string]bool, len(s.ClientTokens))
	for _, t := range s.ClientTokens {
		if t.Name == "" || len(t.Name) > transport.MaxIDLength || !utf8.ValidString(t.Name) {
			c.Bad("Security.ClientTokens", "name %q is not UTF-8 of 1 to %d bytes", t.Name, transport.MaxIDLength)
		}
		if seen[t.Name] {
			c.Bad("Security.ClientTokens", "name %q appears twice", t.Name)
		}
		seen[t.Name] = true
		if n := len(t.Secret); n < transport.MinSecretLength || n > transport.MaxSecretLength {
			c.Bad("Security.ClientTokens", "%q: secret of %d bytes, want %d to %d", t.Name, n, transport.MinSecretLength, transport.MaxSecretLength)
		}
	}
}

// requiredRights are the rights that methods need of a client calling
// through the gateway: written rarely (RequireRights), read on every
// client request, so readers load an immutable map.
type requiredRights struct {
	mu sync.Mutex // serialises writers
	m  atomic.Pointer[map[methodKey]actor.Rights]
}

type methodKey struct {
	grainType string
	method    uint32
}

// lookup returns the rights a method needs; none for a method not listed.
func (r *requiredRights) lookup(grainType string, method uint32) actor.Rights {
	if m := r.m.Load(); m != nil {
		return (*m)[methodKey{grainType, method}]
	}
	return 0
}

// RequireRights makes method m need the rights r of a client that calls it
// through this silo's gateway: a client whose token lacks one of them gets
// proxy.ErrPermissionDenied, naming the right, before the request reaches
// any grain; the refusal is counted (Stats().Rejected.PermissionDenied and
// the metric granary_transport_rejections_total{reason="permission_denied"}).
// Calls from other silos (which checked at their own gateway) and from the
// silo's own caller are not asked. Calling it again for m adds rights.
// ratelimit.Register uses it for the limiters' changes.
func (s *Silo) RequireRights(m *proxy.MethodDesc, r actor.Rights) error {
	if m == nil || m.Service == "" {
		return errors.New("silo: RequireRights needs a method")
	}
	s.required.mu.Lock()
	defer s.required.mu.Unlock()
	next := make(map[methodKey]actor.Rights)
	if old := s.required.m.Load(); old != nil {
		maps.Copy(next, *old)
	}
	next[methodKey{m.Service, m.ID}] |= r
	s.required.m.Store(&next)
	return nil
}

// validateClientCertificates checks the rights granted to certificates:
// they need a gateway that verifies the certificates clients show.
func (s *Security) validateClientCertificates(c *optcheck.Checks) {
	if len(s.ClientCertificates) == 0 {
		return
	}
	if s.TLS == nil || s.TLS.ClientAuth < tls.VerifyClientCertIfGiven {
		c.Bad("Security.ClientCertificates", "needs Security.TLS with ClientAuth VerifyClientCertIfGiven or RequireAndVerifyClientCert, or no certificate would be verified")
	}
	seen := make(map[string]bool, len(s.ClientCertificates))
	for _, cc := range s.ClientCertificates {
		if cc.Name == "" || seen[cc.Name] {
			c.Bad("Security.ClientCertificates", "name %q is empty or appears twice", cc.Name)
		}
		seen[cc.Name] = true
	}
}

// clientIdentity is who the client at the other end of c proved to be:
// the token it proved, else the certificate TLS verified, else nobody in
// particular; with the rights its credential grants.
func (s *Security) clientIdentity(peer transport.Identity) actor.Identity {
	id := actor.Identity{Kind: actor.CallerClient}
	switch {
	case peer.Token != "":
		id.Name, id.Credential = peer.Token, actor.CredentialToken
		for _, t := range s.ClientTokens {
			if t.Name == peer.Token {
				id.Rights = t.Rights
			}
		}
	case peer.Certificate != nil:
		id.Name, id.Credential = transport.CertificateName(peer.Certificate), actor.CredentialCertificate
		for _, cc := range s.ClientCertificates {
			if cc.Name == id.Name && id.Name != "" {
				id.Rights = cc.Rights
			}
		}
	}
	return id
}

// clientEndpointFor is how the silo's end of the client connection c is
// set up: its limits, and who the client is, with the rights of the
// credential it proved.
func (s *Silo) clientEndpointFor(c *transport.Conn) rpc.EndpointOptions {
	opts := s.opts.clientEndpoint(s.rejected, s.shares)
	id := s.opts.Security.clientIdentity(c.Peer())
	opts.Rights, opts.Caller = id.Rights, host.NewCaller(id)
	opts.ReaderRoute = s.readerRoute
	if s.required.m.Load() != nil {
		opts.Required = s.required.lookup
	}
	return opts
}
