package silo

import (
	"cmp"
	"crypto/tls"
	"errors"
	"unicode/utf8"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/gateway"
	"github.com/granary-go/granary/internal/optcheck"
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
	s.gateway.Require(m.Service, m.ID, r)
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

// newGateway makes the silo's listener for clients (internal/gateway).
func (s *Silo) newGateway() *gateway.Gateway {
	endpoint := s.opts.clientEndpoint(s.rejected)
	endpoint.ReaderRoute = s.readerRoute
	return gateway.New(gateway.Options{
		Transport:         s.opts.gatewayTransport(s.gen),
		Endpoint:          endpoint,
		Shares:            s.opts.shares(),
		TokenRights:       s.opts.Security.tokenRights(),
		CertificateRights: s.opts.Security.certificateRights(),
		Clock:             s.deps.clock,
		ShareClock:        cmp.Or[clock.Clock](s.deps.shareClock, s.deps.clock),
		Log:               s.log,
	})
}

// tokenRights are the rights of the client tokens, by name (Validate
// checks that names are unique).
func (s *Security) tokenRights() map[string]actor.Rights {
	m := make(map[string]actor.Rights, len(s.ClientTokens))
	for _, t := range s.ClientTokens {
		m[t.Name] = t.Rights
	}
	return m
}

// certificateRights are the rights of the client certificates, by name
// (Validate checks that names are unique and not empty).
func (s *Security) certificateRights() map[string]actor.Rights {
	m := make(map[string]actor.Rights, len(s.ClientCertificates))
	for _, cc := range s.ClientCertificates {
		m[cc.Name] = cc.Rights
	}
	return m
}
