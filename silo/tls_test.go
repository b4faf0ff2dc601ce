package silo_test

import (
	"context"
	"crypto/tls"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/internal/testcerts"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

// connectTLS makes a client of e's gateway with cfg (nil: plain) and
// returns it with the result of its first connection. The dial is bounded
// by the client's DialTimeout, so a handshake that hung would fail with a
// timeout rather than the error the test expects.
func connectTLS(t *testing.T, e *env, cfg *tls.Config) (*client.Client, error) {
	t.Helper()
	c, err := client.New(client.Options{Gateways: []string{e.silo.GatewayAddr().String()}, TLS: cfg}, client.WithLogger(quiet))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, c.Connect(context.Background())
}

// A gateway with a certificate serves clients that trust its CA over TLS,
// and refuses a plain client at once with a TLS mismatch, which it counts.
func TestTheGatewayServesTLSAndRefusesPlainClients(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	e := startSilo(t, envConfig{opts: silo.Options{Security: silo.Security{TLS: ca.ServerConfig(t)}}})

	c, err := connectTLS(t, e, ca.ClientConfig())
	require.NoError(t, err)
	r, err := testgrain.NewCounterRef(c, "k").Add(context.Background(), &testgrain.AddRequest{Delta: 2})
	require.NoError(t, err)
	assert.EqualValues(t, 2, r.Value)

	_, err = connectTLS(t, e, nil)
	require.ErrorIs(t, err, proxy.ErrUnavailable)
	assert.ErrorIs(t, err, transport.ErrTLSMismatch, "refused by the gateway, not timed out")
	assert.Contains(t, err.Error(), "this listener requires TLS")

	_, err = connectTLS(t, e, testcerts.NewCA(t, "impostor").ClientConfig())
	assert.ErrorIs(t, err, transport.ErrTLSHandshake, "a client that does not trust the gateway's CA gives up")

	eventually(t, func() bool {
		st := e.silo.Stats().GatewayListener
		return st.HandshakeTLSMismatch == 1 && st.HandshakeTLS == 1
	}, "the gateway counted both refusals")
	assert.EqualValues(t, 1, e.silo.Stats().GatewayListener.Accepted)
}

// With mutual TLS the gateway serves only clients whose certificate its
// client CA signed.
func TestTheGatewayWithMutualTLSRequiresAClientCertificate(t *testing.T) {
	siloCA, clientCA := testcerts.NewCA(t, "silos"), testcerts.NewCA(t, "clients")
	server := siloCA.ServerConfig(t)
	server.ClientAuth, server.ClientCAs = tls.RequireAndVerifyClientCert, clientCA.Pool()
	e := startSilo(t, envConfig{opts: silo.Options{Security: silo.Security{TLS: server}}})
	withCert := func(ca *testcerts.CA) *tls.Config {
		cfg := siloCA.ClientConfig()
		cfg.Certificates = []tls.Certificate{ca.Certificate(t, "client")}
		return cfg
	}

	_, err := connectTLS(t, e, siloCA.ClientConfig())
	require.ErrorIs(t, err, transport.ErrTLSHandshake, "no certificate")
	_, err = connectTLS(t, e, withCert(siloCA))
	require.ErrorIs(t, err, transport.ErrTLSHandshake, "a certificate the client CA did not sign")

	c, err := connectTLS(t, e, withCert(clientCA))
	require.NoError(t, err)
	_, err = testgrain.NewCounterRef(c, "k").Add(context.Background(), &testgrain.AddRequest{Delta: 1})
	require.NoError(t, err)
	eventually(t, func() bool { return e.silo.Stats().GatewayListener.HandshakeTLS == 2 }, "both refusals counted")
	assert.EqualValues(t, 1, e.silo.Stats().GatewayListener.Accepted)
}

// A silo of a cluster needs both halves of TLS, since its links are
// dialled with one and accepted with the other, a server configuration
// needs a certificate, and only a silo of a cluster has a link listener:
// New says so before anything starts.
func TestValidateRefusesHalfATLSSetup(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	_, err := silo.New(silo.Options{Cluster: silo.ClusterOptions{Enabled: true}, Security: silo.Security{TLS: ca.ServerConfig(t)}})
	require.ErrorContains(t, err, "Security.DialTLS")
	_, err = silo.New(silo.Options{Cluster: silo.ClusterOptions{Enabled: true}, Security: silo.Security{DialTLS: ca.ClientConfig()}})
	require.ErrorContains(t, err, "Security.DialTLS")
	_, err = silo.New(silo.Options{Security: silo.Security{TLS: &tls.Config{}}})
	require.ErrorContains(t, err, "Security.TLS has no certificate")
	_, err = silo.New(silo.Options{Security: silo.Security{TLS: ca.ServerConfig(t)}})
	require.NoError(t, err, "a silo alone needs no DialTLS")

	cluster := silo.ClusterOptions{Enabled: true}
	_, err = silo.New(silo.Options{Cluster: cluster, Security: silo.Security{LinkTLS: ca.ServerConfig(t)}})
	require.ErrorContains(t, err, "Security.DialTLS", "a link listener with TLS needs DialTLS")
	_, err = silo.New(silo.Options{Cluster: cluster, Security: silo.Security{LinkTLS: &tls.Config{}, DialTLS: ca.ClientConfig()}})
	require.ErrorContains(t, err, "Security.LinkTLS has no certificate")
	_, err = silo.New(silo.Options{Security: silo.Security{LinkTLS: ca.ServerConfig(t)}})
	require.ErrorContains(t, err, "Security.LinkTLS", "a silo alone has no link listener")
	_, err = silo.New(silo.Options{Cluster: cluster, Security: silo.Security{LinkTLS: ca.ServerConfig(t), DialTLS: ca.ClientConfig()}})
	require.ErrorContains(t, err, "Security.Secret", "server-only TLS between silos asks no credential of a silo")
	linkTLS := ca.ServerConfig(t)
	linkTLS.ClientAuth, linkTLS.ClientCAs = tls.RequireAndVerifyClientCert, ca.Pool()
	_, err = silo.New(silo.Options{Cluster: cluster, Security: silo.Security{LinkTLS: linkTLS, DialTLS: ca.ClientConfig()}})
	require.NoError(t, err, "mutual TLS between silos alone, with a plain gateway")
	shared := ca.ServerConfig(t)
	shared.ClientAuth, shared.ClientCAs = tls.RequireAndVerifyClientCert, ca.Pool()
	_, err = silo.New(silo.Options{Cluster: cluster, Security: silo.Security{TLS: shared, DialTLS: ca.ClientConfig()}})
	require.ErrorContains(t, err, "share Security.TLS", "one CA for clients and silos: a client's certificate would pass for a silo's")
}
