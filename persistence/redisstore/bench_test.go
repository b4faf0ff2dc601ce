package redisstore_test

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/granary-go/granary/internal/redistest"
	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/persistence/redisstore"
)

// benchClients is how many goroutines (and connections) every
// throughput benchmark uses, redis-benchmark included.
const benchClients = 16

// benchValue is the size of a stored value: a small grain state.
const benchValue = 64

// BenchmarkRedis compares, on one redis-server, the store's Write and Read
// with redis-benchmark's SET and GET and with go-redis's own SET and GET,
// all at benchClients concurrent clients. The ratio of ns/op between
// store and redis-benchmark is the store's cost over the server's ceiling;
// go-redis's rows split it into client and script.
func BenchmarkRedis(b *testing.B) {
	srv := redistest.Start(b, redistest.Options{})
	store, err := redisstore.New(redisstore.Options{Addr: srv.Addr(), KeyPrefix: "bench:", PoolSize: benchClients})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: benchClients, ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = client.Close() })
	ctx := context.Background()
	value := make([]byte, benchValue)

	b.Run("redis-benchmark-SET", func(b *testing.B) { redisBenchmark(b, srv, "set") })
	b.Run("store-Write", func(b *testing.B) {
		parallel(b, func(key persistence.Key) func() error {
			etag := ""
			return func() (err error) {
				etag, err = store.Write(ctx, key, value, etag)
				return err
			}
		})
	})
	b.Run("go-redis-SET", func(b *testing.B) {
		parallel(b, func(key persistence.Key) func() error {
			return func() error { return client.Set(ctx, key.GrainKey, value, 0).Err() }
		})
	})
	b.Run("redis-benchmark-GET", func(b *testing.B) { redisBenchmark(b, srv, "get") })
	b.Run("store-Read", func(b *testing.B) {
		parallel(b, func(key persistence.Key) func() error {
			if _, err := store.Write(ctx, key, value, ""); err != nil {
				b.Fatal(err)
			}
			return func() error {
				_, _, err := store.Read(ctx, key)
				return err
			}
		})
	})
	b.Run("go-redis-GET", func(b *testing.B) {
		parallel(b, func(key persistence.Key) func() error {
			if err := client.Set(ctx, key.GrainKey, value, 0).Err(); err != nil {
				b.Fatal(err)
			}
			return func() error { return client.Get(ctx, key.GrainKey).Err() }
		})
	})
}

var benchKeys atomic.Int64

// parallel runs op from benchClients goroutines, each on a key of its own
// (grains rarely share state), and reports operations per second.
func parallel(b *testing.B, newOp func(key persistence.Key) func() error) {
	b.SetParallelism((benchClients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := persistence.Key{GrainType: "bench", GrainKey: "k" + strconv.FormatInt(benchKeys.Add(1), 10), Name: "state"}
		op := newOp(key)
		for pb.Next() {
			if err := op(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// redisBenchmark runs b.N requests of test through redis-benchmark, with
// benchClients connections and values of benchValue bytes, so that its
// ns/op is the server's ceiling for the same load.
func redisBenchmark(b *testing.B, srv *redistest.Server, test string) {
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		b.Skip("redis-benchmark not on PATH; it comes with redis-server (apt-get install redis-server)")
	}
	cmd := exec.Command(bin, "-h", "127.0.0.1", "-p", strconv.Itoa(srv.Port()),
		"-c", strconv.Itoa(benchClients), "-n", strconv.Itoa(max(b.N, benchClients)),
		"-d", strconv.Itoa(benchValue), "-r", "10000", "-t", test, "-q")
	b.ResetTimer()
	out, err := cmd.CombinedOutput()
	b.StopTimer()
	if err != nil {
		b.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkFlusher10000DirtyGrains measures how fast the flusher writes
// 10 000 dirty grains at its default 50 ms period: each iteration marks
// every grain dirty and waits until all are written. writes/s is what
// the flusher sustains; ms/round is how long a period's writes take (at
// best one period, as a round starts at the next tick).
func BenchmarkFlusher10000DirtyGrains(b *testing.B) {
	b.Run("memory", func(b *testing.B) { benchFlusher(b, persistence.NewMemoryStore()) })
	b.Run("redis", func(b *testing.B) {
		srv := redistest.Start(b, redistest.Options{})
		store, err := redisstore.New(redisstore.Options{Addr: srv.Addr(), KeyPrefix: "bench:"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = store.Close() })
		benchFlusher(b, store)
	})
}

func benchFlusher(b *testing.B, store persistence.Store) {
	const grains = 10_000
	ctx := context.Background()
	flusher, err := persistence.NewFlusher(store, persistence.FlusherOptions{})
	if err != nil {
		b.Fatal(err)
	}
	// The owner runs each snapshot at once, on the flusher's goroutine: the
	// benchmark measures the flusher and the store, not an actor mailbox.
	inline := func(fn func()) bool { fn(); return true }
	state := make([]byte, 16)
	snapshot := func() ([]byte, error) { return state, nil }
	records := make([]*persistence.Record, grains)
	for i := range records {
		key := persistence.Key{GrainType: "bench", GrainKey: fmt.Sprint(i), Name: "state"}
		if records[i], _, err = flusher.Open(ctx, key, inline, snapshot); err != nil {
			b.Fatal(err)
		}
	}
	if err := flusher.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = flusher.Stop(ctx) })

	poll := time.NewTicker(100 * time.Microsecond)
	defer poll.Stop()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for _, r := range records {
			r.MarkDirty()
		}
		want := uint64(i+1) * grains
		for flusher.Stats().WritesSucceeded < want {
			<-poll.C
		}
	}
	b.StopTimer()
	if failed := flusher.Stats().WritesFailed; failed > 0 {
		b.Fatalf("%d writes failed", failed)
	}
	b.ReportMetric(float64(b.N*grains)/b.Elapsed().Seconds(), "writes/s")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/round")
}
