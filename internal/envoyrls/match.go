package envoyrls

import (
	"strconv"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// match finds the rule of a descriptor in a domain, as envoyproxy/ratelimit
// does: at each level the entry's key and value, else the first wildcard
// value of the key that matches, else the key alone; a rule applies only
// at the level of the descriptor's last entry. It also returns the grain
// key of the limit: the domain and the entries, a wildcard's pattern
// standing for the value where the limit is shared (share_threshold).
func (root *node) match(domain string, entries []*ratelimitv3.RateLimitDescriptor_Entry) (*rule, string) {
	n := root
	var found *rule
	// The key is built only once a rule is found, from the patterns kept
	// here: most descriptors of a busy domain match a rule.
	var shared []string
	for i, e := range entries {
		next := n.children[entryKey{e.GetKey(), e.GetValue()}]
		if next == nil {
			for _, w := range n.wildcards {
				if w.key == e.GetKey() && wildcardMatch(w.parts, e.GetValue()) {
					next = w.child
					break
				}
			}
		}
		if next == nil {
			next = n.children[entryKey{e.GetKey(), ""}]
		}
		if next == nil {
			break
		}
		if next.sharedPattern != "" {
			if shared == nil {
				shared = make([]string, len(entries))
			}
			shared[i] = next.sharedPattern
		}
		if i == len(entries)-1 {
			found = next.rule
		}
		if len(next.children) == 0 {
			break
		}
		n = next
	}
	if found == nil {
		return nil, ""
	}
	return found, grainKey(domain, entries, shared)
}

// grainKey names a limit's grain: every part quoted, so that no two
// descriptors share a key by accident ("a_b"="c" and "a"="b_c" do in
// envoyproxy/ratelimit's keys).
func grainKey(domain string, entries []*ratelimitv3.RateLimitDescriptor_Entry, shared []string) string {
	n := len("envoy ") + len(domain) + 2
	for _, e := range entries {
		n += len(e.GetKey()) + len(e.GetValue()) + 6
	}
	b := make([]byte, 0, n)
	b = append(b, "envoy "...)
	b = strconv.AppendQuote(b, domain)
	for i, e := range entries {
		b = append(b, ' ')
		b = strconv.AppendQuote(b, e.GetKey())
		b = append(b, '=')
		if i < len(shared) && shared[i] != "" {
			b = strconv.AppendQuote(b, shared[i])
			b = append(b, '*') // a pattern, not a value that looks like one
			continue
		}
		b = strconv.AppendQuote(b, e.GetValue())
	}
	return string(b)
}

// wildcardMatch reports whether value matches a pattern split at its
// '*'s: it starts with the first part, ends with the last, and holds the
// others in order between them.
func wildcardMatch(parts []string, value string) bool {
	if len(parts) == 1 {
		return parts[0] == value
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(value) < len(first)+len(last) || !strings.HasPrefix(value, first) || !strings.HasSuffix(value, last) {
		return false
	}
	rest := value[len(first) : len(value)-len(last)]
	for _, part := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, part)
		if i < 0 {
			return false
		}
		rest = rest[i+len(part):]
	}
	return true
}
