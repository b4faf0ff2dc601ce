package silo_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/silo"
)

// A request whose grain key is longer than the silo takes is answered
// BAD_REQUEST, saying why, and activates nothing; the connection carries
// on, and a key at the limit is served.
func TestLongGrainKeyIsABadRequest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int
		long  int
	}{
		{"default", 0, 4<<10 + 1},
		{"configured", 100, 101},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startSilo(t, envConfig{opts: silo.Options{Limits: silo.Limits{MaxKeyLength: tc.limit}}})
			raw := dialRaw(t, e)
			raw.send(t, addRequest(t, 1, strings.Repeat("k", tc.long), 1, false))
			reply := <-raw.replies
			require.Equal(t, uint64(1), reply.CallID)
			assert.Equal(t, wire.StatusBadRequest, reply.Status)
			assert.Contains(t, reply.Error, "grain key of")
			assert.Zero(t, e.silo.Stats().Host.Activations, "nothing activated")

			raw.send(t, addRequest(t, 2, strings.Repeat("k", tc.long-1), 1, false))
			reply = <-raw.replies
			require.Equal(t, uint64(2), reply.CallID)
			assert.Equal(t, wire.StatusOK, reply.Status, "a key at the limit is served")
		})
	}
}
