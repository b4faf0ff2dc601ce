package ring

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/granary-go/granary/actor"
)

// benchGrains are ids shaped like real ones: a contract name and a short key.
func benchGrains(n int) []actor.GrainID {
	ids := make([]actor.GrainID, n)
	for i := range ids {
		ids[i] = actor.GrainID{Type: "ratelimit.v1.Limiter", Key: fmt.Sprintf("tenant-%d/api", i)}
	}
	return ids
}

// BenchmarkOwnerOf is the directory lookup on the path of every first call
// to a grain: hash the id, find its owner.
func BenchmarkOwnerOf(b *testing.B) {
	ids := benchGrains(1024)
	for _, silos := range []int{3, 10, 100} {
		for _, vnodes := range []int{30, 64, 128} {
			b.Run(fmt.Sprintf("silos=%d/vnodes=%d", silos, vnodes), func(b *testing.B) {
				r := New(randomSilos(rand.New(rand.NewPCG(1, 1)), silos), vnodes)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if _, ok := r.OwnerOf(ids[i&1023]); !ok {
						b.Fatal("no owner")
					}
					i++
				}
			})
		}
	}
}

func BenchmarkHash(b *testing.B) {
	ids := benchGrains(1024)
	b.ReportAllocs()
	var sink uint64
	i := 0
	for b.Loop() {
		sink += Hash(ids[i&1023])
		i++
	}
	_ = sink
}

// BenchmarkNewAndDiff is the work of one view change: build the new ring and
// diff it against the old one.
func BenchmarkNewAndDiff(b *testing.B) {
	for _, silos := range []int{3, 10, 100} {
		b.Run(fmt.Sprintf("silos=%d", silos), func(b *testing.B) {
			all := randomSilos(rand.New(rand.NewPCG(2, 2)), silos)
			old := New(all, 0)
			b.ReportAllocs()
			for b.Loop() {
				Diff(old, New(all[1:], 0))
			}
		})
	}
}
