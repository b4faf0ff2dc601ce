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
	withCert := func(name string) *tls.Config {
		cfg := ca.ClientConfig()
		cfg.Certificates = []tls.Certificate{ca.Certificate(t, name)}
		return cfg
	}
	c := testcluster.New(t, testcluster.Options{
		Silos: 2, OnlyFirstGateway: true, Register: registerCounter,
		Configure: func(i int, o *silo.Options) {
			server := ca.ServerConfig(t)
			server.ClientAuth, server.ClientCAs = tls.RequireAndVerifyClientCert, ca.Pool()
			o.Security.TLS, o.Security.DialTLS = server, withCert(testcluster.Name(i))
		},
	})
	cl := c.NewClient(client.Options{TLS: withCert("client")})
	ref := counter.NewCounterRef(cl, "over-tls")
	ctx := context.Background()
	for i := int64(1); i <= 3; i++ {
		r, err := ref.Add(ctx, &counter.AddRequest{Delta: 1}, c.PlaceOn(1))
		require.NoError(t, err)
		assert.Equal(t, i, r.Value)
	}
	where, found, err := c.Locate(ctx, ref.GrainID())
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, testcluster.Name(1), where, "the grain lives on the silo that is no gateway")
	assert.NotZero(t, c.Silo(0).Stats().Links.Transport.FramesWritten, "silo 0 relayed the calls over the link")

	accepted := uint64(0)
	for _, i := range c.Live() {
		st := c.Silo(i).Stats().LinkListener
		accepted += st.Accepted
		assert.Zero(t, st.HandshakeTLS+st.HandshakeTLSMismatch, "silo %d refused no link", i)
	}
	assert.NotZero(t, accepted, "the link was accepted by a listener that takes only TLS")

	view, err := c.Silo(1).Members()
	require.NoError(t, err)
	self, ok := view.Member(testcluster.Name(1))
	require.True(t, ok)
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = transport.Dial(dialCtx, self.Address, transport.Options{
		Identity: transport.Identity{Role: transport.RoleSilo, SiloID: "plain", ClusterID: silo.DefaultClusterID},
	}, nopHandler{})
	assert.ErrorIs(t, err, transport.ErrTLSMismatch, "a silo dialling in plain is refused")
}

// Mutual TLS between silos does not ask clients for a certificate when
// the link listener has a configuration of its own (LinkTLS): a client
// with the CA alone calls, through silo 0's server-only TLS gateway, a
// grain on silo 1, over a link whose listener refuses a silo without a
// certificate.
func TestMutualTLSBetweenSilosWithServerOnlyTLSForClients(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	withCert := func(name string) *tls.Config {
		cfg := ca.ClientConfig()
		cfg.Certificates = []tls.Certificate{ca.Certificate(t, name)}
		return cfg
	}
	c := testcluster.New(t, testcluster.Options{
		Silos: 2, OnlyFirstGateway: true, Register: registerCounter,
		Configure: func(i int, o *silo.Options) {
			links := ca.ServerConfig(t)
			links.ClientAuth, links.ClientCAs = tls.RequireAndVerifyClientCert, ca.Pool()
			o.Security.TLS, o.Security.LinkTLS, o.Security.DialTLS = ca.ServerConfig(t), links, withCert(testcluster.Name(i))
		},
	})
	cl := c.NewClient(client.Options{TLS: ca.ClientConfig()})
	ref := counter.NewCounterRef(cl, "links-only")
	ctx := context.Background()
	r, err := ref.Add(ctx, &counter.AddRequest{Delta: 1}, c.PlaceOn(1))
	require.NoError(t, err)
	assert.EqualValues(t, 1, r.Value)
	where, found, err := c.Locate(ctx, ref.GrainID())
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, testcluster.Name(1), where)

	view, err := c.Silo(1).Members()
	require.NoError(t, err)
	self, ok := view.Member(testcluster.Name(1))
	require.True(t, ok)
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	before := c.Silo(1).Stats().LinkListener.HandshakeTLS
	_, err = transport.Dial(dialCtx, self.Address, transport.Options{
		Identity: transport.Identity{Role: transport.RoleSilo, SiloID: "no-cert", ClusterID: silo.DefaultClusterID},
		TLS:      ca.ClientConfig(),
	}, nopHandler{})
	require.Error(t, err, "a silo without a certificate is refused by the link listener")
	require.Eventually(t, func() bool { return c.Silo(1).Stats().LinkListener.HandshakeTLS > before }, 10*time.Second, time.Millisecond,
		"the link listener counts the refused handshake")
}

type nopHandler struct{}

func (nopHandler) HandleFrame(*transport.Conn, []byte) {}
func (nopHandler) HandleClose(*transport.Conn, error)  {}
