package envoyrls_test

import (
	"fmt"

	"github.com/granary-go/granary/internal/envoyrls"
)

// A configuration in envoyproxy/ratelimit's format, with a granary
// algorithm for one of its limits, checked before a server takes it.
func ExampleParse() {
	cfg, err := envoyrls.Parse("ratelimit.yaml", []byte(`
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 50}
  - key: generic_key
    value: api
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 600, algorithm: token_bucket, tokens_per_period: 10, replenishment_period: 1s}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	// server := envoyrls.NewServer(silo.Caller(), envoyrls.Options{}); server.SetConfig(cfg)
	fmt.Println(cfg.Domains())

	_, err = envoyrls.Parse("bad.yaml", []byte("domain: edge\ndescriptors: [{key: a, rate_limit: {unit: fortnight}}]"))
	fmt.Println(err)
	// Output:
	// [edge]
	// envoyrls: invalid configuration: bad.yaml: edge.descriptors[0](a).rate_limit: unit "fortnight": want second, minute, hour, day, week, month or year
}
