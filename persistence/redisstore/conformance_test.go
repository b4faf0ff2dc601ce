package redisstore_test

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/redistest"
	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/persistence/redisstore"
	"github.com/granary-go/granary/persistence/storetest"
)

func TestStoreConforms(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	storetest.Run(t, func(t *testing.T) persistence.Store {
		return newStore(t, srv, redisstore.Options{})
	})
}

func TestStoreOnClusterClient(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{Cluster: true})
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })

	t.Run("Conforms", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) persistence.Store {
			s, err := redisstore.NewWithClient(client, uniquePrefix())
			require.NoError(t, err)
			return s
		})
	})

	t.Run("StatesOfOneGrainShareASlot", func(t *testing.T) {
		prefix := uniquePrefix()
		s, err := redisstore.NewWithClient(client, prefix)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("redis cluster %s (key prefix %q)", srv.Addr(), prefix), s.String())
		names := []string{"state", "quota", "odd:name{}"}
		for _, name := range names {
			_, err := s.Write(bg, persistence.Key{GrainType: "ratelimit.Bucket", GrainKey: "api:{users}", Name: name}, []byte("x"), "")
			require.NoError(t, err)
		}
		keys, err := client.Keys(bg, prefix+"*").Result()
		require.NoError(t, err)
		require.Len(t, keys, len(names))
		slots := map[int64]bool{}
		for _, k := range keys {
			slot, err := client.ClusterKeySlot(bg, k).Result()
			require.NoError(t, err)
			slots[slot] = true
		}
		assert.Len(t, slots, 1, "keys %q", keys)
	})
}

// TestLeastPrivilegeUserConforms runs the suite as an ACL user with only
// the permissions docs/persistence.md lists, so that the list stays true.
func TestLeastPrivilegeUserConforms(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	_, err := srv.Command("ACL", "SETUSER", "silo", "reset", "on", ">pw", "~granary:*",
		"+ping", "+hello", "+auth", "+select", "+hmget", "+evalsha", "+eval", "+hget", "+hset", "+del", "+pexpire", "+persist")
	require.NoError(t, err)
	storetest.Run(t, func(t *testing.T) persistence.Store {
		return newStore(t, srv, redisstore.Options{Username: "silo", Password: "pw", DB: 1, KeyPrefix: "granary:" + uniquePrefix()})
	})

	s := newStore(t, srv, redisstore.Options{Username: "silo", Password: "pw", KeyPrefix: "other:"})
	_, err = s.Write(bg, testKey, []byte("x"), "")
	assert.ErrorIs(t, err, redisstore.ErrRejected, "keys outside the user's pattern are refused")
}
