package envoyrls_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/envoyrls"
)

// TestBadConfigsAreRefusedWithEveryProblem: a configuration with problems
// is refused, and the error names each of them, where it is.
func TestBadConfigsAreRefusedWithEveryProblem(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		want  []string
		lines int // of the error: one a problem, and a line before the decoder's list
	}{
		{"an unknown key and a wrong type", `
domain: a
descriptors:
  - key: k
    rate_limt: {unit: second, requests_per_unit: 1}
  - key: j
    rate_limit: {unit: second, requests_per_unit: -1}
`, []string{"field rate_limt not found", "cannot unmarshal !!int `-1`"}, 3},
		{"the reference's problems", `
domain: a
descriptors:
  - value: no-key
  - key: k
    value: v
    rate_limit: {unit: fortnight, requests_per_unit: 1}
  - key: k
    value: v
  - key: u
    rate_limit: {unlimited: true, unit: second}
  - key: r
    rate_limit:
      name: me
      unit: second
      requests_per_unit: 1
      replaces: [{name: me}, {name: ""}]
  - key: s
    value: plain
    share_threshold: true
  - key: q
    quota_mode: true
    descriptors:
      - key: ""
---
descriptors: []
---
domain: a
`, []string{
			"a.descriptors[0]: the key is empty",
			`a.descriptors[1](k=v).rate_limit: unit "fortnight"`,
			"a.descriptors[2](k=v): the same key and value appear twice",
			"a.descriptors[3](u).rate_limit: an unlimited rate_limit has no unit",
			`a.descriptors[4](r).rate_limit: replaces names its own rule "me"`,
			"a.descriptors[4](r).rate_limit: a replaces entry has no name",
			"a.descriptors[5](s=plain): share_threshold needs a wildcard value",
			"a.descriptors[6](q): quota_mode is not supported",
			"a.descriptors[6](q).descriptors[0]: the key is empty",
			"(document 2): the domain is empty",
			`(document 3): domain "a" is configured twice`,
		}, 11},
		{"granary's keys", `
domain: g
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky_bucket}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 1, tokens_per_period: 2}
  - key: c
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket, replenishment_period: -1s}
  - key: d
    rate_limit: {unlimited: true, algorithm: token_bucket}
`, []string{
			`g.descriptors[0](a).rate_limit: algorithm "leaky_bucket"`,
			"g.descriptors[1](b).rate_limit: tokens_per_period does not apply to fixed_window",
			"g.descriptors[2](c).rate_limit: ",
			"ReplenishmentPeriod",
			"g.descriptors[3](d).rate_limit: an unlimited rate_limit has no algorithm",
		}, 4},
		{"not YAML", "domain: [", []string{"did not find expected node content"}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := envoyrls.Parse("rules.yaml", []byte(c.yaml))
			require.Nil(t, cfg)
			require.ErrorIs(t, err, envoyrls.ErrInvalidConfig)
			for _, w := range c.want {
				require.Contains(t, err.Error(), w)
			}
			require.Len(t, strings.Split(err.Error(), "\n"), c.lines, "every problem once:\n%v", err)
		})
	}
}

// TestLoadReadsADirectoryInNameOrder: a directory is read as
// envoyproxy/ratelimit reads its runtime directory, every *.yaml and
// *.yml file, and a domain in two files is refused.
func TestLoadReadsADirectoryInNameOrder(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600))
	}
	write("a.yaml", "domain: one\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]\n")
	write("b.yml", "domain: two\n")
	write("notes.txt", "domain: [not read")
	write(".hidden.yaml", "domain: [not read")
	cfg, err := envoyrls.Load(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"one", "two"}, cfg.Domains())

	write("c.yaml", "domain: one\n")
	_, err = envoyrls.Load(dir)
	require.ErrorContains(t, err, `c.yaml: domain "one" is configured twice`)

	_, err = envoyrls.Load(filepath.Join(dir, "missing.yaml"))
	require.ErrorIs(t, err, envoyrls.ErrInvalidConfig)
	_, err = envoyrls.Load(t.TempDir())
	require.ErrorContains(t, err, "no *.yaml or *.yml file")
}
