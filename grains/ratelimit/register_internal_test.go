package ratelimit

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/proxy"
)

// countingRegistrar accepts every grain type.
type countingRegistrar struct {
	n   int
	pad [64]byte // keeps it out of the tiny allocator, whose blocks weak pointers may outlive
}

func (r *countingRegistrar) RegisterGrain(*proxy.ServiceDesc, func(actor.GrainID) any) error {
	r.n++
	return nil
}

func TestRegisterForgetsRegistrarsThatWereCollected(t *testing.T) {
	r := &countingRegistrar{}
	require.NoError(t, Register(r, Defaults{}))
	require.NoError(t, Register(r, Defaults{}))
	require.Equal(t, 4, r.n, "four grain types, registered once")
	key := registrarKey(r)
	registrations.Lock()
	_, ok := registrations.m[key]
	registrations.Unlock()
	require.True(t, ok)
	r = nil
	require.Eventually(t, func() bool {
		runtime.GC()
		registrations.Lock()
		defer registrations.Unlock()
		registrations.prune()
		_, ok := registrations.m[key]
		return !ok
	}, 10*time.Second, time.Millisecond, "a registrar nobody holds is forgotten")
}
