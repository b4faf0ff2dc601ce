package httplimit

import (
	"bytes"
	"net/http"
	"net/netip"
	"strings"
)

// UnknownClient is the client address of requests whose address cannot be
// read (no peer address, or one that does not parse): they all share one
// bucket under an IP rule, rather than each getting a fresh one.
const UnknownClient = "unknown"

// clientIPs finds a request's client address: the connection's peer, or,
// when the peer is a trusted proxy, the address the proxies forwarded.
type clientIPs struct {
	trusted []netip.Prefix
	header  string // canonical form of the forwarded header's name
}

// clientIP returns the client address of r, IPv4-mapped IPv6 addresses
// in their IPv4 form, or false when it cannot be read.
func (c *clientIPs) clientIP(r *http.Request) (netip.Addr, bool) {
	peer, ok := parseAddr(r.RemoteAddr)
	if !ok || !c.isTrusted(peer) {
		return peer, ok
	}
	return c.forwarded(r.Header[c.header], peer)
}

// clientKey returns the limiter key of r's client address under a rule
// whose keys start with prefix: keyWithPrefix(prefix, address), built
// without the address's own string.
func (c *clientIPs) clientKey(prefix string, r *http.Request) string {
	addr, ok := c.clientIP(r)
	if !ok {
		return prefix + ":" + UnknownClient
	}
	var text [64]byte // the longest IPv6 address is 45 bytes
	ip := addr.AppendTo(text[:0])
	var b strings.Builder
	b.Grow(len(prefix) + 1 + len(ip) + 2*bytes.Count(ip, []byte{':'}))
	b.WriteString(prefix)
	b.WriteByte(':')
	for _, ch := range ip {
		if ch == ':' {
			b.WriteString("%3A")
		} else {
			b.WriteByte(ch)
		}
	}
	return b.String()
}

// forwarded walks the forwarded header from the right, from the hop the
// trusted peer appended towards the client, and returns the first address
// that is not a trusted proxy: everything to its left was written by
// whoever that address is, and may be forged. When every hop is trusted
// it returns the leftmost; with no hops, the peer. A hop that does not
// parse was written by a trusted proxy that could not say better: the
// client is unknown.
func (c *clientIPs) forwarded(lines []string, peer netip.Addr) (netip.Addr, bool) {
	client := peer
	for i := len(lines) - 1; i >= 0; i-- {
		rest := lines[i]
		for rest != "" {
			var hop string
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				hop, rest = rest[j+1:], rest[:j]
			} else {
				hop, rest = rest, ""
			}
			hop = strings.TrimSpace(hop)
			if hop == "" {
				continue
			}
			addr, ok := parseAddr(hop)
			if !ok {
				return netip.Addr{}, false
			}
			if !c.isTrusted(addr) {
				return addr, true
			}
			client = addr
		}
	}
	return client, true
}

func (c *clientIPs) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseAddr reads an address with or without a port ("192.0.2.1",
// "192.0.2.1:80", "[2001:db8::1]:443", "2001:db8::1"), unmapped and
// without a zone, so that one client always reads the same. The form is
// told from the colons first, so that the usual peer address, which has a
// port, parses without a failed attempt.
func parseAddr(s string) (netip.Addr, bool) {
	var (
		a   netip.Addr
		err error
	)
	switch colons := strings.Count(s, ":"); {
	case s == "":
		return netip.Addr{}, false
	case s[0] == '[' && s[len(s)-1] == ']': // "[2001:db8::1]"
		a, err = netip.ParseAddr(s[1 : len(s)-1])
	case s[0] == '[', colons == 1: // "[2001:db8::1]:443", "192.0.2.1:80"
		var ap netip.AddrPort
		ap, err = netip.ParseAddrPort(s)
		a = ap.Addr()
	default: // "192.0.2.1", "2001:db8::1"
		a, err = netip.ParseAddr(s)
	}
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// parseTrusted reads one trusted proxy: a CIDR prefix or a single address.
// IPv4 prefixes also match IPv4-mapped peers, since peers are unmapped
// before matching.
func parseTrusted(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			// ::ffff:10.0.0.0/104 means 10.0.0.0/8: peers are unmapped.
			return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked(), nil
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}
