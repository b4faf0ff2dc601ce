package httplimit

import "strings"

// Key joins parts into one limiter key: each part has '%' escaped as
// "%25" and ':' as "%3A", then the parts are joined with ':'. Escaping
// first makes the join injective: two different non-empty lists of parts
// never give the same key, whatever the parts hold, so a user called
// "a:b" cannot share the bucket of user "a" in group "b". Custom key
// functions that combine several values should join them with Key.
func Key(parts ...string) string {
	n := len(parts) - 1
	for _, p := range parts {
		n += len(p) + 2*escapes(p)
	}
	if n <= 0 {
		return ""
	}
	var b strings.Builder
	b.Grow(n)
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(':')
		}
		appendEscaped(&b, p)
	}
	return b.String()
}

// escapes counts the bytes of s that Key escapes.
func escapes(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '%' || s[i] == ':' {
			n++
		}
	}
	return n
}

func appendEscaped(b *strings.Builder, s string) {
	for {
		i := strings.IndexAny(s, "%:")
		if i < 0 {
			b.WriteString(s)
			return
		}
		b.WriteString(s[:i])
		if s[i] == '%' {
			b.WriteString("%25")
		} else {
			b.WriteString("%3A")
		}
		s = s[i+1:]
	}
}

// keyWithPrefix returns prefix (a key Key built, or "") followed by value
// as one more part, escaped: the key of one request under one rule, built
// with one allocation.
func keyWithPrefix(prefix, value string) string {
	extra := escapes(value)
	if extra == 0 {
		return prefix + ":" + value
	}
	var b strings.Builder
	b.Grow(len(prefix) + 1 + len(value) + 2*extra)
	b.WriteString(prefix)
	b.WriteByte(':')
	appendEscaped(&b, value)
	return b.String()
}
