package redisstore_test

import (
	"context"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/granary-go/granary/persistence/redisstore"
	"github.com/granary-go/granary/silo"
)

// A silo whose grains keep their state in Redis: every silo of the
// cluster opens the same URL.
func ExampleNewFromURL() {
	store, err := redisstore.NewFromURL("redis://localhost:6379/0?prefix=granary:prod:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // after the silo has stopped
	if err := store.Ping(context.Background()); err != nil {
		log.Fatal(err) // fail at start, not at the first activation
	}
	s, err := silo.New(silo.Options{}, silo.WithStore(store))
	if err != nil {
		log.Fatal(err)
	}
	_ = s // register grains, Start, ..., Stop
}

// Redis Cluster (or Sentinel, with redis.NewFailoverClient): build the
// go-redis client and wrap it. The caller keeps owning the client.
func ExampleNewWithClient() {
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"redis-1:6379", "redis-2:6379", "redis-3:6379"},
		ContextTimeoutEnabled: true, // let a call's deadline bound its network I/O
	})
	defer client.Close()
	store, err := redisstore.NewWithClient(client, "granary:prod:")
	if err != nil {
		log.Fatal(err)
	}
	_ = store // silo.WithStore(store)
}
