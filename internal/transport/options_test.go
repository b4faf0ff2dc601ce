package transport

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOptionsDefaults(t *testing.T) {
	var o Options
	o.EnsureDefaults()
	assert.Equal(t, Options{
		MaxFrameSize:     4 << 20,
		ReadBufferSize:   64 << 10,
		WriteBufferSize:  64 << 10,
		MaxPendingBytes:  16 << 20,
		HandshakeTimeout: 5 * time.Second,
		MinReadRate:      1024,
		ReadRateWindow:   10 * time.Second,
		Listener: ListenerOptions{
			MaxConnections:          10_000,
			MaxConnectionsPerSource: 1024,
			LogBurst:                10,
			LogInterval:             time.Second,
		},
	}, o)
	assert.NoError(t, o.Validate())

	// Turning a rule off is a negative value, which EnsureDefaults keeps.
	off := Options{MinReadRate: -1, Listener: ListenerOptions{MaxConnections: -1}}
	off.EnsureDefaults()
	assert.NoError(t, off.Validate())
	assert.Equal(t, -1, off.MinReadRate)
	assert.Equal(t, -1, off.Listener.MaxConnections)
}

func TestOptionsValidateReportsEveryProblem(t *testing.T) {
	bad := Options{
		MaxFrameSize:      MaxFrameSizeLimit + 1,
		ReadBufferSize:    10,
		WriteBufferSize:   -1,
		MaxPendingBytes:   -1,
		WriteTimeout:      -1,
		Identity:          Identity{Role: 7, SiloID: string(make([]byte, MaxIDLength+1)), ClusterID: "\xff"},
		ClusterSecret:     []byte("short"),
		HandshakeTimeout:  -1,
		KeepaliveInterval: time.Second,
		KeepaliveTimeout:  time.Second, // not above the interval
		ReadRateWindow:    -1,
		Listener: ListenerOptions{
			AcceptRoles: []Role{RoleClient, 0},
			IdleTimeout: -1,
			LogBurst:    -1,
			LogInterval: -1,
		},
	}
	err := bad.Validate()
	require.ErrorIs(t, err, ErrInvalidOptions)
	joined, ok := err.(interface{ Unwrap() []error })
	require.True(t, ok)
	// 16 problems set above (the keepalive pair is one), plus MinReadRate and
	// MaxConnections left zero.
	assert.Len(t, joined.Unwrap(), 18, "every problem is reported: %v", err)
	for _, e := range joined.Unwrap() {
		assert.ErrorIs(t, e, ErrInvalidOptions)
	}
}

func TestOptionsPrepareSetsTheRoleOfEachSide(t *testing.T) {
	var dialler, listener Options
	require.NoError(t, dialler.prepare(false))
	require.NoError(t, listener.prepare(true))
	assert.Equal(t, RoleClient, dialler.Identity.Role)
	assert.Equal(t, RoleSilo, listener.Identity.Role)

	clientListener := Options{Identity: Identity{Role: RoleClient}}
	assert.ErrorIs(t, clientListener.prepare(true), ErrInvalidOptions, "a listener is a silo")
	noCert := Options{TLS: &tls.Config{}}
	assert.ErrorIs(t, noCert.prepare(true), ErrInvalidOptions, "a TLS listener needs a certificate")
	assert.NoError(t, noCert.prepare(false), "a TLS dialler does not")
}
