package silo

import (
	"crypto/tls"
	"unicode/utf8"

	"github.com/granary-go/granary/internal/optcheck"
	"github.com/granary-go/granary/internal/transport"
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
