package transport

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/testcerts"
)

// dialBounded dials with a context that ends after waitFor, so that a
// handshake that hangs fails the test instead of stalling it.
func dialBounded(t *testing.T, l *Listener, opts Options, h Handler) (*Conn, error) {
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	c, err := Dial(ctx, l.Addr().String(), opts, h)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func TestTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	l := listen(t, Options{TLS: ca.ServerConfig(t), ClusterSecret: secretA}, func(*Conn) Handler { return &echoHandler{} })
	r := newRecorder()
	c, err := dialBounded(t, l, Options{TLS: ca.ClientConfig(), ClusterSecret: secretA}, r)
	require.NoError(t, err)

	require.NoError(t, c.Send(body("over TLS")))
	assert.Equal(t, "over TLS", string(r.next(t)))
	state, ok := c.TLSState()
	require.True(t, ok)
	assert.True(t, state.HandshakeComplete)
	assert.Equal(t, "server", state.PeerCertificates[0].Subject.CommonName)
	assert.Equal(t, RoleSilo, c.Peer().Role, "the granary handshake ran inside TLS")
}

func TestTLSRefusesAnUntrustedServer(t *testing.T) {
	l := listen(t, Options{TLS: testcerts.NewCA(t, "impostor").ServerConfig(t)}, func(*Conn) Handler { return &echoHandler{} })
	_, err := dialBounded(t, l, Options{TLS: testcerts.NewCA(t, "cluster").ClientConfig()}, newRecorder())
	assert.ErrorIs(t, err, ErrTLSHandshake)
	assert.ErrorIs(t, err, ErrHandshake)
	require.Eventually(t, func() bool { return l.Stats().HandshakeTLS == 1 }, waitFor, time.Millisecond,
		"the listener sees the dialler's alert")
}

func TestMutualTLS(t *testing.T) {
	serverCA, clientCA := testcerts.NewCA(t, "servers"), testcerts.NewCA(t, "clients")
	server := serverCA.ServerConfig(t)
	server.ClientAuth, server.ClientCAs = tls.RequireAndVerifyClientCert, clientCA.Pool()
	peers := make(chan string, 1)
	l := listen(t, Options{TLS: server}, func(c *Conn) Handler {
		state, ok := c.TLSState()
		if ok && len(state.PeerCertificates) > 0 {
			peers <- state.PeerCertificates[0].Subject.CommonName
		}
		return &echoHandler{}
	})

	withCert := func(ca *testcerts.CA, name string) Options {
		cfg := serverCA.ClientConfig()
		cfg.Certificates = []tls.Certificate{ca.Certificate(t, name)}
		return Options{TLS: cfg}
	}
	t.Run("a client with a certificate from the client CA", func(t *testing.T) {
		r := newRecorder()
		c, err := dialBounded(t, l, withCert(clientCA, "client-7"), r)
		require.NoError(t, err)
		assert.Equal(t, "client-7", <-peers, "the accept function sees the verified client certificate")
		require.NoError(t, c.Send(body("mutual")))
		assert.Equal(t, "mutual", string(r.next(t)))
	})
	t.Run("a client without a certificate", func(t *testing.T) {
		_, err := dialBounded(t, l, Options{TLS: serverCA.ClientConfig()}, newRecorder())
		assert.ErrorIs(t, err, ErrTLSHandshake)
	})
	t.Run("a client with a certificate from another CA", func(t *testing.T) {
		_, err := dialBounded(t, l, withCert(serverCA, "stranger"), newRecorder())
		assert.ErrorIs(t, err, ErrTLSHandshake)
	})
	require.Eventually(t, func() bool { return l.Stats().HandshakeTLS == 2 }, waitFor, time.Millisecond)
	assert.EqualValues(t, 1, l.Stats().Accepted)
}

func TestPlainDiallerAgainstATLSListener(t *testing.T) {
	logs, logger := newLogBuffer()
	ca := testcerts.NewCA(t, "cluster")
	l := listen(t, Options{TLS: ca.ServerConfig(t)}, func(*Conn) Handler { return &echoHandler{} }, WithLogger(logger))
	_, err := dialBounded(t, l, Options{}, newRecorder())
	var he *HandshakeError
	require.ErrorAs(t, err, &he)
	assert.ErrorIs(t, err, ErrTLSMismatch)
	assert.True(t, he.ByPeer)
	assert.Contains(t, he.Detail, "requires TLS")
	require.Eventually(t, func() bool { return l.Stats().HandshakeTLSMismatch == 1 }, waitFor, time.Millisecond)
	assert.Contains(t, logs.String(), "reason=tls-mismatch")
}

func TestTLSDiallerAgainstAPlainListener(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	l := listen(t, Options{}, func(*Conn) Handler { return &echoHandler{} })
	_, err := dialBounded(t, l, Options{TLS: ca.ClientConfig()}, newRecorder())
	var he *HandshakeError
	require.ErrorAs(t, err, &he)
	assert.ErrorIs(t, err, ErrTLSMismatch)
	assert.True(t, he.ByPeer)
	require.Eventually(t, func() bool { return l.Stats().HandshakeTLSMismatch == 1 }, waitFor, time.Millisecond)
}

func TestServeOnAnInjectedListener(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l, err := Serve(ln, Options{TLS: ca.ServerConfig(t)}, func(*Conn) Handler { return &echoHandler{} }, WithLogger(quiet))
	require.NoError(t, err)
	r := newRecorder()
	c, err := dialBounded(t, l, Options{TLS: ca.ClientConfig()}, r)
	require.NoError(t, err)
	require.NoError(t, c.Send(body("served")))
	assert.Equal(t, "served", string(r.next(t)))
	require.NoError(t, l.Close())
	_, err = ln.Accept()
	assert.ErrorIs(t, err, net.ErrClosed, "Close closes the injected listener")

	_, err = Serve(ln, Options{MaxFrameSize: -1}, func(*Conn) Handler { return nil })
	assert.ErrorIs(t, err, ErrInvalidOptions)
	_, err = Serve(ln, Options{}, nil)
	assert.Error(t, err)
}
