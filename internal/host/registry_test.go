package host

import (
	"context"

	"testing"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The host's actor system keeps its processes in a small registry, and
// the processes the system registered for itself before the swap are
// still found in it.
func TestRegistryIsCompactAndKeepsSystemProcesses(t *testing.T) {
	f := newFixture(t, HostOptions{})
	reg := f.host.system.ProcessRegistry
	require.Len(t, reg.LocalPIDs.LocalPIDs, registryBuckets)

	for _, id := range []string{"eventstream", "deadletter"} {
		p, ok := reg.GetLocal(id)
		assert.True(t, ok, "%s is still registered", id)
		assert.NotNil(t, p, id)
	}
	// Activations register and unregister in it as before.
	r := <-f.send(context.Background(), "a", mAdd, 1, 0)
	require.NoError(t, r.err)
	found := 0
	for _, b := range reg.LocalPIDs.LocalPIDs {
		b.IterCb(func(_ string, p any) {
			if _, ok := p.(*protoactor.ActorProcess); ok {
				found++
			}
		})
	}
	assert.Equal(t, 1, found, "the activation's process")
}
