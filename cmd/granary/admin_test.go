package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startServing runs the binary's main loop with args and returns its
// startup line; the run stops when the test ends.
func startServing(t *testing.T, args ...string) string {
	t.Helper()
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { _ = outR.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-gateway", "127.0.0.1:0", "-name", "admin-test"}, args...), outW, devNull(t))
		_ = outW.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("the silo did not stop")
		}
	})
	lines := bufio.NewScanner(outR)
	require.True(t, lines.Scan(), "a startup line")
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	return lines.Text()
}

// addressAfter returns the address that follows label in a startup line.
func addressAfter(t *testing.T, line, label string) string {
	t.Helper()
	_, rest, ok := strings.Cut(line, label)
	require.True(t, ok, "%q in %q", label, line)
	return strings.TrimSuffix(strings.Fields(rest)[0], ",")
}

func statusOf(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// The profiles are off the public HTTP port; the admin port, off unless
// -admin names one, serves them, while /metrics and the probes stay on
// the public port.
func TestTheProfilesLiveOnTheAdminPortOnly(t *testing.T) {
	t.Run("by default there is no admin port", func(t *testing.T) {
		line := startServing(t, "-http", "127.0.0.1:0")
		assert.NotContains(t, line, "admin on")
		public := "http://" + addressAfter(t, line, "HTTP on ")
		assert.Equal(t, http.StatusNotFound, statusOf(t, public+"/debug/pprof/"))
		assert.Equal(t, http.StatusOK, statusOf(t, public+"/metrics"))
	})
	t.Run("with -admin", func(t *testing.T) {
		line := startServing(t, "-http", "127.0.0.1:0", "-admin", "127.0.0.1:0")
		public := "http://" + addressAfter(t, line, "HTTP on ")
		admin := "http://" + addressAfter(t, line, "admin on ")
		assert.Equal(t, http.StatusOK, statusOf(t, admin+"/debug/pprof/"))
		assert.Equal(t, http.StatusNotFound, statusOf(t, public+"/debug/pprof/"))
		for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
			assert.Equal(t, http.StatusOK, statusOf(t, public+path), path)
			assert.Equal(t, http.StatusNotFound, statusOf(t, admin+path), path)
		}
	})
}

func TestAdminAddressIsChecked(t *testing.T) {
	_, err := parseConfig([]string{"-admin", "loopback"}, devNull(t))
	assert.ErrorContains(t, err, `-admin "loopback"`)
}
