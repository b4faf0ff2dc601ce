package redisstore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/persistence"
)

func TestRedisKeyLayout(t *testing.T) {
	for _, tt := range []struct {
		key  persistence.Key
		want string
	}{
		{persistence.Key{GrainType: "counter", GrainKey: "visits", Name: "state"}, "granary:{counter:visits}:state"},
		{persistence.Key{GrainType: "ratelimit.Bucket", GrainKey: "api/users", Name: "state"}, "granary:{ratelimit.Bucket:api/users}:state"},
		{persistence.Key{GrainType: "t", GrainKey: "a:b", Name: "c:d"}, "granary:{t:a%3Ab}:c%3Ad"},
		{persistence.Key{GrainType: "t", GrainKey: "{x}", Name: "%"}, "granary:{t:%7Bx%7D}:%25"},
		{persistence.Key{}, "granary:{:}:"},
	} {
		assert.Equal(t, tt.want, redisKey("granary:", tt.key))
	}
}

// hashTag returns the part of a Redis key that Redis Cluster hashes: the
// text between the first '{' and the first '}' after it, if that is not
// empty, else the whole key (the Redis Cluster specification's rule).
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	closing := strings.IndexByte(key[open+1:], '}')
	if closing <= 0 {
		return key
	}
	return key[open+1 : open+1+closing]
}

// parseRedisKey inverts redisKey, to show that it loses nothing.
func parseRedisKey(t *testing.T, prefix, s string) persistence.Key {
	t.Helper()
	rest, ok := strings.CutPrefix(s, prefix+"{")
	require.True(t, ok, "%q lacks the prefix", s)
	grain, name, ok := strings.Cut(rest, "}:")
	require.True(t, ok, "%q lacks the tag's end", s)
	typ, key, ok := strings.Cut(grain, ":")
	require.True(t, ok, "%q lacks the type's end", s)
	for _, part := range []string{typ, key, name} {
		require.NotContains(t, part, ":", "an unescaped separator in %q", s)
		require.False(t, strings.ContainsAny(part, "{}"), "an unescaped brace in %q", s)
	}
	unescape := strings.NewReplacer("%3A", ":", "%7B", "{", "%7D", "}", "%25", "%").Replace
	return persistence.Key{GrainType: unescape(typ), GrainKey: unescape(key), Name: unescape(name)}
}

// FuzzRedisKey checks, for keys that clients choose, that the layout is
// injective (it can be parsed back) and that every state of one grain has
// the same Redis Cluster hash tag, which names only that grain.
func FuzzRedisKey(f *testing.F) {
	f.Add("counter", "visits", "state", "other")
	f.Add("a:b", "c", "s", "s2")
	f.Add("t", "}{", "%3A", ":")
	f.Add("", "", "", "{")
	f.Add("t{", "k}", "n%", "%25")
	f.Fuzz(func(t *testing.T, grainType, grainKey, name, otherName string) {
		const prefix = "granary:prod:"
		key := persistence.Key{GrainType: grainType, GrainKey: grainKey, Name: name}
		k := redisKey(prefix, key)
		assert.Equal(t, key, parseRedisKey(t, prefix, k))

		sibling := redisKey(prefix, persistence.Key{GrainType: grainType, GrainKey: grainKey, Name: otherName})
		assert.Equal(t, hashTag(k), hashTag(sibling), "states of one grain must share a slot")
		assert.Equal(t, strings.TrimSuffix(strings.TrimPrefix(k, prefix+"{"), "}:"+escaped(name)), hashTag(k))
	})
}

func escaped(s string) string {
	var b strings.Builder
	escapeKeyPart(&b, s)
	return b.String()
}
