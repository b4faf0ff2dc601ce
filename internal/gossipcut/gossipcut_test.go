package gossipcut

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPartitionKeepsGroupsApartAndHealJoinsThem(t *testing.T) {
	const a, b, c, outsider = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"
	cut := New()
	cut.Partition([]string{a, b}, []string{c})
	cases := []struct {
		from, to string
		blocked  bool
	}{
		{a, b, false}, {b, a, false}, // one side
		{a, c, true}, {c, a, true}, {b, c, true}, {c, b, true}, // across
		{a, outsider, false}, {outsider, c, false}, // no group named it
		{"127.0.0.1:3", "[::ffff:127.0.0.1]:1", true}, // one address, two spellings
	}
	for _, tc := range cases {
		assert.Equal(t, tc.blocked, cut.blocked(normalize(tc.from), tc.to), "%s to %s", tc.from, tc.to)
	}
	assert.Equal(t, int64(5), cut.Dropped())

	cut.Heal()
	assert.False(t, cut.blocked(a, c))
	assert.False(t, cut.blocked(c, a))
}

func TestIsolateCutsAnAddressOffFromEveryOther(t *testing.T) {
	cut := New()
	cut.Isolate("127.0.0.1:3")
	assert.True(t, cut.blocked("127.0.0.1:3", "127.0.0.1:9"))
	assert.True(t, cut.blocked("127.0.0.1:9", "127.0.0.1:3"))
	assert.False(t, cut.blocked("127.0.0.1:9", "127.0.0.1:8"))
	cut.Partition([]string{"127.0.0.1:8"}, []string{"127.0.0.1:9"})
	assert.True(t, cut.blocked("127.0.0.1:3", "127.0.0.1:7"), "a Partition keeps an Isolate")
	cut.Heal()
	assert.False(t, cut.blocked("127.0.0.1:3", "127.0.0.1:9"))
}

func TestTheContextCarriesTheCut(t *testing.T) {
	assert.Nil(t, FromContext(context.Background()))
	cut := New()
	assert.Same(t, cut, FromContext(NewContext(context.Background(), cut)))
}
