package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

var (
	userToken  = client.Token{Name: "checkout", Secret: []byte("the checkout service's own token")}
	adminToken = client.Token{Name: "ops", Secret: []byte("the operators' token, 32 bytes!!")}
)

// gatewaySilo starts a silo whose gateway knows a token without rights and
// one with the admin right (or no token at all), with the limiters.
func gatewaySilo(t *testing.T, tokens bool) *silo.Silo {
	t.Helper()
	o := silo.Options{Name: "rights", GatewayAddress: "127.0.0.1:0"}
	if tokens {
		o.Security.ClientTokens = []silo.ClientToken{
			{Name: userToken.Name, Secret: userToken.Secret},
			{Name: adminToken.Name, Secret: adminToken.Secret, Rights: actor.RightAdmin},
		}
	}
	s, err := silo.New(o, silo.WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, ratelimit.Register(s, ratelimit.Defaults{}))
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, s.Stop(ctx))
	})
	return s
}

func gatewayClient(t *testing.T, s *silo.Silo, token *client.Token) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{Gateways: []string{s.GatewayAddr().String()}, Token: token}, client.WithLogger(quiet))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A client without the admin right cannot change a limiter through the
// gateway, whichever change it tries: each refusal names the right, is
// counted, and leaves the limiter as it was. A client with the right
// can; acquisitions under the configured options need no right.
func TestChangingALimiterThroughTheGatewayNeedsTheAdminRight(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tokens bool
		token  *client.Token
	}{
		{"a client of a silo without tokens", false, nil},
		{"a client whose token has no rights", true, &userToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := gatewaySilo(t, tc.tokens)
			ctx := context.Background()
			ref := ratelimitpb.NewFixedWindowLimiterRef(gatewayClient(t, s, tc.token), "checkout")
			before, err := ref.Configuration(ctx, &ratelimitpb.ConfigurationRequest{})
			require.NoError(t, err, "reading the configuration is no change")
			other := &ratelimitpb.FixedWindowOptions{PermitLimit: before.GetPermitLimit() + 1, WindowNanos: before.GetWindowNanos()}

			changes := map[string]func() error{
				"Configure": func() error {
					_, err := ref.Configure(ctx, &ratelimitpb.FixedWindowOptions{PermitLimit: 1, WindowNanos: int64(time.Second)})
					return err
				},
				"Reset":        func() error { _, err := ref.Reset(ctx, &ratelimitpb.ResetRequest{}); return err },
				"DeleteState":  func() error { _, err := ref.DeleteState(ctx, &ratelimitpb.DeleteStateRequest{}); return err },
				"TryReplenish": func() error { _, err := ref.TryReplenish(ctx, &ratelimitpb.TryReplenishRequest{}); return err },
				// Acquisitions that name other options than the limiter's
				// would change them: the grain asks for the right itself.
				"AcquireAndCheckConfiguration with other options": func() error {
					_, err := ref.AcquireAndCheckConfiguration(ctx, &ratelimitpb.FixedWindowAcquireRequest{Permits: 1, Options: other})
					return err
				},
				"TryAcquire with other options": func() error {
					_, err := ref.TryAcquire(ctx, &ratelimitpb.FixedWindowAcquireRequest{Permits: 1, Options: other})
					return err
				},
			}
			for name, change := range changes {
				err := change()
				require.ErrorIs(t, err, proxy.ErrPermissionDenied, name)
				assert.ErrorContains(t, err, "admin", "%s: the error names the missing right", name)
			}
			assert.EqualValues(t, len(changes), s.Stats().Rejected.PermissionDenied)

			after, err := ref.Configuration(ctx, &ratelimitpb.ConfigurationRequest{})
			require.NoError(t, err)
			assert.Equal(t, before.GetPermitLimit(), after.GetPermitLimit(), "nothing changed")
			lease, err := ref.Acquire(ctx, &ratelimitpb.AcquireRequest{Permits: 1})
			require.NoError(t, err, "acquiring under the configured options needs no right")
			assert.True(t, lease.GetAcquired())
			lease, err = ref.AcquireAndCheckConfiguration(ctx, &ratelimitpb.FixedWindowAcquireRequest{Permits: 1, Options: before})
			require.NoError(t, err, "naming the options the limiter has needs no right")
			assert.True(t, lease.GetAcquired())
		})
	}
	t.Run("a client whose token has the admin right", func(t *testing.T) {
		s := gatewaySilo(t, true)
		ctx := context.Background()
		ref := ratelimitpb.NewFixedWindowLimiterRef(gatewayClient(t, s, &adminToken), "checkout")
		_, err := ref.Configure(ctx, &ratelimitpb.FixedWindowOptions{PermitLimit: 1, WindowNanos: int64(time.Hour)})
		require.NoError(t, err)
		got, err := ref.Configuration(ctx, &ratelimitpb.ConfigurationRequest{})
		require.NoError(t, err)
		assert.EqualValues(t, 1, got.GetPermitLimit())
		_, err = ref.Reset(ctx, &ratelimitpb.ResetRequest{})
		require.NoError(t, err)
		assert.Zero(t, s.Stats().Rejected.PermissionDenied)
	})
}
