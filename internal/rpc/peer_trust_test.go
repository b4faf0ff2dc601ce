package rpc

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/internal/wire"
)

// What a request says of its route (how often it was forwarded, whether
// a silo sent it) counts only when a silo sent it, as the connection's
// handshake proved: a client that claims to be a forwarding silo is taken
// for the client it is.
func TestOnlyASiloPeerMaySayItForwardedTheCall(t *testing.T) {
	for _, tc := range []struct {
		role     transport.Role
		hops     uint32
		fromSilo bool
	}{
		{transport.RoleClient, 0, false},
		{transport.RoleSilo, 2, true},
	} {
		t.Run(tc.role.String(), func(t *testing.T) {
			type route struct {
				hops     uint32
				fromSilo bool
			}
			got := make(chan route, 1)
			l, _ := listenEndpoints(t, transport.Options{}, inboundFunc(func(req *host.Request) {
				got <- route{req.Hops, req.FromSilo}
				req.Reply.Reply(req, nil, nil)
				req.Release()
			}))
			t.Cleanup(func() { _ = l.Close() })
			conn, err := transport.Dial(context.Background(), l.Addr().String(),
				transport.Options{Identity: transport.Identity{Role: tc.role, SiloID: "peer"}}, NewEndpoint(EndpointOptions{}, nil, nil, nil, quiet))
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close(); <-conn.Done() })
			require.NoError(t, conn.Send(&outFrame{env: wire.Envelope{
				Kind: wire.KindRequest, CallID: 1, GrainType: "test.S", GrainKey: "k", MethodID: testMethod.ID,
				Hops: 2, FromSilo: true,
			}}))
			r := <-got
			assert.Equal(t, tc.hops, r.hops)
			assert.Equal(t, tc.fromSilo, r.fromSilo)
		})
	}
}

// The silo's system services (the directory) answer silos only: to a
// client, the type does not exist, and its request reaches nothing.
func TestClientsCannotReachTheSilosSystemServices(t *testing.T) {
	served := 0
	r := &Router{Systems: map[string]func(*host.Request){"granary.system.test": func(req *host.Request) {
		served++
		req.Reply.Reply(req, nil, nil)
		req.Release()
	}}}
	reply := func(fromSilo bool) error {
		rc := make(chan error, 1)
		req := host.NewRequest()
		req.Target.Type, req.FromSilo = "granary.system.test", fromSilo
		req.Reply = replierFunc(func(_ *host.Request, _ proto.Message, err error) { rc <- err })
		r.Route(req)
		return <-rc
	}
	assert.ErrorIs(t, reply(false), actor.ErrUnknownGrainType)
	assert.Zero(t, served, "a client's request reached the service")
	assert.NoError(t, reply(true))
	assert.Equal(t, 1, served)
}

// replierFunc is a Replier that hands the outcome to a function.
type replierFunc func(req *host.Request, reply proto.Message, err error)

func (f replierFunc) Reply(req *host.Request, reply proto.Message, err error) { f(req, reply, err) }
