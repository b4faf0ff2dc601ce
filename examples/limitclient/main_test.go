package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/silo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The program takes permits through a gateway until the silo's default
// window is spent, and says why the rest are refused.
func TestAcquiresThroughAGatewayUntilTheWindowIsSpent(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := silo.New(silo.Options{GatewayAddress: "127.0.0.1:0"}, silo.WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, ratelimit.Register(s, ratelimit.Defaults{
		FixedWindow: ratelimit.FixedWindowOptions{PermitLimit: 2, Window: time.Hour},
	}))
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() { assert.NoError(t, s.Stop(context.Background())) })

	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-gateway", s.GatewayAddr().String(), "-key", "login:ada", "-n", "3"}, &out, &errOut))
	assert.Equal(t, "acquired\nacquired\nrejected: Rate limit exceeded\n", out.String())
	assert.Empty(t, errOut.String())
}

func TestRefusesToRunWithoutAKey(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"-n", "2"}, &out, &errOut)
	require.Error(t, err)
	assert.Empty(t, out.String())
	assert.Contains(t, errOut.String(), "-key", "the usage names the flags")
}

// A gateway that does not answer is an error, not a silent exit.
func TestFailsWhenNoGatewayAnswers(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := l.Addr().String()
	require.NoError(t, l.Close())
	var out, errOut bytes.Buffer
	err = run(context.Background(), []string{"-gateway", dead, "-key", "k", "-timeout", "2s"}, &out, &errOut)
	require.Error(t, err)
	assert.Empty(t, out.String())
}
