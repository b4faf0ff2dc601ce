package httplimit

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestKeyEscapesBeforeJoining(t *testing.T) {
	for _, tc := range []struct {
		parts []string
		want  string
	}{
		{[]string{"http", "user", "api", "alice"}, "http:user:api:alice"},
		{[]string{"a:b"}, "a%3Ab"},
		{[]string{"a", "b"}, "a:b"},
		{[]string{"100%", "x"}, "100%25:x"},
		{[]string{"%3A"}, "%253A"},
		{[]string{"", ""}, ":"},
		{[]string{"::"}, "%3A%3A"},
	} {
		assert.Equal(t, tc.want, Key(tc.parts...), "%q", tc.parts)
	}
}

func TestKeyWithPrefixIsKeyOfOneMorePart(t *testing.T) {
	for _, value := range []string{"", "alice", "a:b", "%", "2001:db8::1", "a%3Ab"} {
		assert.Equal(t, Key("http", "ip", "r", value), keyWithPrefix(Key("http", "ip", "r"), value), "%q", value)
	}
}

// splitKey undoes Key, for the tests: it shows that Key loses nothing.
func splitKey(key string) []string {
	parts := strings.Split(key, ":")
	for i, p := range parts {
		p = strings.ReplaceAll(p, "%3A", ":")
		parts[i] = strings.ReplaceAll(p, "%25", "%")
	}
	return parts
}

// FuzzKeyNeverCollides checks that Key is injective: parts come back
// from the key, and two different lists of parts give different keys.
// Each input is a list of parts separated by NUL.
func FuzzKeyNeverCollides(f *testing.F) {
	f.Add("a\x00b", "a:b")
	f.Add("a:b", "a\x00b")
	f.Add("%3A", ":")
	f.Add("%253A", "%3A")
	f.Add("x\x00", "x:")
	f.Add("100%\x00x", "100%25\x00x")
	f.Add("", "\x00")
	f.Fuzz(func(t *testing.T, a, b string) {
		pa, pb := strings.Split(a, "\x00"), strings.Split(b, "\x00")
		ka, kb := Key(pa...), Key(pb...)
		if got := splitKey(ka); !slices.Equal(got, pa) {
			t.Fatalf("Key(%q) = %q, which splits into %q", pa, ka, got)
		}
		if ka == kb && !slices.Equal(pa, pb) {
			t.Fatalf("Key(%q) == Key(%q) == %q", pa, pb, ka)
		}
		if len(pa) > 1 {
			prefix := Key(pa[:len(pa)-1]...)
			if got := keyWithPrefix(prefix, pa[len(pa)-1]); got != ka {
				t.Fatalf("keyWithPrefix(%q, %q) = %q, want %q", prefix, pa[len(pa)-1], got, ka)
			}
		}
	})
}
