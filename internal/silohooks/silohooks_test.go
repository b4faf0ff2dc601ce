package silohooks_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/silohooks"
)

// A type embeds the hooks under an unexported name, as package silo does.
type hooks = silohooks.Hooks

type fakeSilo struct{ hooks }

var _ silohooks.Silo = (*fakeSilo)(nil)

func TestHooksNeverSetDoNothing(t *testing.T) {
	s := &fakeSilo{}
	silohooks.Kill(s)
	attached, err := silohooks.AttachAcquisitions(s, func() silohooks.Acquisitions { return silohooks.Acquisitions{} })
	require.NoError(t, err)
	assert.False(t, attached)
}

func TestHooksCallWhatTheirSiloSet(t *testing.T) {
	s := &fakeSilo{}
	killed := 0
	var read func() silohooks.Acquisitions
	silohooks.Init(&s.hooks, silohooks.Funcs{
		Kill: func() { killed++ },
		AttachAcquisitions: func(r func() silohooks.Acquisitions) (bool, error) {
			read = r
			return true, nil
		},
	})
	silohooks.Kill(s)
	assert.Equal(t, 1, killed)
	attached, err := silohooks.AttachAcquisitions(s, func() silohooks.Acquisitions { return silohooks.Acquisitions{Granted: 7} })
	require.NoError(t, err)
	assert.True(t, attached)
	require.NotNil(t, read)
	assert.EqualValues(t, 7, read().Granted, "the silo reads what the library handed it")
	other := &fakeSilo{}
	silohooks.Kill(other)
	assert.Equal(t, 1, killed, "hooks belong to one silo")
}
