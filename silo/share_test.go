package silo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

// startSharedSilo starts a silo whose connections' shares age on a fake
// clock of their own: the grains' Block needs real time.
func startSharedSilo(t *testing.T, limits silo.Limits, tokens ...silo.ClientToken) (*env, *clock.Fake) {
	shareClock := clock.NewFake(time.Unix(1_700_000_000, 0))
	opts := silo.Options{Limits: limits, Security: silo.Security{ClientTokens: tokens}}
	return startSilo(t, envConfig{opts: opts, siloOpts: []silo.Option{silo.WithShareClock(shareClock)}}), shareClock
}

// addOne adds 1 to the counter key through c.
func addOne(ctx context.Context, c *client.Client, key string) error {
	_, err := testgrain.NewCounterRef(c, key).Add(ctx, &testgrain.AddRequest{Delta: 1})
	return err
}

// quietEpochs lets every connection's last request age out of the
// shares: the connection that calls next is busy alone.
func quietEpochs(c *clock.Fake) {
	for range 3 {
		c.Advance(rpc.DefaultShareEpoch)
	}
}

// A connection flooding new activations while another is busy may have
// only its share of them under way: one more is refused with OVERLOADED at
// once, on the reader, before the host sees it, while the other
// connection's new and existing grains, and the flooder's calls to active
// grains, are admitted. Busy alone, the flooder has no such bound.
func TestAFlooderOfNewActivationsGetsItsShareAndTheOtherConnectionIsAdmitted(t *testing.T) {
	e, shareClock := startSharedSilo(t, silo.Limits{SharedActivations: 2})
	flood, other := e.client(client.Options{}), e.client(client.Options{})
	ctx := context.Background()
	require.NoError(t, addOne(ctx, flood, "active"))
	require.NoError(t, addOne(ctx, other, "other-active"))

	// Two connections busy: a share of one new activation each.
	held := blockOn(ctx, testgrain.NewCounterRef(flood, "new-held"), "held")
	require.Equal(t, "held", <-e.gate.Entered())
	for i := range 3 {
		err := addOne(ctx, flood, fmt.Sprint("new-", i))
		require.ErrorIs(t, err, proxy.ErrOverloaded, "the flooder's new activation %d", i)
		assert.Contains(t, err.Error(), "its share while 2 clients are busy")
	}
	require.NoError(t, addOne(ctx, flood, "active"), "a call to an active grain is no new activation")
	for i := range 5 {
		require.NoError(t, addOne(ctx, other, fmt.Sprint("other-new-", i)), "the other connection's new grain %d", i)
		require.NoError(t, addOne(ctx, other, "other-active"))
	}
	st := e.silo.Stats()
	assert.EqualValues(t, 3, st.Rejected.OverShare)
	assert.EqualValues(t, 3, st.Gateway.OverShare)
	assert.Zero(t, st.Host.RefusedActivations, "refused before the host saw them")
	assert.EqualValues(t, 8, st.Host.Activations, "the refused requests created nothing")

	// Once the held activation's first call is answered, its share is free.
	e.gate.Release("held")
	require.NoError(t, <-held)
	<-e.gate.Exited()
	require.NoError(t, addOne(ctx, flood, "new-0"))

	// Alone, the flooder may have more new activations under way.
	quietEpochs(shareClock)
	var dones []<-chan error
	for i := range 3 {
		dones = append(dones, blockOn(ctx, testgrain.NewCounterRef(flood, fmt.Sprint("alone-", i)), fmt.Sprint("alone-", i)))
	}
	for range dones {
		<-e.gate.Entered()
	}
	e.gate.Open()
	for _, done := range dones {
		require.NoError(t, <-done)
	}
	assert.EqualValues(t, 3, e.silo.Stats().Rejected.OverShare)
}

// While two connections are busy, each may have only its share of the
// requests in flight (never fewer than rpc.MinInFlightShare): one more of
// the flooder's is refused with OVERLOADED while the other's calls are
// admitted. Busy alone, it may have up to its own MaxInFlight.
func TestAFlooderOfCallsInFlightGetsItsShareAndTheOtherConnectionIsAdmitted(t *testing.T) {
	const share = rpc.MinInFlightShare
	e, shareClock := startSharedSilo(t, silo.Limits{SharedInFlight: 2 * share, SharedActivations: -1})
	flood, other := e.client(client.Options{}), e.client(client.Options{})
	ctx := context.Background()
	otherRef := testgrain.NewCounterRef(other, "other")
	_, err := otherRef.Add(ctx, &testgrain.AddRequest{Delta: 1})
	require.NoError(t, err)

	var dones []<-chan error
	for i := range share {
		dones = append(dones, blockOn(ctx, testgrain.NewCounterRef(flood, fmt.Sprint("k", i)), fmt.Sprint("t", i)))
	}
	for range dones {
		<-e.gate.Entered()
	}
	_, err = testgrain.NewCounterRef(flood, "one-more").Get(ctx, &testgrain.GetRequest{})
	require.ErrorIs(t, err, proxy.ErrOverloaded)
	assert.Contains(t, err.Error(), fmt.Sprintf("%d calls in flight for this client, its share while 2 clients are busy", share))
	for i := range 5 {
		r, err := otherRef.Add(ctx, &testgrain.AddRequest{Delta: 1})
		require.NoError(t, err, "the other connection's call %d", i)
		assert.EqualValues(t, i+2, r.Value)
	}
	assert.EqualValues(t, 1, e.silo.Stats().Gateway.Overloaded)

	// Alone, the flooder may have more in flight.
	quietEpochs(shareClock)
	dones = append(dones, blockOn(ctx, testgrain.NewCounterRef(flood, "alone"), "alone"))
	require.Equal(t, "alone", <-e.gate.Entered())
	e.gate.Open()
	for _, done := range dones {
		require.NoError(t, <-done)
	}
	assert.EqualValues(t, 1, e.silo.Stats().Gateway.Overloaded)
}

// The connections of one credential are one client to the shares: a
// flooder that opens more connections under its token gets no more of the
// silo than with one. Two of its connections and another client busy make
// two clients, not three, and the flooder's second connection waits on the
// share its first holds.
func TestTheConnectionsOfOneCredentialShareOneClientsShare(t *testing.T) {
	otherToken := client.Token{Name: "checkout", Secret: []byte("the checkout client's token, 32b")}
	e, _ := startSharedSilo(t, silo.Limits{SharedActivations: 2, SharedInFlight: 2 * rpc.MinInFlightShare},
		silo.ClientToken{Name: trustToken.Name, Secret: trustToken.Secret}, silo.ClientToken{Name: otherToken.Name, Secret: otherToken.Secret})
	flood1, flood2 := e.client(client.Options{Token: &trustToken}), e.client(client.Options{Token: &trustToken})
	other := e.client(client.Options{Token: &otherToken})
	ctx := context.Background()
	require.NoError(t, addOne(ctx, flood1, "active"))
	require.NoError(t, addOne(ctx, flood2, "active"))
	require.NoError(t, addOne(ctx, other, "other-active"))

	held := blockOn(ctx, testgrain.NewCounterRef(flood1, "new-held"), "held")
	require.Equal(t, "held", <-e.gate.Entered())
	err := addOne(ctx, flood2, "new-on-the-second-connection")
	require.ErrorIs(t, err, proxy.ErrOverloaded, "the first connection holds the client's share")
	assert.Contains(t, err.Error(), "1 new activations under way for this client, its share while 2 clients are busy")
	require.NoError(t, addOne(ctx, other, "other-new"), "the other client has a share of its own")

	// In flight, the two connections together have one share too.
	e.gate.Release("held")
	require.NoError(t, <-held)
	<-e.gate.Exited()
	var dones []<-chan error
	for i := range rpc.MinInFlightShare {
		c := flood1
		if i%2 == 1 {
			c = flood2
		}
		dones = append(dones, blockOn(ctx, testgrain.NewCounterRef(c, "active"), fmt.Sprint("t", i)))
	}
	// Block turns on one grain run one at a time: the first entered holds
	// the rest queued, in flight.
	<-e.gate.Entered()
	eventually(t, func() bool { return e.silo.Stats().Gateway.InFlight == rpc.MinInFlightShare }, "all the flooder's calls are in flight")
	_, err = testgrain.NewCounterRef(flood2, "active").Get(ctx, &testgrain.GetRequest{})
	require.ErrorIs(t, err, proxy.ErrOverloaded)
	assert.Contains(t, err.Error(), fmt.Sprintf("%d calls in flight for this client", rpc.MinInFlightShare))
	require.NoError(t, addOne(ctx, other, "other-active"), "the other client's call is admitted")
	e.gate.Open()
	for _, done := range dones {
		require.NoError(t, <-done)
	}
}
