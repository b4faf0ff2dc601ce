package envoyrls

import (
	"errors"
	"os"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// FuzzParse: whatever the bytes, Parse returns a configuration or an
// error wrapping ErrInvalidConfig, never both and never a panic; a
// configuration it returns can be matched against.
func FuzzParse(f *testing.F) {
	examples, err := os.ReadFile("testdata/examples.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(examples)
	f.Add([]byte("domain: a\ndescriptors: [{key: k, value: 'v*x*', share_threshold: true, rate_limit: {unit: minute, requests_per_unit: 3}}]"))
	f.Add([]byte("domain: a\ndescriptors: [{key: k, rate_limit: {unit: hour, requests_per_unit: 9, algorithm: token_bucket, replenishment_period: 1ms}}]"))
	f.Add([]byte("domain: [\n"))
	f.Add([]byte("---\n---\ndomain: b\n"))
	f.Add([]byte("domain: a\ndescriptors: &x [{key: k, descriptors: *x}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if (c == nil) == (err == nil) {
			t.Fatalf("Parse returned %v and %v", c, err)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("an error that is not ErrInvalidConfig: %v", err)
			}
			return
		}
		entries := []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "vxx"}, {Key: "k", Value: ""}}
		for _, domain := range c.Domains() {
			c.domains[domain].match(domain, entries)
		}
	})
}
