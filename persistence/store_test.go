package persistence

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testKey = Key{GrainType: "counter", GrainKey: "k1", Name: "state"}

func TestMemoryStoreETagsIncrease(t *testing.T) {
	s := NewMemoryStore()
	ctx := context.Background()
	other := Key{GrainType: "counter", GrainKey: "k1", Name: "other"}
	etags := map[Key]string{}
	var last uint64
	// Alternate keys: the version counter is store-wide, not per key.
	for i := range 6 {
		k := testKey
		if i%2 == 1 {
			k = other
		}
		etag, err := s.Write(ctx, k, nil, etags[k])
		require.NoError(t, err)
		etags[k] = etag
		n, err := strconv.ParseUint(etag, 10, 64)
		require.NoError(t, err)
		assert.Greater(t, n, last)
		last = n
	}
	assert.Equal(t, 2, s.Len())
}

func TestConflictErrorMessage(t *testing.T) {
	err := &ConflictError{Key: testKey, Expected: "1", Actual: "2"}
	assert.Equal(t, `persistence: etag conflict on counter/k1/state: expected "1", stored "2"`, err.Error())
	assert.NotErrorIs(t, err, ErrNotFound)
}
