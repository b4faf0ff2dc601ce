package silo_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/silo"
)

// The handshake deadline and the read rule default to the transport's, and
// Validate reports a negative deadline or window; a negative rate is how
// the rule is turned off.
func TestTheTimeRulesOfConnectionsDefaultAndValidate(t *testing.T) {
	var o silo.Options
	o.EnsureDefaults()
	assert.Equal(t, transport.DefaultHandshakeTimeout, o.Limits.HandshakeTimeout)
	assert.Equal(t, transport.DefaultMinReadRate, o.Limits.MinReadRate)
	assert.Equal(t, transport.DefaultReadRateWindow, o.Limits.ReadRateWindow)

	_, err := silo.New(silo.Options{Limits: silo.Limits{HandshakeTimeout: -time.Second, ReadRateWindow: -time.Second}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Limits.HandshakeTimeout")
	assert.Contains(t, err.Error(), "Limits.ReadRateWindow")
	_, err = silo.New(silo.Options{Limits: silo.Limits{MinReadRate: -1}})
	assert.NoError(t, err)
}
