package ratelimit_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/internal/silohost"
)

// BenchmarkIdleKeyMemory makes b.N token-bucket keys in one silo (its own
// caller, the memory store, the wall clock), one acquisition each, and
// reports the live heap they hold once idle: after their state is
// written, with every activation still alive (the bucket refills over an
// hour, so none is at rest and none is collected). B/key is the growth of
// HeapAlloc after a collection, divided by the keys; it includes the
// memory store's copy of each key's state. Run it with -benchtime
// 100000x; GRANARY_HEAPPROFILE names a file for a heap profile taken at
// the measurement (-test.memprofilerate=4096 samples finely enough).
func BenchmarkIdleKeyMemory(b *testing.B) {
	e := newEnv(b, uncounted())
	caller := e.caller(viaSilo)
	opts := ratelimit.TokenBucketOptions{TokenLimit: 10, TokensPerPeriod: 2, ReplenishmentPeriod: time.Hour}
	ctx := context.Background()
	keys := b.N
	var next atomic.Int64
	call := func(int) error {
		key := fmt.Sprint("idle-", next.Add(1))
		l, err := ratelimit.TokenBucket(caller, key, opts).AcquireAndConfigure(ctx, 1)
		if err != nil {
			return err
		}
		if !l.Acquired() {
			return fmt.Errorf("%s: rejected: %v", key, l)
		}
		return nil
	}
	before := liveHeap()
	b.ResetTimer()
	if _, err := timeWorkers(8, keys, call); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	h := silohost.Host(e.silo)
	deadline := time.Now().Add(time.Minute)
	for e.records() < keys { // the flusher writes every key's state within a period or two
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d states written", e.records(), keys)
		}
		time.Sleep(10 * time.Millisecond)
	}
	after := liveHeap()
	if n := h.Stats().Active; n != keys {
		b.Fatalf("%d activations alive, want %d", n, keys)
	}
	if path := os.Getenv("GRANARY_HEAPPROFILE"); path != "" && keys > 1 { // not the testing package's first run of one
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(keys), "B/key")
	b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/float64(keys), "inuse-B/key")
	runtime.KeepAlive(caller)
}

// liveHeap returns the memory statistics after a full collection.
func liveHeap() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms
}
