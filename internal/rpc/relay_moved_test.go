package rpc

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/proxy"
)

// inboundFunc is an Inbound that hands each request to a function.
type inboundFunc func(req *host.Request)

func (f inboundFunc) Deliver(req *host.Request) { f(req) }

// movedLog records what a silo's links were told about moved grains.
type movedLog struct {
	mu    sync.Mutex
	moved map[actor.GrainID][]string
}

func (m *movedLog) record(id actor.GrainID, silo string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.moved == nil {
		m.moved = make(map[actor.GrainID][]string)
	}
	m.moved[id] = append(m.moved[id], silo)
}

func (m *movedLog) of(id actor.GrainID) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.moved[id]...)
}

// siloLink links silo from to silo to over loopback, as silos link: each
// end knows the other's name. Requests that arrive at to go to inbound;
// the returned endpoint is from's end, which tells moved of moved grains.
func siloLink(t *testing.T, from string, moved *movedLog, to string, inbound Inbound) *Endpoint {
	t.Helper()
	l, err := transport.Listen("127.0.0.1:0", transport.Options{Identity: transport.Identity{Role: transport.RoleSilo, SiloID: to}},
		func(c *transport.Conn) transport.Handler {
			ep := NewEndpoint(EndpointOptions{}, inbound, nil, nil, quiet)
			ep.Attach(c)
			return ep
		})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	ep := NewEndpoint(EndpointOptions{Moved: moved.record}, nil, nil, nil, quiet)
	conn, err := transport.Dial(context.Background(), l.Addr().String(),
		transport.Options{Identity: transport.Identity{Role: transport.RoleSilo, SiloID: from}}, ep)
	require.NoError(t, err)
	ep.Attach(conn)
	t.Cleanup(func() { _ = conn.Close(); <-conn.Done() })
	return ep
}

// relayChain builds silos that each relay every request to the next, the
// last of which answers with answer; the first is called through a local
// caller, as a grain on it would call. It returns that caller and what each
// silo's links were told of moved grains.
func relayChain(t *testing.T, answer func(req *host.Request), names ...string) (*LocalCaller, map[string]*movedLog) {
	t.Helper()
	logs := make(map[string]*movedLog)
	var next Inbound = inboundFunc(answer)
	for i := len(names) - 2; i >= 0; i-- {
		logs[names[i]] = &movedLog{}
		link := siloLink(t, names[i], logs[names[i]], names[i+1], next)
		next = inboundFunc(link.Relay)
	}
	l := NewLocalCaller(next, func() time.Duration { return time.Minute }, nil, 0)
	t.Cleanup(l.Close)
	return l, logs
}

// A silo that relays a request another silo sent it names, in the reply,
// the silo that answered, and the silo that sent it caches that. Only the
// grain's own answer says where it lives: a silo that refused the call
// (stopping, overloaded, forwarding it nowhere, without the grain type)
// does not host the grain, and naming it would send the sender's next
// calls to a silo that cannot serve them.
func TestOnlyTheGrainsOwnAnswerSaysWhereItMoved(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		hosted bool
	}{
		{"answered", nil, true},
		{"the grain's own error", proxy.NewError(404, "no such user"), true},
		{"the silo is stopping", fmt.Errorf("%w: silo stopping", proxy.ErrUnavailable), false},
		{"the silo is overloaded", fmt.Errorf("%w: too many calls", proxy.ErrOverloaded), false},
		{"forwarded too often", fmt.Errorf("%w: forwarded 2 times", proxy.ErrForwardLimit), false},
		{"no such grain type", &proxy.CallError{Code: proxy.CodeUnknownGrainType, Message: "no such type"}, false},
		{"the activation failed", fmt.Errorf("%w: load state", proxy.ErrActivation), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			answer := func(req *host.Request) {
				if tc.err != nil {
					req.Reply.Reply(req, nil, tc.err)
					return
				}
				increment(req)
			}
			l, moved := relayChain(t, answer, "gateway", "stale", "host")
			out := &wrapperspb.Int64Value{}
			err := l.Call(context.Background(), testCall(time.Minute, false), wrapperspb.Int64(1), out)
			if tc.err == nil {
				require.NoError(t, err)
				assert.EqualValues(t, 2, out.Value)
			} else {
				require.Error(t, err)
			}
			target := testCall(0, false).Target
			if tc.hosted {
				assert.Equal(t, []string{"host"}, moved["gateway"].of(target), "the gateway caches the silo that answered")
			} else {
				assert.Empty(t, moved["gateway"].of(target), "a refusal names no silo")
			}
			assert.Empty(t, moved["stale"].of(target), "the silo that asked the host directly learns nothing")
		})
	}
}

// Past two hops (a router with a higher MaxHops), the silo that answered
// is named all the way back: each silo on the way caches it, instead of
// the next silo on the way, which does not host the grain either.
func TestTheSiloThatAnsweredIsNamedAllTheWayBack(t *testing.T) {
	l, moved := relayChain(t, increment, "gateway", "stale", "staler", "host")
	out := &wrapperspb.Int64Value{}
	require.NoError(t, l.Call(context.Background(), testCall(time.Minute, false), wrapperspb.Int64(1), out))
	assert.EqualValues(t, 2, out.Value)
	target := testCall(0, false).Target
	assert.Equal(t, []string{"host"}, moved["stale"].of(target))
	assert.Equal(t, []string{"host"}, moved["gateway"].of(target), "not staler, which passed the call on")
	assert.Empty(t, moved["staler"].of(target))
}
