package silo_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/internal/testcerts"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/testcluster"
)

// callSeen is what an incoming filter saw of a call: the method, who made
// it and its metadata.
type callSeen struct {
	method string
	id     actor.Identity
	known  bool
	md     []string
}

// callRecorder is an incoming filter that keeps what it saw of each call,
// by the method called, last call first.
type callRecorder struct {
	mu   sync.Mutex
	seen map[string]callSeen
}

func (r *callRecorder) filter(ctx context.Context, call *proxy.IncomingCall, next proxy.IncomingInvoker) (proto.Message, error) {
	id, known := actor.IdentityOf(ctx)
	r.mu.Lock()
	if r.seen == nil {
		r.seen = make(map[string]callSeen)
	}
	r.seen[call.Method.Name] = callSeen{call.Method.Name, id, known, actor.MetadataOf(ctx).Pairs()}
	r.mu.Unlock()
	return next(ctx, call)
}

// last returns what the filter saw of the last call of method.
func (r *callRecorder) last(t *testing.T, method string) callSeen {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.seen[method]
	require.True(t, ok, "no call of %s reached the filter", method)
	return s
}

// A client's calls tell grains (and incoming filters) who the client
// proved to be at the handshake, with the rights of its credential, and
// carry the metadata the client set; a call whose metadata is over the
// limits fails before it is sent.
func TestCallsCarryTheClientsIdentityAndMetadata(t *testing.T) {
	rec := &callRecorder{}
	admin := client.Token{Name: "operator", Secret: []byte("the operator's client token, 32b")}
	e := startSilo(t, envConfig{
		opts: silo.Options{Security: silo.Security{ClientTokens: []silo.ClientToken{
			{Name: trustToken.Name, Secret: trustToken.Secret},
			{Name: admin.Name, Secret: admin.Secret, Rights: actor.RightAdmin},
		}}},
		siloOpts: []silo.Option{silo.WithIncomingFilters(rec.filter)},
	})
	for _, tc := range []struct {
		token  client.Token
		rights actor.Rights
	}{{trustToken, 0}, {admin, actor.RightAdmin}} {
		c := e.client(client.Options{Token: &tc.token})
		ctx := actor.WithMetadata(context.Background(), "tenant", "acme", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		_, err := testgrain.NewCounterRef(c, "identity").Add(ctx, &testgrain.AddRequest{Delta: 1})
		require.NoError(t, err)
		s := rec.last(t, "Add")
		require.True(t, s.known)
		assert.Equal(t, actor.Identity{Kind: actor.CallerClient, Name: tc.token.Name, Credential: actor.CredentialToken, Rights: tc.rights}, s.id)
		assert.Equal(t, []string{"tenant", "acme", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, s.md)

		// A call without metadata carries none, and still its identity.
		_, err = testgrain.NewCounterRef(c, "identity").Get(context.Background(), &testgrain.GetRequest{})
		require.NoError(t, err)
		s = rec.last(t, "Get")
		assert.Equal(t, tc.token.Name, s.id.Name)
		assert.Empty(t, s.md)
	}

	c := e.client(client.Options{Token: &trustToken})
	pairs := make([]string, 0, 2*(actor.MaxMetadataEntries+1))
	for i := range actor.MaxMetadataEntries + 1 {
		pairs = append(pairs, fmt.Sprint("k", i), "v")
	}
	_, err := testgrain.NewCounterRef(c, "over").Add(actor.WithMetadata(context.Background(), pairs...), &testgrain.AddRequest{Delta: 1})
	require.ErrorIs(t, err, proxy.ErrBadRequest)
	assert.Contains(t, err.Error(), "entries")
	_, err = testgrain.NewCounterRef(c, "over").Add(actor.WithMetadata(context.Background(), "k", string(make([]byte, actor.MaxMetadataBytes))), &testgrain.AddRequest{Delta: 1})
	require.ErrorIs(t, err, proxy.ErrBadRequest)
	assert.False(t, e.silo.Host().IsActive(testgrain.NewCounterRef(c, "over").GrainID()), "a refused call activated nothing")
}

// rawFrames is a transport handler that keeps the frames it receives.
type rawFrames struct{ frames chan []byte }

func (r rawFrames) HandleFrame(_ *transport.Conn, body []byte) {
	r.frames <- append([]byte(nil), body...)
}
func (r rawFrames) HandleClose(*transport.Conn, error) {}

// rawBytes is a frame written byte for byte.
type rawBytes []byte

func (r rawBytes) AppendTo(b []byte) ([]byte, error) { return append(b, r...), nil }

// forgedRequest is a request written by hand as a hostile client would:
// it claims to come from a silo, to have been forwarded, and to be relayed
// for a caller named root with every right; its metadata says the same.
func forgedRequest(id uint64, method *proxy.MethodDesc, metadata ...string) rawBytes {
	str := func(b []byte, num protowire.Number, s string) []byte {
		return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
	}
	num := func(b []byte, n protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(b, n, protowire.VarintType), v)
	}
	b := num(nil, 1, 1) // REQUEST
	b = num(b, 2, id)
	b = str(b, 3, method.Service)
	b = str(b, 4, "forged")
	b = num(b, 5, uint64(method.ID))
	b = num(b, 13, 1) // hops
	b = num(b, 14, 1) // from_silo
	for i := 0; i+1 < len(metadata); i += 2 {
		entry := str(str(nil, 1, metadata[i]), 2, metadata[i+1])
		b = protowire.AppendBytes(protowire.AppendTag(b, 18, protowire.BytesType), entry)
	}
	caller := str(num(nil, 1, 2), 2, "root") // kind silo, name root
	caller = num(num(caller, 3, 0xffffffff), 4, 1)
	return protowire.AppendBytes(protowire.AppendTag(b, 19, protowire.BytesType), caller)
}

// A client cannot forge who it is: the caller a request names (which only
// a relaying silo may), the silo it claims to be and its metadata change
// nothing of its identity or rights. The grain sees the client its
// handshake proved, a method that needs the admin right refuses it, and
// metadata over the limits is refused alone, the connection carrying on.
func TestAClientCannotForgeItsIdentity(t *testing.T) {
	rec := &callRecorder{}
	e := startSilo(t, envConfig{siloOpts: []silo.Option{silo.WithIncomingFilters(rec.filter)}})
	require.NoError(t, e.silo.RequireRights(testgrain.Counter_Get_Method, actor.RightAdmin))
	frames := rawFrames{frames: make(chan []byte, 4)}
	conn, err := transport.Dial(context.Background(), e.silo.GatewayAddr().String(),
		transport.Options{Identity: transport.Identity{Role: transport.RoleClient, ClusterID: silo.DefaultClusterID}}, frames)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(); <-conn.Done() })
	reply := func(req rawBytes) wire.Envelope {
		t.Helper()
		require.NoError(t, conn.Send(req))
		var env wire.Envelope
		select {
		case b := <-frames.frames:
			require.NoError(t, env.Unmarshal(b))
		case <-time.After(30 * time.Second):
			t.Fatal("no reply")
		}
		return env
	}

	got := reply(forgedRequest(1, testgrain.Counter_Add_Method, "identity", "root", "rights", "admin"))
	require.Equal(t, wire.StatusOK, got.Status, got.Error)
	s := rec.last(t, "Add")
	assert.Equal(t, actor.Identity{Kind: actor.CallerClient}, s.id, "the grain sees the client its handshake proved")
	assert.Equal(t, []string{"identity", "root", "rights", "admin"}, s.md, "metadata is only what the client said")

	got = reply(forgedRequest(2, testgrain.Counter_Get_Method))
	assert.Equal(t, wire.StatusPermissionDenied, got.Status, got.Error)
	assert.Contains(t, got.Error, "admin")

	over := make([]string, 0, 2*(wire.MaxMetadataEntries+1))
	for i := range wire.MaxMetadataEntries + 1 {
		over = append(over, fmt.Sprint("k", i), "v")
	}
	got = reply(forgedRequest(3, testgrain.Counter_Add_Method, over...))
	assert.Equal(t, wire.StatusBadRequest, got.Status)
	assert.Contains(t, got.Error, "metadata")
	got = reply(forgedRequest(4, testgrain.Counter_Add_Method))
	assert.Equal(t, wire.StatusOK, got.Status, "the connection carries on")
	st := e.silo.Stats().Gateway
	assert.EqualValues(t, 1, st.Denied)
	assert.EqualValues(t, 1, st.BadRequests)
}

// A call keeps its caller's identity and metadata when a silo relays it
// to the silo that hosts the grain; a call a grain makes is the silo's,
// and carries no metadata unless the grain passes it on.
func TestIdentityAndMetadataCrossSiloRelays(t *testing.T) {
	rec := &callRecorder{}
	c := testcluster.New(t, testcluster.Options{Silos: 2, Configure: func(_ int, o *silo.Options) {
		o.Security.ClientTokens = []silo.ClientToken{{Name: trustToken.Name, Secret: trustToken.Secret, Rights: actor.RightAdmin}}
	}, SiloOptions: []silo.Option{silo.WithIncomingFilters(rec.filter)}, Register: func(s *silo.Silo) error {
		return testgrain.RegisterCounterGrain(s, testgrain.NewCalling(nil, silo.CallerOf))
	}})
	cl := c.NewClient(client.Options{Gateways: []string{c.Silo(0).GatewayAddr().String()}, Token: &trustToken})
	ctx := actor.WithMetadata(context.Background(), "tenant", "acme")
	ref := testgrain.NewCounterRef(cl, "relayed")
	_, err := ref.Add(ctx, &testgrain.AddRequest{Delta: 1}, c.PlaceOn(1))
	require.NoError(t, err)
	where, found, err := c.Locate(context.Background(), ref.GrainID())
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, testcluster.Name(1), where, "the grain lives on the silo the client is not connected to")

	_, err = ref.Relay(ctx, &testgrain.RelayRequest{Key: "inner", Delta: 1})
	require.NoError(t, err)
	s := rec.last(t, "Relay")
	assert.Equal(t, actor.Identity{Kind: actor.CallerClient, Name: trustToken.Name, Credential: actor.CredentialToken, Rights: actor.RightAdmin}, s.id)
	assert.Equal(t, []string{"tenant", "acme"}, s.md)
	inner := rec.last(t, "Add")
	assert.Equal(t, actor.CallerSilo, inner.id.Kind, "a grain's call is its silo's")
	assert.Equal(t, testcluster.Name(1), inner.id.Name)
	assert.Empty(t, inner.md, "metadata is not passed on by itself")
}

// A client that shows a certificate the gateway verified (mutual TLS) is
// named after it, with the rights Security.ClientCertificates grants the
// name: none for a certificate not listed, nobody in particular without
// one. A method that needs the admin right serves only the listed one.
func TestAClientCertificateNamesTheCallerAndGrantsItsRights(t *testing.T) {
	ca := testcerts.NewCA(t, "clients")
	server := ca.ServerConfig(t)
	server.ClientAuth, server.ClientCAs = tls.VerifyClientCertIfGiven, ca.Pool()
	rec := &callRecorder{}
	e := startSilo(t, envConfig{
		opts: silo.Options{Security: silo.Security{TLS: server,
			ClientCertificates: []silo.ClientCertificate{{Name: "ops", Rights: actor.RightAdmin}}}},
		siloOpts: []silo.Option{silo.WithIncomingFilters(rec.filter)},
	})
	require.NoError(t, e.silo.RequireRights(testgrain.Counter_Get_Method, actor.RightAdmin))
	for _, tc := range []struct {
		cert string
		want actor.Identity
	}{
		{"ops", actor.Identity{Kind: actor.CallerClient, Name: "ops", Credential: actor.CredentialCertificate, Rights: actor.RightAdmin}},
		{"intern", actor.Identity{Kind: actor.CallerClient, Name: "intern", Credential: actor.CredentialCertificate}},
		{"", actor.Identity{Kind: actor.CallerClient}},
	} {
		cfg := ca.ClientConfig()
		if tc.cert != "" {
			cfg.Certificates = []tls.Certificate{ca.Certificate(t, tc.cert)}
		}
		c, err := connectTLS(t, e, cfg)
		require.NoError(t, err)
		ref := testgrain.NewCounterRef(c, "cert")
		_, err = ref.Add(context.Background(), &testgrain.AddRequest{Delta: 1})
		require.NoError(t, err)
		assert.Equal(t, tc.want, rec.last(t, "Add").id, tc.cert)
		_, err = ref.Get(context.Background(), &testgrain.GetRequest{})
		if tc.want.Rights.Has(actor.RightAdmin) {
			assert.NoError(t, err, tc.cert)
		} else {
			assert.ErrorIs(t, err, proxy.ErrPermissionDenied, tc.cert)
		}
	}
}

// Rights for certificates need a gateway that verifies certificates.
func TestClientCertificatesNeedAVerifyingGateway(t *testing.T) {
	_, err := silo.New(silo.Options{Name: "x", Security: silo.Security{
		ClientCertificates: []silo.ClientCertificate{{Name: "ops", Rights: actor.RightAdmin}}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Security.ClientCertificates")
}
