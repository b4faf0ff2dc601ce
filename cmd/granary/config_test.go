package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// unsetenv unsets an environment variable for the rest of the test.
func unsetenv(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "") // restored when the test ends
	require.NoError(t, os.Unsetenv(key))
}

func devNull(t *testing.T) *os.File {
	t.Helper()
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

const yamlConfig = `
silo:
  name: from-file
  gateway: 127.0.0.1:0
  seeds: [127.0.0.1:7001, 127.0.0.1:7002]
  silo-address: 127.0.0.1:0
  stop-timeout: 5s
ratelimit:
  defaults:
    token-bucket: {token-limit: 100, tokens-per-period: 10}
    concurrency: {permit-limit: 3, queue-limit: 2, queue-order: newest-first}
  configurations:
    api:
      fixed-window: {permit-limit: 50, window: 2s}
      concurrency: {permit-limit: 4}
    Search:
      sliding-window: {permit-limit: 10, window: 1s, segments-per-window: 4, manual-replenishment: true}
`

// The config file sets the silo's settings under the flags' names, the
// limiters' defaults (what it leaves out takes the library defaults) and
// named configurations.
func TestConfigFileSetsSiloAndLimiters(t *testing.T) {
	path := writeFile(t, "granary.yaml", yamlConfig)
	secret := writeFile(t, "cluster.secret", "a cluster secret of 32 bytes!!!!")
	cfg, err := parseConfig([]string{"-config", path, "-secret-file", secret}, devNull(t))
	require.NoError(t, err)
	assert.Equal(t, "from-file", cfg.silo.Name)
	assert.Equal(t, "127.0.0.1:0", cfg.silo.GatewayAddress)
	assert.True(t, cfg.silo.Cluster.Enabled)
	assert.Equal(t, []string{"127.0.0.1:7001", "127.0.0.1:7002"}, cfg.silo.Cluster.Seeds, "a list is the flag's comma-separated value")
	assert.Equal(t, 5*time.Second, cfg.flags.stopTimeout)

	d := cfg.limits.defaults
	assert.Equal(t, ratelimit.TokenBucketOptions{TokenLimit: 100, TokensPerPeriod: 10, ReplenishmentPeriod: ratelimit.DefaultReplenishmentPeriod}, d.TokenBucket)
	assert.Equal(t, ratelimit.ConcurrencyOptions{PermitLimit: 3, QueueLimit: 2, QueueOrder: ratelimit.NewestFirst}, d.Concurrency)
	assert.EqualValues(t, ratelimit.DefaultPermitLimit, d.FixedWindow.PermitLimit, "left out: the library default")

	fw, ok := ratelimit.Lookup[ratelimit.FixedWindowOptions](cfg.limits.configs, "API")
	require.True(t, ok, "names compare case-insensitively")
	assert.Equal(t, ratelimit.FixedWindowOptions{PermitLimit: 50, Window: 2 * time.Second}, fw)
	_, ok = ratelimit.Lookup[ratelimit.ConcurrencyOptions](cfg.limits.configs, "api")
	assert.True(t, ok, "one name, one configuration per algorithm")
	sw, ok := ratelimit.Lookup[ratelimit.SlidingWindowOptions](cfg.limits.configs, "search")
	require.True(t, ok)
	assert.Equal(t, ratelimit.SlidingWindowOptions{PermitLimit: 10, Window: time.Second, SegmentsPerWindow: 4, ManualReplenishment: true}, sw)
}

// JSON is read as well: YAML is a superset of it.
func TestConfigFileMayBeJSON(t *testing.T) {
	path := writeFile(t, "granary.json", `{"silo": {"name": "json", "gateway": "none", "timings": "fast"},
		"ratelimit": {"configurations": {"api": {"token-bucket": {"token-limit": 5, "tokens-per-period": 1, "replenishment-period": "100ms"}}}}}`)
	cfg, err := parseConfig([]string{"-config", path}, devNull(t))
	require.NoError(t, err)
	assert.Equal(t, "json", cfg.silo.Name)
	assert.True(t, cfg.silo.DisableGateway)
	tb, ok := ratelimit.Lookup[ratelimit.TokenBucketOptions](cfg.limits.configs, "api")
	require.True(t, ok)
	assert.Equal(t, 100*time.Millisecond, tb.ReplenishmentPeriod)
}

// A setting comes from the command line, else the environment, else the
// config file, else its default; $GRANARY_CONFIG names the file.
func TestSettingsPrecedence(t *testing.T) {
	path := writeFile(t, "granary.yaml", "silo: {name: file, gateway: '127.0.0.1:0'}\n")
	name := func(args ...string) string {
		t.Helper()
		cfg, err := parseConfig(args, devNull(t))
		require.NoError(t, err)
		return cfg.silo.Name
	}
	t.Setenv("GRANARY_NAME", "env")
	assert.Equal(t, "flag", name("-config", path, "-name", "flag"), "the command line wins")
	assert.Equal(t, "env", name("-config", path), "then the environment")
	unsetenv(t, "GRANARY_NAME")
	assert.Equal(t, "file", name("-config", path), "then the file")
	t.Setenv(configEnv, path)
	assert.Equal(t, "file", name(), "$GRANARY_CONFIG names the file")
	t.Setenv(configEnv, "")
	assert.NotEqual(t, "file", name(), "no file: the default")
}

// Every problem is reported at once, wherever it comes from: the file's
// syntax, keys and types, the limiters' options, the environment and the
// flags.
func TestConfigProblemsAreAllListed(t *testing.T) {
	path := writeFile(t, "bad.yaml", `
silo:
  nmae: typo
  stop-timeout: soon
  http: localhost
ratelimit:
  defaults:
    fixed-window: {permit-limit: -1, window: 1s}
    concurrency: {windw: 1s}
  configurations:
    api:
      token-bucket: {token-limit: 0, tokens-per-period: 1, replenishment-period: 1s}
    queue:
      concurrency: {permit-limit: 1, queue-order: sideways}
`)
	t.Setenv("GRANARY_TIMINGS", "slow")
	unsetenv(t, "GRANARY_HTTP") // TestMain's, which would win over the file
	_, err := parseConfig([]string{"-config", path, "-gateway", "no-port"}, devNull(t))
	require.ErrorIs(t, err, errConfig)
	for _, want := range []string{
		`queue-order "sideways"`,
		"windw",
		"silo.nmae: no such setting",
		`silo.stop-timeout "soon"`,
		`-http "localhost"`,
		"ratelimit.defaults",
		"PermitLimit",
		"ratelimit.configurations",
		"TokenLimit",
		`-timings "slow"`,
		"GatewayAddress",
	} {
		assert.ErrorContains(t, err, want)
	}
	assert.NotContains(t, err.Error(), "must be positive", "a bad value is reported once, not again as zero")
}

// Nothing in the file is a silent no-op: an empty file sets nothing, a
// missing one fails.
func TestConfigFileEmptyOrMissing(t *testing.T) {
	cfg, err := parseConfig([]string{"-config", writeFile(t, "empty.yaml", "")}, devNull(t))
	require.NoError(t, err)
	assert.EqualValues(t, ratelimit.DefaultTokenLimit, cfg.limits.defaults.TokenBucket.TokenLimit)
	_, err = parseConfig([]string{"-config", filepath.Join(t.TempDir(), "missing.yaml")}, devNull(t))
	assert.ErrorIs(t, err, errConfig)
	assert.ErrorIs(t, err, os.ErrNotExist)
}
