package ring

import (
	"encoding/binary"
	"hash/fnv"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/granary-go/granary/actor"
)

// referenceHash computes the documented algorithm from the standard
// library's FNV and an explicit encoding, independently of Hash's streaming
// code.
func referenceHash(id actor.GrainID) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(encodeGrain(id))
	return fmix64(h.Sum64())
}

func encodeGrain(id actor.GrainID) []byte {
	b := binary.AppendUvarint(nil, uint64(len(id.Type)))
	b = append(b, id.Type...)
	return append(b, id.Key...)
}

func TestHashFollowsTheDocumentedAlgorithm(t *testing.T) {
	long := string(make([]byte, 300)) // a type whose length needs two varint bytes
	for _, id := range []actor.GrainID{
		{}, {Type: "counter", Key: "k1"}, {Type: "ratelimit.Limiter", Key: "tenant-42/api"},
		{Type: long, Key: "x"}, {Type: "t", Key: "ключ"},
	} {
		assert.Equal(t, referenceHash(id), Hash(id), "%q", id)
	}
}

// Every silo of a cluster, of every granary version that can share a
// cluster, must place directory entries identically: a change of these
// values breaks rolling upgrades and needs a migration plan, not a new
// expected value.
func TestHashIsPinnedAcrossReleases(t *testing.T) {
	assert.Equal(t, uint64(0x94d92d6921a1c83f), Hash(actor.GrainID{Type: "counter", Key: "k1"}))
	assert.Equal(t, uint64(0x6f9ef1f9288fee64), HashSilo("silo-0"))
	assert.Equal(t, uint64(0x1ba5fcad96e06562), pointHash("silo-0", 7))
}

func TestHashTellsTypeAndKeyApartWhereConcatenationCannot(t *testing.T) {
	pairs := [][2]actor.GrainID{
		{{Type: "a/b", Key: "c"}, {Type: "a", Key: "b/c"}},
		{{Type: "ab", Key: ""}, {Type: "a", Key: "b"}},
		{{Type: "", Key: "ab"}, {Type: "a", Key: "b"}},
		{{Type: "\x01", Key: "a"}, {Type: "", Key: "\x01\x01a"}},
	}
	for _, p := range pairs {
		assert.NotEqual(t, Hash(p[0]), Hash(p[1]), "%q vs %q", p[0], p[1])
	}
}

func FuzzHashEncodingIsInjective(f *testing.F) {
	f.Add("a/b", "c", "a", "b/c")
	f.Add("ab", "", "a", "b")
	f.Add("", "\x00", "\x00", "")
	f.Fuzz(func(t *testing.T, t1, k1, t2, k2 string) {
		a, b := actor.GrainID{Type: t1, Key: k1}, actor.GrainID{Type: t2, Key: k2}
		if a != b && string(encodeGrain(a)) == string(encodeGrain(b)) {
			t.Fatalf("%q and %q encode identically", a, b)
		}
		if Hash(a) != referenceHash(a) {
			t.Fatalf("Hash(%q) differs from the reference", a)
		}
	})
}
