package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/granary-go/granary/internal/gossipcut"
)

// BenchmarkHealToOneView measures, per timing profile, how long three
// silos take after a partition {0, 1} | {2} heals to show one view of
// three on every silo (ms/heal: the mean over iterations; ms/heal-max: the
// slowest). Each iteration waits until both sides saw the other fail,
// which takes the failure detection time first. ns/op means nothing. Run
// with -benchtime=Nx; the LAN profile takes seconds per iteration.
func BenchmarkHealToOneView(b *testing.B) {
	for _, profile := range []struct {
		name    string
		timings Timings
	}{{"fast", FastTimings()}, {"lan", LANTimings()}} {
		b.Run(profile.name, func(b *testing.B) {
			var total, worst time.Duration
			for i := range b.N {
				cut := gossipcut.New()
				ctx := gossipcut.NewContext(context.Background(), cut)
				var ms []*Membership
				for k := range 3 {
					opts := siloOptions(fmt.Sprintf("silo-%d-%d", i, k), gossipAddresses(ms...)...)
					opts.Timings = profile.timings
					ms = append(ms, startSiloIn(b, ctx, opts))
				}
				waitForViews(b, ms, ms...)
				cut.Partition(gossipAddresses(ms[0], ms[1]), gossipAddresses(ms[2]))
				deadline := time.Now().Add(2 * time.Minute)
				for !(slices.Equal(ids(ms[:2]), viewIDs(ms[0].View())) && slices.Equal(ids(ms[:2]), viewIDs(ms[1].View())) &&
					slices.Equal(ids(ms[2:]), viewIDs(ms[2].View()))) {
					if time.Now().After(deadline) {
						b.Fatal("the sides never saw each other fail")
					}
					time.Sleep(time.Millisecond) // polling: memberlist has no "converged" event
				}
				cut.Heal()
				healed := time.Now()
				for !oneView(ms) {
					if time.Since(healed) > 2*time.Minute {
						b.Fatal("no single view two minutes after the heal")
					}
					time.Sleep(time.Millisecond)
				}
				took := time.Since(healed)
				total += took
				worst = max(worst, took)
				for _, m := range ms {
					m.Kill()
				}
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/heal")
			b.ReportMetric(float64(worst.Milliseconds()), "ms/heal-max")
		})
	}
}
