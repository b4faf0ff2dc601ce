package transport

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/testcerts"
)

// tokens is a listener's table of client tokens.
func tokens(table map[string][]byte) func(string) ([]byte, bool) {
	return func(name string) ([]byte, bool) {
		s, ok := table[name]
		return s, ok
	}
}

func TestAClientProvesItsTokenAndTheListenerSeesItsName(t *testing.T) {
	seen := make(chan Identity, 1)
	l := listen(t, Options{Listener: ListenerOptions{
		ClientTokens: tokens(map[string][]byte{"reporting": secretA}), RequireClientCredential: true,
	}}, func(c *Conn) Handler { seen <- c.Peer(); return &echoHandler{} })
	r := newRecorder()
	c := dial(t, l, Options{Token: &Token{Name: "reporting", Secret: secretA}}, r)
	assert.Equal(t, Identity{Role: RoleClient, Token: "reporting"}, <-seen)
	assert.Empty(t, c.Peer().Token, "a dialler learns nothing of tokens from the listener")
	require.NoError(t, c.Send(body("hello")))
	assert.Equal(t, "hello", string(r.next(t)))
}

func TestClientTokenRefusals(t *testing.T) {
	table := tokens(map[string][]byte{"reporting": secretA})
	for name, tc := range map[string]struct {
		listener     ListenerOptions
		dialler      Options
		reason       error
		diallerFinds bool
		counted      func(ListenerStats) uint64
	}{
		"wrong token secret": {
			listener: ListenerOptions{ClientTokens: table},
			dialler:  Options{Token: &Token{Name: "reporting", Secret: secretB}},
			reason:   ErrCredentialRefused, diallerFinds: true, // the listener proves first
			counted: func(s ListenerStats) uint64 { return s.HandshakeCredential },
		},
		"unknown token": {
			listener: ListenerOptions{ClientTokens: table},
			dialler:  Options{Token: &Token{Name: "stolen?", Secret: secretA}},
			reason:   ErrCredentialRefused,
			counted:  func(s ListenerStats) uint64 { return s.HandshakeCredential },
		},
		"a listener that takes no tokens": {
			dialler: Options{Token: &Token{Name: "reporting", Secret: secretA}},
			reason:  ErrCredentialRefused,
			counted: func(s ListenerStats) uint64 { return s.HandshakeCredential },
		},
		"a client without a credential where one is required": {
			listener: ListenerOptions{ClientTokens: table, RequireClientCredential: true},
			reason:   ErrCredentialRefused,
			counted:  func(s ListenerStats) uint64 { return s.HandshakeCredential },
		},
	} {
		t.Run(name, func(t *testing.T) {
			l := listen(t, Options{Listener: tc.listener}, func(*Conn) Handler {
				t.Error("a refused dialler reached accept")
				return nil
			})
			c, err := Dial(t.Context(), l.Addr().String(), tc.dialler, newRecorder())
			require.Nil(t, c)
			var he *HandshakeError
			require.ErrorAs(t, err, &he)
			assert.ErrorIs(t, err, tc.reason)
			assert.Equal(t, !tc.diallerFinds, he.ByPeer, "who found the problem")
			assert.NotEmpty(t, he.Detail)
			require.Eventually(t, func() bool { return tc.counted(l.Stats()) == 1 }, waitFor, time.Millisecond)
			assert.Zero(t, l.Stats().Accepted)
		})
	}
}

// A hostile dialler that holds a client token and says it is a silo gets
// nothing, whatever roles the listener accepts: Options.Validate would not
// let a well-behaved one try, so the hello is written by hand.
func TestAClientTokenNeverOpensASiloConnection(t *testing.T) {
	l := listen(t, Options{Listener: ListenerOptions{ClientTokens: tokens(map[string][]byte{"reporting": secretA})}},
		func(*Conn) Handler { t.Error("a silo with a client token was accepted"); return nil })
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	h := handshake{rw: nc, local: Identity{Role: RoleSilo, SiloID: "impostor"}, token: &Token{Name: "reporting", Secret: secretA}}
	_, err = h.dial()
	assert.ErrorIs(t, err, ErrRoleRefused)
	require.Eventually(t, func() bool { return l.Stats().HandshakeRole == 1 }, waitFor, time.Millisecond)
	assert.Zero(t, l.Stats().Accepted)
}

func TestAVerifiedClientCertificateIsACredential(t *testing.T) {
	serverCA, clientCA := testcerts.NewCA(t, "servers"), testcerts.NewCA(t, "clients")
	server := serverCA.ServerConfig(t)
	server.ClientAuth, server.ClientCAs = tls.VerifyClientCertIfGiven, clientCA.Pool()
	l := listen(t, Options{TLS: server, Listener: ListenerOptions{RequireClientCredential: true}},
		func(*Conn) Handler { return &echoHandler{} })

	withCert := serverCA.ClientConfig()
	withCert.Certificates = []tls.Certificate{clientCA.Certificate(t, "client-7")}
	c, err := dialBounded(t, l, Options{TLS: withCert}, newRecorder())
	require.NoError(t, err)
	_ = c.Close()

	_, err = dialBounded(t, l, Options{TLS: serverCA.ClientConfig()}, newRecorder())
	assert.ErrorIs(t, err, ErrCredentialRefused, "TLS without a client certificate is no credential")
}

func TestTokenOptionsAreValidated(t *testing.T) {
	for name, o := range map[string]Options{
		"short secret":       {Token: &Token{Name: "a", Secret: []byte("short")}},
		"no name":            {Token: &Token{Secret: secretA}},
		"with a secret":      {Token: &Token{Name: "a", Secret: secretA}, ClusterSecret: secretB},
		"held by a silo":     {Token: &Token{Name: "a", Secret: secretA}, Identity: Identity{Role: RoleSilo}},
		"name not UTF-8":     {Token: &Token{Name: "\xff", Secret: secretA}},
		"name over the mark": {Token: &Token{Name: string(make([]byte, MaxIDLength+1)), Secret: secretA}},
	} {
		t.Run(name, func(t *testing.T) {
			o.EnsureDefaults()
			assert.ErrorIs(t, o.Validate(), ErrInvalidOptions)
		})
	}
}
