package silohost_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/silohost"
	"github.com/granary-go/granary/proxy"
)

type hostHooks = silohost.Hooks

type fakeSilo struct {
	hostHooks
	h *host.Host
}

func TestHostIsWhatItsSiloSays(t *testing.T) {
	s := &fakeSilo{}
	assert.Nil(t, silohost.Host(s), "hooks never set")
	silohost.Init(&s.hostHooks, silohost.Funcs{Host: func() *host.Host { return s.h }})
	assert.Nil(t, silohost.Host(s), "no host yet, as before Start")
	s.h = new(host.Host)
	assert.Same(t, s.h, silohost.Host(s))
	assert.Nil(t, silohost.Host(&fakeSilo{}), "hooks belong to one silo")
}

func TestSystemServicesNeedHooks(t *testing.T) {
	s := &fakeSilo{}
	require.Error(t, silohost.ServeSystem(s, "t", func(*host.Request) {}))
	_, err := silohost.PeerCaller(context.Background(), s, "peer")
	require.Error(t, err)

	var served []string
	silohost.Init(&s.hostHooks, silohost.Funcs{
		ServeSystem: func(serviceType string, _ func(*host.Request)) error {
			served = append(served, serviceType)
			return nil
		},
		PeerCaller: func(_ context.Context, peer string) (proxy.Caller, error) { return nil, nil },
	})
	require.NoError(t, silohost.ServeSystem(s, "stats", func(*host.Request) {}))
	assert.Equal(t, []string{"stats"}, served)
	_, err = silohost.PeerCaller(context.Background(), s, "peer")
	require.NoError(t, err)
}
