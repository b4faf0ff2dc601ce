package ratelimit_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/granary-go/granary/grains/ratelimit"
)

// BenchmarkLeasedHotKey measures a hot key through leased quota against a
// limit it exceeds: 16 workers, each with a holder of its own, on one
// fixed window of 10 000 permits per 100 ms, which each slice of the
// measurement (16 384 acquisitions) runs past. In alternating slices with
// the bare transport echo (as BenchmarkHolderRatio does) it reports the
// acquisitions per second, granted or rejected, as a ratio to the echo's
// calls (x-echo); the permits granted from slices in each complete window
// over the limit, the largest (granted/limit-max) and the mean over the
// windows that granted anything (granted/limit-mean: windows in which only
// the echo ran grant nothing); the p99 of a local answer, a grant from the
// slice with no wait for a slice request (local-p99-ns, every 16th
// acquisition timed); and the share of acquisitions answered with no call
// (local-share).
func BenchmarkLeasedHotKey(b *testing.B) {
	const (
		workers = 16
		limit   = 10_000
		window  = 100 * time.Millisecond
		slice   = 16384
	)
	for _, k := range entries {
		b.Run(k.String(), func(b *testing.B) {
			e := newEnv(b, uncounted())
			caller := e.caller(k)
			o := ratelimit.FixedWindowOptions{PermitLimit: limit, Window: window}
			holders := make([]*ratelimit.Holder[ratelimit.FixedWindowOptions], workers)
			asLimiters := make([]ratelimit.Limiter, workers)
			for w := range holders {
				holders[w] = ratelimit.FixedWindow(caller, "leased-hot", o).Leased(ratelimit.LeaseOptions{})
				asLimiters[w] = holders[w]
			}
			closeHolders(b, asLimiters)
			ec := benchEcho(b)
			ctx, payload := context.Background(), make([]byte, 48)
			counts := make([]int, workers)
			latencies := make([][]time.Duration, workers)
			leased := func(w int) error {
				h := holders[w]
				timed := counts[w]%16 == 0
				counts[w]++
				var start time.Time
				if timed {
					start = time.Now()
				}
				l, err := h.Acquire(ctx, 1)
				if err != nil {
					return err
				}
				if timed && ratelimit.AnsweredLocally(h, l) {
					latencies[w] = append(latencies[w], time.Since(start))
				}
				return nil
			}
			bare := func(int) error { _, err := ec.Call(payload); return err }
			for _, warm := range []func(int) error{leased, bare} {
				if _, err := timeWorkers(workers, slice, warm); err != nil {
					b.Fatal(err)
				}
			}
			for w := range latencies {
				latencies[w] = latencies[w][:0]
			}
			before := leasedTotals(holders)
			var leasedTime, echoTime time.Duration
			b.ResetTimer()
			done := 0
			for done < b.N {
				n := min(slice, b.N-done)
				l, err := timeWorkers(workers, n, leased)
				if err != nil {
					b.Fatal(err)
				}
				x, err := timeWorkers(workers, n, bare)
				if err != nil {
					b.Fatal(err)
				}
				leasedTime, echoTime = leasedTime+l, echoTime+x
				done += n
			}
			b.StopTimer()
			after := leasedTotals(holders)
			answered := after.Local + after.LocalRejected - before.Local - before.LocalRejected
			all := answered + after.Calls - before.Calls
			b.ReportMetric(float64(done)/leasedTime.Seconds(), "ops/s")
			b.ReportMetric(float64(done)/echoTime.Seconds(), "echo-calls/s")
			b.ReportMetric(echoTime.Seconds()/leasedTime.Seconds(), "x-echo")
			b.ReportMetric(float64(answered)/float64(max(all, 1)), "local-share")
			if most, mean, ok := grantedPerWindow(holders, limit); ok {
				b.ReportMetric(most, "granted/limit-max")
				b.ReportMetric(mean, "granted/limit-mean")
			}
			var sample []time.Duration
			for _, l := range latencies {
				sample = append(sample, l...)
			}
			if len(sample) > 0 {
				slices.Sort(sample)
				b.ReportMetric(float64(sample[len(sample)*99/100]), "local-p99-ns")
			}
		})
	}
}

// leasedStats is what the holders answered, summed.
type leasedStats struct{ Local, LocalRejected, Calls int64 }

func leasedTotals(holders []*ratelimit.Holder[ratelimit.FixedWindowOptions]) leasedStats {
	var t leasedStats
	for _, h := range holders {
		st, _, ok := ratelimit.LeasedStats(h)
		if !ok {
			panic(fmt.Sprintf("%v leases nothing", h.GrainID()))
		}
		t.Local, t.LocalRejected, t.Calls = t.Local+st.Local, t.LocalRejected+st.LocalRejected, t.Calls+st.Calls
	}
	return t
}

// grantedPerWindow sums the holders' local grants per window and returns
// the largest and the mean over limit, of the windows every holder still
// remembers, that are complete (the first and the last are left out) and
// granted anything.
func grantedPerWindow(holders []*ratelimit.Holder[ratelimit.FixedWindowOptions], limit int64) (most, mean float64, ok bool) {
	perWindow := map[int64]int64{}
	var oldest int64
	for _, h := range holders {
		_, intervals, _ := ratelimit.LeasedStats(h)
		if len(intervals) == 0 {
			continue
		}
		oldest = max(oldest, intervals[0].IntervalID)
		for _, iv := range intervals {
			perWindow[iv.IntervalID] += iv.Granted
		}
	}
	var ids []int64
	for id := range perWindow {
		if id >= oldest {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	if len(ids) < 3 {
		return 0, 0, false
	}
	ids = ids[1 : len(ids)-1]
	var sum float64
	busy := 0
	for _, id := range ids {
		if perWindow[id] == 0 {
			continue
		}
		r := float64(perWindow[id]) / float64(limit)
		most = max(most, r)
		sum += r
		busy++
	}
	return most, sum / float64(max(busy, 1)), busy > 0
}
