package silo_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/silo"
)

// The handshake's wire values a hostile peer writes by hand
// (internal/transport/handshake.go).
const (
	hsHello, hsWelcome, hsReject = 1, 2, 5
	hsRoleClient, hsRoleSilo     = 1, 2
	hsFlagToken                  = 1 << 1
	hsReasonRole                 = 4
)

var trustToken = client.Token{Name: "reporting", Secret: []byte("the reporting client's token, 32")}

// rawHello sends a hello of the given role, presenting the client token
// named token (none when empty), and returns the listener's answer.
func rawHello(t *testing.T, addr string, role byte, token string) handshakeAnswer {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.SetDeadline(time.Now().Add(10*time.Second)))
	body := []byte{0, 1, role, 0} // version 1, role, flags
	if token != "" {
		body[3] = hsFlagToken
	}
	body = binary.BigEndian.AppendUint64(body, 1)
	nonce := make([]byte, 32)
	_, _ = rand.Read(nonce)
	body = append(body, nonce...)
	for _, s := range []string{silo.DefaultClusterID, "impostor"} {
		body = append(append(body, byte(len(s))), s...)
	}
	if token != "" {
		body = append(append(body, byte(len(token))), token...)
	}
	msg := append([]byte{'G', 'R', 'N', 'Y', hsHello}, byte(len(body)>>8), byte(len(body)))
	_, err = nc.Write(append(msg, body...))
	require.NoError(t, err)
	hdr := make([]byte, 7)
	_, err = io.ReadFull(nc, hdr)
	require.NoError(t, err, "the listener answers the hello")
	answer := make([]byte, binary.BigEndian.Uint16(hdr[5:]))
	_, err = io.ReadFull(nc, answer)
	require.NoError(t, err)
	return handshakeAnswer{typ: hdr[4], body: answer}
}

// handshakeAnswer is the listener's first message: its type and body.
type handshakeAnswer struct {
	typ  byte
	body []byte
}

// assertRoleRefused checks that a hello was answered with a refusal for
// its role, not a welcome.
func assertRoleRefused(t *testing.T, a handshakeAnswer) {
	t.Helper()
	require.Equal(t, byte(hsReject), a.typ, "a refusal, not a welcome (type %d)", hsWelcome)
	assert.Equal(t, byte(hsReasonRole), a.body[0], "refused for its role: %q", a.body)
}

func startTrustSilo(t *testing.T, o silo.Options) *silo.Silo {
	t.Helper()
	o.Name, o.GatewayAddress = "trust", "127.0.0.1:0"
	s, err := silo.New(o, silo.WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, testgrain.RegisterCounterGrain(s, testgrain.New(nil)))
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, s.Stop(ctx))
	})
	return s
}

// A single silo with no credential configured (the binary's default)
// takes clients and never a silo: a connection that says it is a silo
// would bypass the client limits and reach the grain directory.
func TestASingleSiloWithoutCredentialsRefusesSilos(t *testing.T) {
	s := startTrustSilo(t, silo.Options{})
	assertRoleRefused(t, rawHello(t, s.GatewayAddr().String(), hsRoleSilo, ""))
	// The listener counts a refusal after sending it, so the count may trail the answer.
	eventually(t, func() bool { return s.Stats().GatewayListener.HandshakeRole == 1 }, "the refusal is counted")
	assert.Equal(t, byte(hsWelcome), rawHello(t, s.GatewayAddr().String(), hsRoleClient, "").typ, "a client is welcome")
}

// A client holding its token cannot open a silo's connection on the
// gateway, nor pass for a silo on the listener for other silos, and its
// calls work as a client's.
func TestAClientTokenNeverActsAsASilo(t *testing.T) {
	s := startTrustSilo(t, silo.Options{
		Security: silo.Security{
			Secret:       []byte("the silos' own secret, 32 bytes!"),
			ClientTokens: []silo.ClientToken{{Name: trustToken.Name, Secret: trustToken.Secret}},
		},
		Cluster: silo.ClusterOptions{Enabled: true, Timings: cluster.FastTimings()},
	})
	gateway := s.GatewayAddr().String()
	links := linkAddress(t, s)

	assertRoleRefused(t, rawHello(t, gateway, hsRoleSilo, trustToken.Name))
	assertRoleRefused(t, rawHello(t, links, hsRoleSilo, trustToken.Name))
	assertRoleRefused(t, rawHello(t, links, hsRoleClient, trustToken.Name))
	eventually(t, func() bool {
		st := s.Stats()
		return st.GatewayListener.HandshakeRole == 1 && st.LinkListener.HandshakeRole == 2
	}, "the three refusals are counted")
	assert.Zero(t, s.Stats().LinkListener.Accepted)

	// With the token, the client calls as a client.
	c, err := client.New(client.Options{Gateways: []string{gateway}, Token: &trustToken}, client.WithLogger(quiet))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = testgrain.NewCounterRef(c, "k").Add(context.Background(), &testgrain.AddRequest{Delta: 1})
	require.NoError(t, err)

	// Without it, the gateway refuses the client.
	anon, err := client.New(client.Options{Gateways: []string{gateway}}, client.WithLogger(quiet))
	require.NoError(t, err)
	t.Cleanup(func() { _ = anon.Close() })
	assert.ErrorContains(t, anon.Connect(context.Background()), "requires a client credential")
	eventually(t, func() bool { return s.Stats().GatewayListener.HandshakeCredential == 1 }, "the refusal is counted")
}

// linkAddress is the address of s's listener for other silos.
func linkAddress(t *testing.T, s *silo.Silo) string {
	t.Helper()
	v, err := s.Members()
	require.NoError(t, err)
	m, ok := v.Member(s.Name())
	require.True(t, ok)
	return m.Address
}
