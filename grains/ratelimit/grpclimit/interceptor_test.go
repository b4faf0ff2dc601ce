package grpclimit_test

import (
	"context"
	"crypto/tls"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/granary-go/granary/grains/ratelimit/grpclimit"
	"github.com/granary-go/granary/internal/testcerts"
)

// identityKey is where the tests' authentication interceptor puts the
// caller's identity.
type identityKey struct{}

// authenticate is an authentication interceptor: the identity is the
// "authorization" metadata, as a real one would find it in a token.
func authenticate(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get("authorization")) > 0 {
		ctx = context.WithValue(ctx, identityKey{}, md.Get("authorization")[0])
	}
	return handler(ctx, req)
}

func identityFromContext(ctx context.Context, _ *grpclimit.Call) (string, bool) {
	id, ok := ctx.Value(identityKey{}).(string)
	return id, ok
}

// TestUnaryRulesKeyCallsAsTheySay: each kind of rule counts the calls of
// one key together, two a window here, and lets the calls it does not
// apply to pass.
func TestUnaryRulesKeyCallsAsTheySay(t *testing.T) {
	caller := limiterSilo(t)
	cases := []struct {
		name  string
		rule  grpclimit.Rule
		same  [][]string // metadata of three calls that share a key
		other []string   // metadata of a call with another key, or none
		free  []string   // metadata of a call the rule does not apply to
	}{
		{name: "method", rule: grpclimit.ByMethod("two"), same: [][]string{nil, {"x-tenant", "a"}, {"x-tenant", "b"}}},
		{name: "method, only Check", rule: grpclimit.ByMethod("two").ForMethods("/grpc.health.v1.Health/"), same: [][]string{nil, nil, nil}},
		{name: "metadata", rule: grpclimit.ByMetadata("two", "X-Tenant"),
			same: [][]string{{"x-tenant", "a"}, {"x-tenant", "a"}, {"x-tenant", "a"}}, other: []string{"x-tenant", "b"}, free: []string{}},
		{name: "identity", rule: grpclimit.ByIdentity("two", identityFromContext),
			same: [][]string{{"authorization", "alice"}, {"authorization", "alice"}, {"authorization", "alice"}}, other: []string{"authorization", "bob"}, free: []string{}},
		{name: "key", rule: grpclimit.ByKey("agent", "two", func(_ context.Context, c *grpclimit.Call) (string, bool) { return c.Metadata("user-agent") }),
			same: [][]string{nil, nil, nil}},
		{name: "not this method", rule: grpclimit.ByMethod("two").ForMethods(listMethod), free: []string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := grpclimit.New(caller, configs(t), grpclimit.Options{Rules: []grpclimit.Rule{c.rule}, KeyPrefix: t.Name()})
			require.NoError(t, err)
			dial, _ := healthServer(t, nil, grpc.ChainUnaryInterceptor(authenticate, l.UnaryServerInterceptor()))
			client := dial(nil)
			for i, md := range c.same {
				err, trailer := check(t, client, md...)
				if i < 2 {
					require.NoError(t, err, "call %d", i)
					continue
				}
				requireRefused(t, err, trailer, c.rule.Name(), never)
			}
			if c.other != nil {
				err, _ := check(t, client, c.other...)
				require.NoError(t, err)
			}
			if c.free != nil {
				for range 3 {
					err, _ := check(t, client, c.free...)
					require.NoError(t, err)
				}
			}
		})
	}
}

// TestPeerRulesKeyByHost: calls from two connections of one host share
// the host's limiter; the port is not part of the key.
func TestPeerRulesKeyByHost(t *testing.T) {
	l, err := grpclimit.New(limiterSilo(t), configs(t), grpclimit.Options{Rules: []grpclimit.Rule{grpclimit.ByPeer("two")}})
	require.NoError(t, err)
	dial, _ := healthServer(t, nil, grpc.UnaryInterceptor(l.UnaryServerInterceptor()))
	first, second := dial(nil), dial(nil)
	err, _ = check(t, first)
	require.NoError(t, err)
	err, _ = check(t, second)
	require.NoError(t, err)
	err, trailer := check(t, first)
	requireRefused(t, err, trailer, "two", never)
}

// TestTLSIdentityIsTheClientCertificate: over mutual TLS, the client
// certificate's name is the identity.
func TestTLSIdentityIsTheClientCertificate(t *testing.T) {
	ca := testcerts.NewCA(t, "grpclimit")
	serverTLS := ca.ServerConfig(t)
	serverTLS.ClientAuth, serverTLS.ClientCAs = tls.RequireAndVerifyClientCert, ca.Pool()
	alice, bob := ca.ClientConfig(), ca.ClientConfig()
	alice.Certificates = append(alice.Certificates, ca.Certificate(t, "alice"))
	bob.Certificates = append(bob.Certificates, ca.Certificate(t, "bob"))
	serverCreds, aliceCreds := mutualTLS(serverTLS, alice)
	_, bobCreds := mutualTLS(serverTLS, bob)

	l, err := grpclimit.New(limiterSilo(t), configs(t), grpclimit.Options{Rules: []grpclimit.Rule{grpclimit.ByIdentity("two", grpclimit.TLSIdentity)}})
	require.NoError(t, err)
	dial, _ := healthServer(t, serverCreds, grpc.UnaryInterceptor(l.UnaryServerInterceptor()))
	asAlice, asBob := dial(aliceCreds), dial(bobCreds)
	for range 2 {
		err, _ := check(t, asAlice)
		require.NoError(t, err)
	}
	err, trailer := check(t, asAlice)
	requireRefused(t, err, trailer, "two", never)
	err, _ = check(t, asBob)
	require.NoError(t, err)
}

// TestStreamsHoldConcurrencyPermitsUntilTheyEnd: a stream holds its
// permit while it is open: a call beside it is refused, and one after it
// passes.
func TestStreamsHoldConcurrencyPermitsUntilTheyEnd(t *testing.T) {
	l, err := grpclimit.New(limiterSilo(t), configs(t), grpclimit.Options{Rules: []grpclimit.Rule{grpclimit.ByPeer("one-at-a-time")}})
	require.NoError(t, err)
	dial, hs := healthServer(t, nil, grpc.StreamInterceptor(l.StreamServerInterceptor()), grpc.UnaryInterceptor(l.UnaryServerInterceptor()))
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	client := dial(nil)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	watchCtx, stopWatching := context.WithCancel(ctx)
	watch, err := client.Watch(watchCtx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = watch.Recv() // the stream is admitted and served
	require.NoError(t, err)

	err, trailer := check(t, client)
	requireRefused(t, err, trailer, "one-at-a-time", time.Second)
	second, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	_, err = second.Recv()
	require.Equal(t, codes.ResourceExhausted, status.Code(err))

	stopWatching()
	for {
		if _, err := watch.Recv(); err != nil {
			require.NotEqual(t, io.EOF, err)
			break
		}
	}
	require.Eventually(t, func() bool { err, _ := check(t, client); return err == nil }, 10*time.Second, 10*time.Millisecond,
		"the permit comes back once the server has seen the stream end")
}
