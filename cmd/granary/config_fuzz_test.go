package main

import (
	"testing"
)

// FuzzConfigFile feeds arbitrary bytes to the config file's decoder: it
// must never panic, and what it accepts must turn into settings and
// limiter options without panicking either.
func FuzzConfigFile(f *testing.F) {
	f.Add([]byte(yamlConfig))
	f.Add([]byte(`{"silo": {"name": "json", "seeds": ["a:1", 2, true]}, "ratelimit": {"defaults": {"concurrency": {"permit-limit": 1}}}}`))
	f.Add([]byte("silo: {nmae: x}\nratelimit: {configurations: {a: {token-bucket: {token-limit: -1, queue-order: sideways}}}}"))
	f.Add([]byte("silo: [1, 2]\n"))
	f.Add([]byte("ratelimit:\n  defaults:\n    fixed-window: {window: 5}\n"))
	f.Add([]byte("&a [*a]"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		var cfg configFile
		if err := decodeConfig(data, &cfg); err != nil {
			return
		}
		_, _ = cfg.siloSettings("fuzz")
		_ = cfg.RateLimit.Defaults.defaults().Validate()
		_ = cfg.RateLimit.configs()
	})
}
