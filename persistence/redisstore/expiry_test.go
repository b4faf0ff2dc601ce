package redisstore_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/redistest"
	"github.com/granary-go/granary/persistence/redisstore"
)

// A state written with a time to live carries it in Redis, which drops the
// key by itself once it has passed; a plain write after it keeps the state
// for ever again.
func TestWriteExpiringGivesTheKeyATimeToLive(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	s := newStore(t, srv, redisstore.Options{})
	key := s.KeyPrefix() + "{" + testKey.GrainType + ":" + testKey.GrainKey + "}:" + testKey.Name
	pttl := func() int {
		out, err := srv.Command("PTTL", key)
		require.NoError(t, err)
		n, err := strconv.Atoi(out)
		require.NoError(t, err, "PTTL answered %q", out)
		return n
	}

	etag, err := s.WriteExpiring(bg, testKey, []byte("1"), "", time.Hour)
	require.NoError(t, err)
	if got := pttl(); got == -2 {
		t.Fatalf("key %q not found: the key layout changed", key)
	} else {
		assert.Greater(t, got, int((59 * time.Minute).Milliseconds()))
		assert.LessOrEqual(t, got, int(time.Hour.Milliseconds()))
	}

	etag, err = s.Write(bg, testKey, []byte("2"), etag)
	require.NoError(t, err)
	assert.Equal(t, -1, pttl(), "a plain write keeps the state for ever")

	_, err = s.WriteExpiring(bg, testKey, []byte("3"), etag, time.Millisecond)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return pttl() == -2 }, waitFor, pollEvery, "Redis drops the state once its time to live has passed")
	_, _, err = s.Read(bg, testKey)
	assert.Error(t, err)
}
