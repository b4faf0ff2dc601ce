package testcluster_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/examples/counter"
	"github.com/granary-go/granary/internal/testcerts"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/testcluster"
)

// Two silos whose listeners require mutual TLS link over it: a client with a
// certificate calls, through silo 0's gateway, a grain placed on silo 1, and
// the link listeners took only TLS connections (a plain silo is refused).
func TestSilosLinkOverMutualTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	c := testcluster.New(t, testcluster.Options{
		Silos: 2, OnlyFirstGateway: true, Register: registerCounter,
		Configure: func(i int, o *silo.Options) {
			o.Security.TLS, o.Security.DialTLS = requiringCerts(t, ca), withCert(t, ca, testcluster.Name(i))
		},
	})
	cl := c.NewClient(client.Options{TLS: withCert(t, ca, "client")})
	ref := counter.NewCounterRef(cl, "over-tls")
	ctx := context.Background()
	for i := int64(1); i <= 3; i++ {
		r, err := ref.Add(ctx, &counter.AddRequest{Delta: 1}, c.PlaceOn(1))
		require.NoError(t, err)
		assert.Equal(t, i, r.Value)
	}
	assertLivesOn(t, c, ref.GrainID(), 1, "the grain lives on the silo that is no gateway")
	assert.NotZero(t, c.Silo(0).Stats().Links.Transport.FramesWritten, "silo 0 relayed the calls over the link")

	accepted := uint64(0)
	for _, i := range c.Live() {
		st := c.Silo(i).Stats().LinkListener
		accepted += st.Accepted
		assert.Zero(t, st.HandshakeTLS+st.HandshakeTLSMismatch, "silo %d refused no link", i)
	}
	assert.NotZero(t, accepted, "the link was accepted by a listener that takes only TLS")

	assert.ErrorIs(t, dialLinkListener(t, c, 1, "plain", nil), transport.ErrTLSMismatch, "a silo dialling in plain is refused")
}

// Mutual TLS between silos does not ask clients for a certificate when
// the link listener has a configuration of its own (LinkTLS): a client
// with the CA alone calls, through silo 0's server-only TLS gateway, a
// grain on silo 1, over a link whose listener refuses a silo without a
// certificate.
func TestMutualTLSBetweenSilosWithServerOnlyTLSForClients(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	c := testcluster.New(t, testcluster.Options{
		Silos: 2, OnlyFirstGateway: true, Register: registerCounter,
		Configure: func(i int, o *silo.Options) {
			o.Security.TLS, o.Security.LinkTLS, o.Security.DialTLS = ca.ServerConfig(t), requiringCerts(t, ca), withCert(t, ca, testcluster.Name(i))
		},
	})
	cl := c.NewClient(client.Options{TLS: ca.ClientConfig()})
	ref := counter.NewCounterRef(cl, "links-only")
	ctx := context.Background()
	r, err := ref.Add(ctx, &counter.AddRequest{Delta: 1}, c.PlaceOn(1))
	require.NoError(t, err)
	assert.EqualValues(t, 1, r.Value)
	assertLivesOn(t, c, ref.GrainID(), 1)

	before := c.Silo(1).Stats().LinkListener.HandshakeTLS
	require.Error(t, dialLinkListener(t, c, 1, "no-cert", ca.ClientConfig()), "a silo without a certificate is refused by the link listener")
	require.Eventually(t, func() bool { return c.Silo(1).Stats().LinkListener.HandshakeTLS > before }, 10*time.Second, time.Millisecond,
		"the link listener counts the refused handshake")
}

// withCert is the CA's client configuration with a certificate for name.
func withCert(t *testing.T, ca *testcerts.CA, name string) *tls.Config {
	cfg := ca.ClientConfig()
	cfg.Certificates = []tls.Certificate{ca.Certificate(t, name)}
	return cfg
}

// requiringCerts is a server configuration that requires a certificate
// from the CA.
func requiringCerts(t *testing.T, ca *testcerts.CA) *tls.Config {
	server := ca.ServerConfig(t)
	server.ClientAuth, server.ClientCAs = tls.RequireAndVerifyClientCert, ca.Pool()
	return server
}

// dialLinkListener dials silo i's listener for other silos as a silo
// named name would, with tlsConfig.
func dialLinkListener(t *testing.T, c *testcluster.Cluster, i int, name string, tlsConfig *tls.Config) error {
	t.Helper()
	view, err := c.Silo(i).Members()
	require.NoError(t, err)
	self, ok := view.Member(testcluster.Name(i))
	require.True(t, ok)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := transport.Dial(ctx, self.Address, transport.Options{
		Identity: transport.Identity{Role: transport.RoleSilo, SiloID: name, ClusterID: silo.DefaultClusterID},
		TLS:      tlsConfig,
	}, nopHandler{})
	if err == nil {
		_ = conn.Close()
	}
	return err
}

type nopHandler struct{}

func (nopHandler) HandleFrame(*transport.Conn, []byte) {}
func (nopHandler) HandleClose(*transport.Conn, error)  {}
