package silo_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/silo"
)

// Cancel frames alone are no use of a connection: a client that sends
// nothing else is closed once idle for the limit, however often it sends
// them.
func TestCancelFramesAloneDoNotKeepAConnectionOpen(t *testing.T) {
	e := startSilo(t, envConfig{opts: silo.Options{Limits: silo.Limits{IdleTimeout: 150 * time.Millisecond}}})
	raw := dialRaw(t, e)
	var closed atomic.Bool
	go func() {
		for range raw.replies {
		}
		closed.Store(true)
	}()
	id := uint64(0)
	require.Eventually(t, func() bool {
		id++
		_ = raw.conn.Send(&envFrame{wire.Envelope{Kind: wire.KindCancel, CallID: id}})
		return closed.Load()
	}, 10*time.Second, 20*time.Millisecond, "the silo closes a connection that only cancels")
}
