package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkFailureDetection measures, per timing profile, how long the
// surviving silos of a four-silo cluster take to report a killed silo as
// failed (ms/failed: the slowest survivor, averaged over iterations), and a
// stopped one as left (ms/left). ns/op includes starting the cluster and
// means nothing. Run with -benchtime=Nx; the LAN profile takes seconds per
// iteration.
func BenchmarkFailureDetection(b *testing.B) {
	for _, profile := range []struct {
		name    string
		timings Timings
	}{{"fast", FastTimings()}, {"lan", LANTimings()}} {
		b.Run(profile.name, func(b *testing.B) {
			var failed, left time.Duration
			for i := range b.N {
				ms := startBenchSilos(b, 4, profile.timings, i)
				subs := make([]*Subscription, 2)
				for k := range subs {
					_, subs[k] = ms[k].Subscribe()
				}
				victim := ms[3].Local().ID
				start := time.Now()
				ms[3].Kill()
				failed += slowest(b, subs, victim, EventFailed, start)

				leaver := ms[2].Local().ID
				start = time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if err := ms[2].Stop(ctx); err != nil {
					b.Fatal(err)
				}
				cancel()
				left += slowest(b, subs, leaver, EventLeft, start)
				for _, m := range ms {
					m.Kill()
				}
			}
			b.ReportMetric(float64(failed.Milliseconds())/float64(b.N), "ms/failed")
			b.ReportMetric(float64(left.Milliseconds())/float64(b.N), "ms/left")
		})
	}
}

func startBenchSilos(b *testing.B, n int, timings Timings, round int) []*Membership {
	b.Helper()
	var ms []*Membership
	for k := range n {
		opts := siloOptions(fmt.Sprintf("silo-%d-%d", round, k))
		opts.Timings = timings
		if k > 0 {
			opts.Seeds = []string{ms[0].GossipAddress()}
		}
		ms = append(ms, startSilo(b, opts))
	}
	waitForViews(b, ms, ms...)
	return ms
}

// slowest waits until every subscription reports id's departure as kind
// and returns the time since start at which the last one did. Waiting for
// them in turn measures exactly that: each wait ends at the later of its
// own event and the previous wait.
func slowest(b *testing.B, subs []*Subscription, id string, kind EventKind, start time.Time) time.Duration {
	b.Helper()
	for _, s := range subs {
		if e := waitForEvent(b, s, time.Minute, departureOf(id)); e.Kind != kind {
			b.Fatalf("%s reported %v, want %v", id, e.Kind, kind)
		}
	}
	return time.Since(start)
}
