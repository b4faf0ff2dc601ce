package limitgrain

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
)

// Defaults of the fuzzed grains.
var (
	fuzzConcurrency = limiter.ConcurrencyOptions{PermitLimit: 4, QueueLimit: 2}
	fuzzFixed       = limiter.FixedWindowOptions{PermitLimit: 4, QueueLimit: 2, Window: time.Second}
	fuzzSliding     = limiter.SlidingWindowOptions{PermitLimit: 4, QueueLimit: 2, Window: time.Second, SegmentsPerWindow: 3}
	fuzzBucket      = limiter.TokenBucketOptions{TokenLimit: 4, QueueLimit: 2, TokensPerPeriod: 1, ReplenishmentPeriod: time.Second}
)

// FuzzRestoringStoredState feeds stored state, which a store hands back
// as bytes, to each grain kind: whatever it holds, an activation either
// refuses it (LoadState fails) or restores a limiter that keeps its
// invariants.
func FuzzRestoringStoredState(f *testing.F) {
	for kind, g := range []interface{ SaveState() ([]byte, error) }{
		seedGrain[limiter.ConcurrencyOptions, *pb.ConcurrencyOptions, *pb.ConcurrencyAcquireRequest](f, concurrency, fuzzConcurrency),
		seedGrain[limiter.FixedWindowOptions, *pb.FixedWindowOptions, *pb.FixedWindowAcquireRequest](f, fixedWindow, fuzzFixed),
		seedGrain[limiter.SlidingWindowOptions, *pb.SlidingWindowOptions, *pb.SlidingWindowAcquireRequest](f, slidingWindow, fuzzSliding),
		seedGrain[limiter.TokenBucketOptions, *pb.TokenBucketOptions, *pb.TokenBucketAcquireRequest](f, tokenBucket, fuzzBucket),
	} {
		data, err := g.SaveState()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(kind), data)
	}
	f.Add(uint8(0), []byte{0x4a, 0x02, 0x08, 0x01})       // a lease record without permits
	f.Add(uint8(2), []byte{0x42, 0x03, 0x05, 0x05, 0x05}) // segments that do not add up
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		switch kind % 4 {
		case 0:
			fuzzRestore[limiter.ConcurrencyOptions, *pb.ConcurrencyOptions, *pb.ConcurrencyAcquireRequest](t, concurrency, fuzzConcurrency, pb.ConcurrencyLimiterGrainType, data)
		case 1:
			fuzzRestore[limiter.FixedWindowOptions, *pb.FixedWindowOptions, *pb.FixedWindowAcquireRequest](t, fixedWindow, fuzzFixed, pb.FixedWindowLimiterGrainType, data)
		case 2:
			fuzzRestore[limiter.SlidingWindowOptions, *pb.SlidingWindowOptions, *pb.SlidingWindowAcquireRequest](t, slidingWindow, fuzzSliding, pb.SlidingWindowLimiterGrainType, data)
		default:
			fuzzRestore[limiter.TokenBucketOptions, *pb.TokenBucketOptions, *pb.TokenBucketAcquireRequest](t, tokenBucket, fuzzBucket, pb.TokenBucketLimiterGrainType, data)
		}
	})
}

// seedGrain returns a grain with permits taken and a lease held, whose
// snapshot seeds the corpus.
func seedGrain[O comparable, P proto.Message, R acquireRequest[P]](f *testing.F, alg *algorithm[O, P], defaults O) interface{ SaveState() ([]byte, error) } {
	rt := &fakeRuntime{now: epoch, budget: time.Second}
	g := newGrain[O, P, R](alg, defaults, nil)
	rt.save = g.SaveState
	g.start(rt)
	if _, err := g.Acquire(context.Background(), &pb.AcquireRequest{Permits: 3}); err != nil {
		f.Fatal(err)
	}
	return g
}

func fuzzRestore[O comparable, P proto.Message, R acquireRequest[P]](t *testing.T, alg *algorithm[O, P], defaults O, grainType string, data []byte) {
	rt := newRuntime(t, grainType)
	rt.now = epoch.Add(1500 * time.Millisecond)
	g := newGrain[O, P, R](alg, defaults, nil)
	rt.save = g.SaveState
	if err := g.LoadState(data); err != nil {
		return
	}
	g.start(rt)
	st := stats(t, g)
	limit := alg.limit(g.options)
	if st.AvailablePermits < 0 || st.AvailablePermits > limit {
		t.Fatalf("restored %d permits of %d", st.AvailablePermits, limit)
	}
	if st.TotalFailedLeases < 0 || st.TotalSuccessfulLeases < 0 {
		t.Fatalf("negative totals: %v", st)
	}
	// The restored limiter works: it grants, releases and snapshots.
	md := acquire(rt, g, min(1, limit)).reply
	if lease, ok := md.(*pb.LeaseMetadata); ok && lease.Acquired && !lease.ReleaseOptional {
		if _, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: lease.LeaseId}); err != nil {
			t.Fatal(err)
		}
	}
	rt.advance(10 * time.Millisecond) // a few ticks, whatever the restored period
	if _, err := g.SaveState(); err != nil {
		t.Fatal(err)
	}
}
