package httplimit_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/granary-go/granary/grains/ratelimit/httplimit"
)

func ipKey(addr string) string { return httplimit.Key(httplimit.DefaultKeyPrefix, "ip", "once", addr) }

// limitedByIP returns a handler behind one ByIP rule that allows one
// request per client, configured by opts, and the caller that records the
// limiters it reaches.
func limitedByIP(t *testing.T, opts httplimit.Options) (http.Handler, *recordingCaller) {
	t.Helper()
	keys := record(startSilo(t, nil).Caller())
	opts.Rules = []httplimit.Rule{httplimit.ByIP("once")}
	return mustMiddleware(t, keys, mustConfigs(t, oncePerKey), opts).Handler(ok), keys
}

func TestSpoofedForwardedForFromAnUntrustedPeerChangesNothing(t *testing.T) {
	h, keys := limitedByIP(t, httplimit.Options{TrustedProxies: []string{"10.0.0.0/8"}})

	assert.Equal(t, http.StatusNoContent, serve(h, "192.0.2.1:1", "X-Forwarded-For", "203.0.113.1").Code)
	for i := range 20 {
		spoof := fmt.Sprintf("203.0.113.%d", i+2)
		assert.Equal(t, http.StatusTooManyRequests, serve(h, "192.0.2.1:1", "X-Forwarded-For", spoof).Code,
			"a forged %s does not move the client to a fresh bucket", spoof)
	}
	assert.Equal(t, map[string]int{ipKey("192.0.2.1"): 21}, keys.calledKeys(), "one bucket: the peer's")
}

func TestTrustedProxyForwardsTheClientAddress(t *testing.T) {
	h, keys := limitedByIP(t, httplimit.Options{TrustedProxies: []string{"10.0.0.0/8"}})

	assert.Equal(t, http.StatusNoContent, serve(h, "10.0.0.5:1", "X-Forwarded-For", "203.0.113.1").Code)
	assert.Equal(t, http.StatusNoContent, serve(h, "10.0.0.6:1", "X-Forwarded-For", "203.0.113.2").Code, "another client behind the proxies")
	assert.Equal(t, http.StatusTooManyRequests, serve(h, "10.0.0.6:1", "X-Forwarded-For", "198.51.100.7, 203.0.113.1").Code,
		"the client's own forged hop, left of what the proxy appended, is ignored")
	assert.Equal(t, map[string]int{ipKey("203.0.113.1"): 2, ipKey("203.0.113.2"): 1}, keys.calledKeys())
}

func TestForwardedHeaderIsConfigurable(t *testing.T) {
	h, keys := limitedByIP(t, httplimit.Options{
		TrustedProxies:  []string{"127.0.0.1"},
		ForwardedHeader: "x-real-client",
	})
	serve(h, "127.0.0.1:1", "X-Forwarded-For", "203.0.113.1", "X-Real-Client", "203.0.113.2")
	assert.Equal(t, map[string]int{ipKey("203.0.113.2"): 1}, keys.calledKeys())
}

func TestIPv4MappedPeerSharesTheIPv4Bucket(t *testing.T) {
	h, _ := limitedByIP(t, httplimit.Options{})
	assert.Equal(t, http.StatusNoContent, serve(h, "192.0.2.1:1").Code)
	assert.Equal(t, http.StatusTooManyRequests, serve(h, "[::ffff:192.0.2.1]:2").Code, "the same client over an IPv6 socket")
}

func TestRequestsWithoutAnAddressShareTheUnknownBucket(t *testing.T) {
	h, keys := limitedByIP(t, httplimit.Options{})
	assert.Equal(t, http.StatusNoContent, serve(h, "").Code)
	assert.Equal(t, http.StatusTooManyRequests, serve(h, "@").Code, "an unreadable address is unknown too")
	assert.Equal(t, http.StatusTooManyRequests, serve(h, "").Code)
	assert.Equal(t, map[string]int{ipKey(httplimit.UnknownClient): 3}, keys.calledKeys())
}
