package gateway

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/delivery"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/internal/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newGateway() *Gateway {
	return New(Options{
		Transport: transport.Options{
			Identity: transport.Identity{Role: transport.RoleSilo, SiloID: "s", Generation: 1},
			Listener: transport.ListenerOptions{AcceptRoles: []transport.Role{transport.RoleClient}},
		},
		TokenRights:       map[string]actor.Rights{"ops": actor.RightAdmin},
		CertificateRights: map[string]actor.Rights{"svc": actor.RightAdmin},
		Clock:             clock.Real{}, ShareClock: clock.Real{},
		Log: slog.Default(),
	})
}

// A client is who its credential says, with the credential's rights; a
// credential the silo does not list grants none.
func TestIdentify(t *testing.T) {
	g := newGateway()
	for _, tc := range []struct {
		name string
		peer transport.Identity
		want actor.Identity
	}{
		{"anonymous", transport.Identity{}, actor.Identity{Kind: actor.CallerClient}},
		{"token", transport.Identity{Token: "ops"},
			actor.Identity{Kind: actor.CallerClient, Name: "ops", Credential: actor.CredentialToken, Rights: actor.RightAdmin}},
		{"unlisted token", transport.Identity{Token: "other"},
			actor.Identity{Kind: actor.CallerClient, Name: "other", Credential: actor.CredentialToken}},
		{"certificate", transport.Identity{Certificate: &x509.Certificate{Subject: pkix.Name{CommonName: "svc"}}},
			actor.Identity{Kind: actor.CallerClient, Name: "svc", Credential: actor.CredentialCertificate, Rights: actor.RightAdmin}},
		{"certificate without a name", transport.Identity{Certificate: &x509.Certificate{}},
			actor.Identity{Kind: actor.CallerClient, Credential: actor.CredentialCertificate}},
		{"token before certificate", transport.Identity{Token: "other", Certificate: &x509.Certificate{Subject: pkix.Name{CommonName: "svc"}}},
			actor.Identity{Kind: actor.CallerClient, Name: "other", Credential: actor.CredentialToken}},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, g.identify(tc.peer)) })
	}
}

// Rights required of a method add up; methods not listed need none.
func TestRequire(t *testing.T) {
	g := newGateway()
	assert.Zero(t, g.required.lookup("t", 1))
	g.Require("t", 1, actor.RightAdmin)
	g.Require("t", 2, actor.RightAdmin)
	assert.Equal(t, actor.RightAdmin, g.required.lookup("t", 1))
	assert.Zero(t, g.required.lookup("t", 3))
	assert.Zero(t, g.required.lookup("u", 1))
}

// client is a client connection's handler that reports its end.
type client struct{ closed chan struct{} }

func (client) HandleFrame(*transport.Conn, []byte)  {}
func (c client) HandleClose(*transport.Conn, error) { close(c.closed) }

type nowhere struct{}

func (nowhere) Deliver(*delivery.Request) {}

// A gateway that stops accepting refuses new clients; Close closes the
// listener, answers its error once, and is safe to call again.
func TestStopAcceptingAndClose(t *testing.T) {
	g := newGateway()
	assert.Nil(t, g.Addr())
	require.NoError(t, g.Close(context.Background()), "nothing to close before Serve")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, g.Serve(ln, nowhere{}, wire.NewInterner()))
	require.NotNil(t, g.Addr())

	g.StopAccepting()
	closed := make(chan struct{})
	conn, err := transport.Dial(context.Background(), g.Addr().String(), transport.Options{}, client{closed})
	require.NoError(t, err, "the handshake passes")
	<-closed // the gateway closed it: it takes no new client
	_ = conn.Close()
	require.Eventually(t, func() bool { return g.Stats().Listener.RefusedByAccept == 1 }, 5*time.Second, time.Millisecond,
		"counted as refused")
	assert.Zero(t, g.Stats().Clients)

	require.NoError(t, g.Close(context.Background()))
	require.NoError(t, g.Close(context.Background()), "a second Close")
}
