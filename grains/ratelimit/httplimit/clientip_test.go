package httplimit

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClientIP(t *testing.T) {
	trusted := clientIPs{
		trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")},
		header:  "X-Forwarded-For",
	}
	for _, tc := range []struct {
		name   string
		peer   string
		header []string
		want   string
	}{
		{"peer with port", "192.0.2.1:1234", nil, "192.0.2.1"},
		{"peer without port", "192.0.2.1", nil, "192.0.2.1"},
		{"IPv6 peer", "[2001:db8::1]:443", nil, "2001:db8::1"},
		{"IPv4-mapped peer", "[::ffff:192.0.2.1]:1234", nil, "192.0.2.1"},
		{"zone dropped", "[fe80::1%eth0]:80", nil, "fe80::1"},
		{"no peer", "", nil, UnknownClient},
		{"unreadable peer", "pipe", nil, UnknownClient},
		{"untrusted peer's header ignored", "192.0.2.1:1", []string{"203.0.113.9"}, "192.0.2.1"},
		{"trusted peer without header", "10.0.0.1:1", nil, "10.0.0.1"},
		{"trusted peer forwards", "10.0.0.1:1", []string{"203.0.113.9"}, "203.0.113.9"},
		{"forged hops left of the client", "10.0.0.1:1", []string{"1.1.1.1, 2.2.2.2, 203.0.113.9"}, "203.0.113.9"},
		{"trusted hops skipped", "10.0.0.1:1", []string{"203.0.113.9, 10.1.1.1, 10.2.2.2"}, "203.0.113.9"},
		{"several header lines in order", "10.0.0.1:1", []string{"203.0.113.9", "10.2.2.2"}, "203.0.113.9"},
		{"later line is nearer", "10.0.0.1:1", []string{"198.51.100.1", "203.0.113.9"}, "203.0.113.9"},
		{"all hops trusted: the leftmost", "10.0.0.1:1", []string{"10.3.3.3, 10.2.2.2"}, "10.3.3.3"},
		{"empty hops skipped", "10.0.0.1:1", []string{"203.0.113.9,, "}, "203.0.113.9"},
		{"hop with port", "10.0.0.1:1", []string{"203.0.113.9:5555"}, "203.0.113.9"},
		{"bracketed IPv6 hop", "10.0.0.1:1", []string{"[2001:db8::9]"}, "2001:db8::9"},
		{"IPv4-mapped hop", "10.0.0.1:1", []string{"::ffff:203.0.113.9"}, "203.0.113.9"},
		{"IPv4-mapped trusted peer", "[::ffff:10.0.0.1]:1", []string{"203.0.113.9"}, "203.0.113.9"},
		{"trusted IPv6 proxy", "[2001:db8:ffff::1]:1", []string{"203.0.113.9"}, "203.0.113.9"},
		{"garbage from a trusted proxy", "10.0.0.1:1", []string{"203.0.113.9, nonsense"}, UnknownClient},
		{"garbage left of the client is not read", "10.0.0.1:1", []string{"nonsense, 203.0.113.9"}, "203.0.113.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tc.peer, Header: http.Header{}}
			for _, v := range tc.header {
				r.Header.Add("X-Forwarded-For", v)
			}
			got := UnknownClient
			if addr, ok := trusted.clientIP(r); ok {
				got = addr.String()
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, keyWithPrefix("p", tc.want), trusted.clientKey("p", r), "the key escapes the address")
		})
	}
}

func TestParseTrusted(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.0/8":          "10.0.0.0/8",
		"10.1.2.3/8":          "10.0.0.0/8",
		"192.0.2.7":           "192.0.2.7/32",
		"::1":                 "::1/128",
		" 2001:db8::/32 ":     "2001:db8::/32",
		"::ffff:10.0.0.0/104": "10.0.0.0/8",
		"::ffff:192.0.2.7":    "192.0.2.7/32",
	} {
		p, err := parseTrusted(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, p.String(), in)
	}
	for _, in := range []string{"", "10.0.0.0/33", "example.com", "10.0.0.0/"} {
		_, err := parseTrusted(in)
		assert.Error(t, err, in)
	}
}
