package client_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/examples/counter"
	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// startSilo starts a silo serving the example counter on a free port.
func startSilo(t *testing.T, store persistence.Store) *silo.Silo {
	t.Helper()
	s, err := silo.New(silo.Options{GatewayAddress: "127.0.0.1:0"}, silo.WithLogger(quiet), silo.WithStore(store))
	require.NoError(t, err)
	require.NoError(t, counter.RegisterCounterGrain(s, counter.New))
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() { assert.NoError(t, s.Stop(context.Background())) })
	return s
}

// deadAddress returns a loopback address nothing listens on.
func deadAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestNewDoesNoIOAndTheFirstCallConnects(t *testing.T) {
	s := startSilo(t, persistence.NewMemoryStore())
	c, err := client.New(client.Options{Gateways: []string{s.GatewayAddr().String()}}, client.WithLogger(quiet))
	require.NoError(t, err)
	defer c.Close()
	assert.Empty(t, c.Gateway(), "New does not connect")
	r, err := counter.NewCounterRef(c, "k").Add(context.Background(), &counter.AddRequest{Delta: 3})
	require.NoError(t, err)
	assert.EqualValues(t, 3, r.Value)
	assert.Equal(t, s.GatewayAddr().String(), c.Gateway(), "the call connected")
}

func TestConnectMovesOnToAGatewayThatAnswers(t *testing.T) {
	s := startSilo(t, persistence.NewMemoryStore())
	live := s.GatewayAddr().String()
	c, err := client.New(client.Options{Gateways: []string{deadAddress(t), live, deadAddress(t)}, DialTimeout: time.Second}, client.WithLogger(quiet))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Connect(context.Background()))
	assert.Equal(t, live, c.Gateway())
}

func TestConnectFailsClearlyWhenNoGatewayAnswers(t *testing.T) {
	dead := deadAddress(t)
	c, err := client.New(client.Options{Gateways: []string{dead}, DialTimeout: time.Second}, client.WithLogger(quiet))
	require.NoError(t, err)
	defer c.Close()
	err = c.Connect(context.Background())
	require.ErrorIs(t, err, proxy.ErrUnavailable)
	assert.Contains(t, err.Error(), dead)
	_, err = counter.NewCounterRef(c, "k").Get(context.Background(), &counter.GetRequest{})
	require.ErrorIs(t, err, proxy.ErrUnavailable, "a call fails the same way, it does not hang")
}

// When its gateway stops, the client's next call goes to another one.
func TestCallsMoveToAnotherGatewayWhenOneStops(t *testing.T) {
	store := persistence.NewMemoryStore()
	a, b := startSilo(t, store), startSilo(t, store)
	c, err := client.New(client.Options{Gateways: []string{a.GatewayAddr().String(), b.GatewayAddr().String()}}, client.WithLogger(quiet))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Connect(context.Background()))
	first := c.Gateway()
	stopped, other := a, b
	if first == b.GatewayAddr().String() {
		stopped, other = b, a
	}
	ref := counter.NewCounterRef(c, "k")
	_, err = ref.Add(context.Background(), &counter.AddRequest{Delta: 1})
	require.NoError(t, err)
	require.NoError(t, stopped.Stop(context.Background()))
	_, err = ref.Get(context.Background(), &counter.GetRequest{})
	if err != nil {
		require.ErrorIs(t, err, proxy.ErrUnavailable, "a call in flight when the gateway went may fail, clearly")
	}
	require.Eventually(t, func() bool {
		r, err := ref.Get(context.Background(), &counter.GetRequest{})
		return err == nil && r.Value == 1
	}, 10*time.Second, time.Millisecond, "later calls reach the other gateway, and the state written on the first silo")
	assert.Equal(t, other.GatewayAddr().String(), c.Gateway())
}

func TestClosedClientRefusesCalls(t *testing.T) {
	s := startSilo(t, persistence.NewMemoryStore())
	c, err := client.New(client.Options{Gateways: []string{s.GatewayAddr().String()}}, client.WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, c.Connect(context.Background()))
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "Close is safe twice")
	_, err = counter.NewCounterRef(c, "k").Get(context.Background(), &counter.GetRequest{})
	require.ErrorIs(t, err, client.ErrClosed)
}

func TestOptionsReportEveryBadField(t *testing.T) {
	_, err := client.New(client.Options{})
	require.ErrorContains(t, err, "Gateways")
	_, err = client.New(client.Options{Gateways: []string{"h:1", "h:0", "nope"}, ResponseTimeout: -1, DialTimeout: -1, MaxFrameSize: 2 << 30, TimeoutResolution: -1})
	require.Error(t, err)
	for _, want := range []string{`"h:0"`, `"nope"`, "ResponseTimeout", "DialTimeout", "MaxFrameSize", "TimeoutResolution"} {
		assert.Contains(t, err.Error(), want)
	}
	assert.NotContains(t, err.Error(), `"h:1"`, "a valid address is not reported")
	c, err := client.New(client.Options{Gateways: []string{"h:1"}})
	require.NoError(t, err)
	assert.Equal(t, client.DefaultResponseTimeout, c.Options().ResponseTimeout)
	assert.Equal(t, client.DefaultDialTimeout, c.Options().DialTimeout)
}
