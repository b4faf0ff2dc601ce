package silo_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

// The silo throttles the log lines about refused requests once for all its
// connections: a peer that opens connection after connection, each with a
// bad request, gets the burst of lines and no more, while the silo's stats
// count every rejection, those of connections gone included.
func TestTheSiloThrottlesRejectionLogsAcrossConnections(t *testing.T) {
	const conns = 3 * transport.DefaultLogBurst
	var logs syncBuffer
	e := startSilo(t, envConfig{fakeClock: true, siloOpts: []silo.Option{silo.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))}})
	for i := range conns {
		raw := dialRaw(t, e)
		env := addRequest(t, 1, "bad-\xff", 1, false)
		raw.send(t, env)
		reply := <-raw.replies
		require.Equal(t, wire.StatusBadRequest, reply.Status, "connection %d", i)
		require.NoError(t, raw.conn.Close())
		<-raw.conn.Done()
	}
	eventually(t, func() bool { return e.silo.Stats().Clients == 0 }, "every connection is gone")
	lines := strings.Count(logs.String(), `msg="rpc: request refused"`)
	assert.Equal(t, transport.DefaultLogBurst, lines, "the burst, then nothing until time passes")
	st := e.silo.Stats().Rejected
	assert.EqualValues(t, conns, st.BadRequests, "every rejection counted")
	assert.EqualValues(t, conns-transport.DefaultLogBurst, st.LogSuppressed)
}

// Requests for a grain type the silo does not host, for a method the type
// lacks, and with a payload that does not decode, fail alone and are
// counted by kind.
func TestBadContentsAreCountedByKind(t *testing.T) {
	e := startSilo(t, envConfig{})
	c := e.client(client.Options{})
	ctx := context.Background()
	err := proxy.NewRef(c, "no.such.Grain", "k").Invoke(ctx, &proxy.MethodDesc{Service: "no.such.Grain", Name: "X", ID: 1},
		&testgrain.GetRequest{}, &testgrain.GetReply{})
	require.ErrorIs(t, err, proxy.ErrUnknownGrainType)
	err = proxy.NewRef(c, testgrain.CounterGrainType, "k").Invoke(ctx, &proxy.MethodDesc{Service: testgrain.CounterGrainType, Name: "Nope", ID: 12345},
		&testgrain.GetRequest{}, &testgrain.GetReply{})
	require.ErrorIs(t, err, proxy.ErrUnknownMethod)

	raw := dialRaw(t, e)
	env := addRequest(t, 1, "k", 1, false)
	env.Payload = []byte{0xff, 0xff, 0xff} // not an AddRequest
	raw.send(t, env)
	reply := <-raw.replies
	require.Equal(t, wire.StatusBadRequest, reply.Status)

	_, err = testgrain.NewCounterRef(c, "k").Add(ctx, &testgrain.AddRequest{Delta: 1})
	require.NoError(t, err)
	st := e.silo.Stats().Rejected
	assert.EqualValues(t, 1, st.UnknownGrainType)
	assert.EqualValues(t, 1, st.UnknownMethod)
	assert.EqualValues(t, 1, st.BadRequests)
}
