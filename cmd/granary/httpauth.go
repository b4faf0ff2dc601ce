package main

import (
	"context"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/silo"
)

// httpAuth tells the rights of an HTTP request's caller from the
// credentials the silo knows: a client token's secret sent as
// Authorization: Bearer, or a client certificate that TLS verified
// (-client-ca) whose name -client-certs-file lists. A request with
// neither, or with a token nobody holds, has no rights: it may acquire
// and release, never change a limiter.
type httpAuth struct {
	tokens       []silo.ClientToken
	certificates []silo.ClientCertificate
}

// rightsKey carries a request's rights in its context.
type rightsKey struct{}

// rightsFrom returns the rights httpAuth.wrap established for a request.
func rightsFrom(ctx context.Context) actor.Rights {
	r, _ := ctx.Value(rightsKey{}).(actor.Rights)
	return r
}

// wrap puts the rights of each request's caller in its context, for the
// API's checks (ratelimitapi.WithChangeRights).
func (a httpAuth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rights := a.rightsOf(r); rights != 0 {
			r = r.WithContext(context.WithValue(r.Context(), rightsKey{}, rights))
		}
		next.ServeHTTP(w, r)
	})
}

// rightsOf returns what the request's credentials grant, the token's
// and the certificate's together.
func (a httpAuth) rightsOf(r *http.Request) actor.Rights {
	var rights actor.Rights
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		if secret, err := hex.DecodeString(strings.TrimSpace(bearer)); err == nil {
			for _, t := range a.tokens {
				// Every token is compared, in constant time, so that the
				// time taken tells nothing of which one came close.
				if subtle.ConstantTimeCompare(secret, t.Secret) == 1 {
					rights |= t.Rights
				}
			}
		}
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		name := transport.CertificateName(r.TLS.VerifiedChains[0][0])
		for _, c := range a.certificates {
			if c.Name == name && name != "" {
				rights |= c.Rights
			}
		}
	}
	return rights
}

// hasAdmin reports whether any credential the silo knows has the admin
// right: without one, no HTTP request can change a limiter.
func (a httpAuth) hasAdmin() bool {
	for _, t := range a.tokens {
		if t.Rights.Has(actor.RightAdmin) {
			return true
		}
	}
	for _, c := range a.certificates {
		if c.Rights.Has(actor.RightAdmin) {
			return true
		}
	}
	return false
}

// httpRefusals counts the changes the HTTP and admin ports' API refused
// (granary_http_refusals_total, by port and reason).
type httpRefusals struct {
	counter metric.Int64Counter // nil: nothing to count them on
}

func newHTTPRefusals(m *prometheusMetrics) (httpRefusals, error) {
	if m == nil {
		return httpRefusals{}, nil
	}
	c, err := m.provider.Meter("granary").Int64Counter("granary.http.refusals",
		metric.WithDescription("Calls of the rate-limit API refused for a right their credential lacks, by port and reason."))
	return httpRefusals{counter: c}, err
}

// on returns the ratelimitapi options that guard a port's changes with
// the callers' rights and count what they refuse.
func (h httpRefusals) on(port string) []ratelimitapi.Option {
	opts := []ratelimitapi.Option{ratelimitapi.WithChangeRights(rightsFrom)}
	if h.counter != nil {
		opts = append(opts, ratelimitapi.WithRefusals(func(reason string) {
			h.counter.Add(context.Background(), 1, metric.WithAttributes(attribute.String("port", port), attribute.String("reason", reason)))
		}))
	}
	return opts
}
