package testcluster_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/examples/counter"
	"github.com/granary-go/granary/internal/directory/directorypb"
	"github.com/granary-go/granary/testcluster"
)

// A client that addresses the grain directory through a gateway, as a
// hostile one could (the service's type is no secret), reaches nothing:
// every method answers that there is no such grain type, and a grain it
// tried to move, unregister or deactivate stays where it was, with its
// state.
func TestClientsCannotReachTheGrainDirectory(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Silos: 2, OnlyFirstGateway: true, Register: registerCounter})
	cl := c.NewClient(client.Options{})
	ctx := context.Background()
	victim := counter.NewCounterRef(cl, "victim")
	_, err := victim.Add(ctx, &counter.AddRequest{Delta: 1}, c.PlaceOn(1))
	require.NoError(t, err)

	id := victim.GrainID()
	grain := &directorypb.GrainID{Type: id.Type, Key: id.Key}
	elsewhere := &directorypb.Activation{Silo: testcluster.Name(0), Generation: 1}
	dir := directorypb.NewDirectoryRef(cl, "")
	attempts := map[string]func() error{
		"Lookup": func() error { _, err := dir.Lookup(ctx, &directorypb.LookupRequest{Grain: grain}); return err },
		"Register": func() error {
			_, err := dir.Register(ctx, &directorypb.RegisterRequest{Grain: grain, Activation: elsewhere})
			return err
		},
		"Handoff": func() error {
			_, err := dir.Handoff(ctx, &directorypb.HandoffRequest{Entries: []*directorypb.Entry{{Grain: grain, Activation: elsewhere}}})
			return err
		},
		"Unregister": func() error {
			_, err := dir.Unregister(ctx, &directorypb.UnregisterRequest{Grain: grain, Activation: elsewhere})
			return err
		},
		"Deactivate": func() error {
			_, err := dir.Deactivate(ctx, &directorypb.DeactivateRequest{Grain: grain, Activation: elsewhere})
			return err
		},
		"Hosted": func() error { _, err := dir.Hosted(ctx, &directorypb.HostedRequest{}); return err },
	}
	for name, attempt := range attempts {
		assert.ErrorIs(t, attempt(), actor.ErrUnknownGrainType, "%s from a client", name)
	}

	assertLivesOn(t, c, id, 1, "the grain stayed on its silo")
	assert.Equal(t, 1, c.Activations(id))
	r, err := victim.Add(ctx, &counter.AddRequest{Delta: 1})
	require.NoError(t, err)
	assert.EqualValues(t, 2, r.Value, "with its state")
}
