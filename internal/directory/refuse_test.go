package directory

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/ring"
	"github.com/granary-go/granary/proxy"
)

// registerErr registers id from s and returns the directory's error.
func registerErr(s *fakeSilo, id actor.GrainID) error {
	done := make(chan error, 1)
	s.dir.Register(id, func(_ string, err error) { done <- err })
	return <-done
}

// grainOwnedBy returns a grain whose directory entry silo owner keeps.
func grainOwnedBy(t *testing.T, c *fakeCluster, owner string) actor.GrainID {
	t.Helper()
	var silos []ring.Silo
	for _, s := range c.all() {
		silos = append(silos, ring.Silo{ID: s.id, Generation: s.gen})
	}
	r := ring.New(silos, 0)
	for i := range 1000 {
		id := actor.GrainID{Type: "counter", Key: fmt.Sprint(i)}
		if o, ok := r.Owner(ring.Hash(id)); ok && o.ID == owner {
			return id
		}
	}
	t.Fatalf("no grain of 1000 is owned by %s", owner)
	return actor.GrainID{}
}

func TestARefusingDirectoryRecordsNoNewActivationUntilToldOtherwise(t *testing.T) {
	c := newFakeCluster(t, "a", "b", "c")
	a, b := c.silos["a"], c.silos["b"]
	fenced := fmt.Errorf("%w: fenced", proxy.ErrUnavailable)
	b.dir.Refuse(fenced)

	own, remote := grainOwnedBy(t, c, "b"), grainOwnedBy(t, c, "a")
	assert.ErrorIs(t, registerErr(b, own), fenced, "its own activation, in its own partition")
	assert.ErrorIs(t, registerErr(b, remote), fenced, "its own activation, in another silo's partition")
	err := registerErr(a, own)
	require.Error(t, err, "another silo's activation, in its partition")
	assert.True(t, errors.Is(err, proxy.ErrUnavailable), "%v", err)
	assert.Equal(t, 0, b.dir.Stats().Partition, "nothing was recorded")

	_, found, err := a.dir.Find(context.Background(), own)
	require.NoError(t, err, "lookups go on")
	assert.False(t, found)

	b.dir.Refuse(nil)
	assert.Equal(t, "", register(t, a, own), "registrations are accepted again")
	assert.Equal(t, "a", register(t, b, own))
}
