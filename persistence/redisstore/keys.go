package redisstore

import (
	"strings"

	"github.com/granary-go/granary/persistence"
)

// redisKey names the Redis hash that holds key's state:
//
//	<prefix>{<grain type>:<grain key>}:<state name>
//
// for example granary:{counter:visits}:state. The braces are a Redis
// Cluster hash tag: Redis Cluster hashes only what is between them, so all
// the states of one grain live in one slot, where a script may touch them
// together. Each part is escaped (see escapeKeyPart) so that no part can
// contain the separator or a brace: the layout is then injective (two
// different keys never share a hash) and the tag always ends where the
// grain's identity ends.
func redisKey(prefix string, key persistence.Key) string {
	var b strings.Builder
	b.Grow(len(prefix) + len(key.GrainType) + len(key.GrainKey) + len(key.Name) + 4)
	b.WriteString(prefix)
	b.WriteByte('{')
	escapeKeyPart(&b, key.GrainType)
	b.WriteByte(':')
	escapeKeyPart(&b, key.GrainKey)
	b.WriteString("}:")
	escapeKeyPart(&b, key.Name)
	return b.String()
}

// escapeKeyPart writes s with '%', ':', '{' and '}' percent-encoded, and
// every other byte as it is, so that keys stay readable in redis-cli.
func escapeKeyPart(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%':
			b.WriteString("%25")
		case ':':
			b.WriteString("%3A")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		default:
			b.WriteByte(c)
		}
	}
}
