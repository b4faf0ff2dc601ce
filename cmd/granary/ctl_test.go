package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ctl runs granary ctl in the test's process and returns what it printed.
func ctl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := runCtl(context.Background(), args, &out, &errOut)
	return out.String(), err
}

// One silo process with client tokens, an admin port and a named
// configuration; granary ctl asks it what an operator would.
func TestCtlShowsAndChangesARunningSilo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	appSecret, opsSecret := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
	tokens := writeFile(t, "tokens", "app:none:"+appSecret+"\nops:admin:"+opsSecret+"\n")
	config := writeFile(t, "granary.yaml", "ratelimit:\n  configurations:\n    login:\n      fixed-window: {permit-limit: 5, window: 1h}\n")
	httpAddr, adminAddr := freeAddr(t), freeAddr(t)
	p, _ := startProcess(t, bin, "ops-silo", "", "-config", config, "-http", httpAddr, "-admin", adminAddr, "-client-tokens-file", tokens)
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 20*time.Millisecond)
	for range 7 {
		acquireThrough(t, httpAddr, `{"algorithm":"ALGORITHM_FIXED_WINDOW","key":"alice","config":"login"}`)
	}
	ports := []string{"-http", "http://" + httpAddr, "-admin", "http://" + adminAddr}

	out, err := ctl(t, append(ports, "-o", "json", "members")...)
	require.NoError(t, err)
	var members clusterAnswer
	require.NoError(t, json.Unmarshal([]byte(out), &members))
	var want clusterAnswer
	require.NoError(t, getJSON("http://"+httpAddr+"/cluster", &want))
	assert.Equal(t, want.Members[0].Name, members.Members[0].Name)
	assert.Equal(t, want.Members[0].Generation, members.Members[0].Generation)
	out, err = ctl(t, append(ports, "members")...)
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^SILO +STATE +STATUS +GENERATION`, out)
	assert.Regexp(t, `(?m)^ops-silo \* +active +active +`+want.Members[0].Generation, out)

	out, err = ctl(t, append(ports, "-o", "json", "limiter", "stats", "fixed-window", "alice")...)
	require.NoError(t, err)
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	assert.Equal(t, "2", fmt.Sprint(st["totalFailedLeases"]), "%s", out)
	assert.Equal(t, "5", fmt.Sprint(st["totalSuccessfulLeases"]), "%s", out)
	out, err = ctl(t, append(ports, "limiter", "stats", "fixed-window", "alice")...)
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^0 +0 +5 +2 +0 +0\s*$`, out, "available, queued, succeeded, failed, leases, waiting")

	out, err = ctl(t, append(ports, "limiter", "config", "fixed-window", "alice")...)
	require.NoError(t, err)
	assert.Contains(t, out, `"permitLimit": "5"`)

	out, err = ctl(t, append(ports, "locate", "granary.ratelimit.FixedWindowLimiter", "alice")...)
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^granary.ratelimit.FixedWindowLimiter +alice +ops-silo\s*$`, out)
	out, err = ctl(t, append(ports, "locate", "granary.ratelimit.FixedWindowLimiter", "nobody")...)
	require.NoError(t, err)
	assert.Contains(t, out, "(no activation)")

	// Changes through the gateway need the admin right.
	gateway := []string{"-gateway", p.gateway}
	_, err = ctl(t, append(append(ports, gateway...), "-token-file", writeFile(t, "app.token", "app:none:"+appSecret), "limiter", "reset", "fixed-window", "alice")...)
	require.Error(t, err, "a token without the admin right cannot reset")
	stats := func() string {
		out, err := ctl(t, append(ports, "-o", "json", "limiter", "stats", "fixed-window", "alice")...)
		require.NoError(t, err)
		var st map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &st))
		return fmt.Sprint(st["availablePermits"])
	}
	require.Equal(t, "<nil>", stats(), "nothing available: the refused reset changed nothing")
	_, err = ctl(t, append(append(ports, gateway...), "-token-file", writeFile(t, "ops.token", "ops:admin:"+opsSecret), "limiter", "reset", "fixed-window", "alice")...)
	require.NoError(t, err)
	assert.Equal(t, "5", stats(), "the reset gave the quota back")

	// And through the admin port, with the token as a bearer.
	_, err = ctl(t, append(ports, "limiter", "configure", "fixed-window", "bob", "login")...)
	require.ErrorContains(t, err, "-token-file", "no change without a token")
	_, err = ctl(t, append(ports, "-token-file", writeFile(t, "app.token", "app:none:"+appSecret), "limiter", "configure", "fixed-window", "bob", "login")...)
	require.ErrorContains(t, err, "requires the admin right", "the admin port refuses a token without the right")
	ports = append(ports, "-token-file", writeFile(t, "ops.token", "ops:admin:"+opsSecret))
	out, err = ctl(t, append(ports, "limiter", "configure", "fixed-window", "bob", "login")...)
	require.NoError(t, err, out)
	out, err = ctl(t, append(ports, "limiter", "config", "fixed-window", "bob")...)
	require.NoError(t, err)
	assert.Contains(t, out, `"permitLimit": "5"`)
	_, err = ctl(t, append(ports, "limiter", "delete", "fixed-window", "bob")...)
	require.NoError(t, err)

	// The public port refuses the changes the admin port makes.
	_, err = ctl(t, "-admin", "http://"+httpAddr, "limiter", "reset", "fixed-window", "alice")
	require.Error(t, err)
}

func TestCtlRefusesBadUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"nothing"}, {"members", "extra"}, {"limiter", "stats", "leaky-bucket", "k"}, {"limiter", "explode", "fixed-window", "k"}, {"locate", "only-type"}} {
		_, err := ctl(t, args...)
		assert.ErrorIs(t, err, errCtlUsage, "%q", args)
	}
	_, err := ctl(t, "-o", "yaml", "members")
	assert.ErrorContains(t, err, "want table or json")
}
