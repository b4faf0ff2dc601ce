package limiter

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The fast path (an attempt that succeeds or fails at once) must not
// allocate: a grain answers most acquisitions this way.
func TestAttemptAcquireDoesNotAllocate(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			roomy := k.make(t, spec{limit: math.MaxInt64})
			full := k.make(t, spec{limit: 1})
			_, _ = full.AttemptAcquire(t0, 1)
			allocs := testing.AllocsPerRun(1000, func() {
				if l, _ := roomy.AttemptAcquire(t0, 1); !l.Acquired() {
					t.Fatal("rejected")
				}
				if l, _ := full.AttemptAcquire(t0, 1); l.Acquired() {
					t.Fatal("acquired")
				}
				_, _, _ = roomy.Acquire(t0, 1)
				_, _ = roomy.NextTick(t0)
				_, _ = roomy.Statistics()
			})
			require.Zero(t, allocs)
		})
	}
}
