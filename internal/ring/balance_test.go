package ring

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// shares returns each silo's fraction of the hash space.
func shares(r *Ring) []float64 {
	out := make([]float64, r.Len())
	for _, s := range r.segments() {
		out[s.owner] += (float64(s.Last-s.First) + 1) / math.Exp2(64)
	}
	return out
}

// balance summarises, over many clusters of n silos with random ids, the
// largest silo's share divided by the fair share 1/n: its median, 95th
// percentile and worst case.
func balance(n, vnodes, clusters int, seed uint64) (median, p95, worst float64) {
	rng := rand.New(rand.NewPCG(seed, 0))
	ratios := make([]float64, clusters)
	for c := range ratios {
		ratios[c] = slices.Max(shares(New(randomSilos(rng, n), vnodes))) * float64(n)
	}
	slices.Sort(ratios)
	return ratios[clusters/2], ratios[clusters*95/100], ratios[clusters-1]
}

const balanceClusters = 300

// TestDefaultVirtualNodesBalanceTheDirectory bounds how much more than its
// fair share of the directory the busiest silo gets with the default
// virtual-node count.
func TestDefaultVirtualNodesBalanceTheDirectory(t *testing.T) {
	for _, n := range []int{3, 5, 10, 20} {
		_, p95, _ := balance(n, DefaultVirtualNodes, balanceClusters, uint64(n))
		// With k positions a silo's share has a relative spread of about
		// 1/sqrt(k); 1.5 leaves room for the busiest of 20 silos.
		assert.Less(t, p95, 1.5, "silos=%d", n)
	}
}

// TestRingBalanceFigures prints, with -v, the balance at several
// virtual-node counts that docs/cluster.md quotes to justify the default.
func TestRingBalanceFigures(t *testing.T) {
	if !testing.Verbose() {
		t.Skip("prints figures only; run with -v")
	}
	for _, vnodes := range []int{1, 10, 30, 64, 128} {
		for _, n := range []int{3, 5, 10, 20} {
			median, p95, worst := balance(n, vnodes, balanceClusters, uint64(n))
			t.Logf("vnodes=%3d silos=%2d busiest/fair: median %.2f  p95 %.2f  worst %.2f", vnodes, n, median, p95, worst)
		}
	}
}
