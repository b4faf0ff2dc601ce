package dashboard

import (
	"cmp"
	"context"
	"slices"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/grains/ratelimit"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	dpb "github.com/granary-go/granary/internal/dashboard/dashboardpb"
	"github.com/granary-go/granary/proxy"
)

func activationsByType(ids []actor.GrainID) []*dpb.TypeCount {
	counts := map[string]int64{}
	for _, id := range ids {
		counts[id.Type]++
	}
	out := make([]*dpb.TypeCount, 0, len(counts))
	for t, n := range counts {
		out = append(out, &dpb.TypeCount{Type: t, Count: n})
	}
	slices.SortFunc(out, func(a, b *dpb.TypeCount) int { return cmp.Compare(a.Type, b.Type) })
	return out
}

// KeyTable is the hottest limiter keys of the cluster.
type KeyTable struct {
	// Active counts the limiter grains active on the silos that answered;
	// Asked those asked for their statistics (at most Options.MaxKeys a
	// silo).
	Active int64 `json:"active"`
	Asked  int64 `json:"asked"`
	// Hottest are sorted by utilization, then refusals, then waiting
	// calls, highest first.
	Hottest []Key `json:"hottest"`
}

// Key is one limiter grain's statistics and limit.
type Key struct {
	Algorithm string `json:"algorithm"`
	Key       string `json:"key"`
	// Silo is the silo its grain is active on.
	Silo string `json:"silo"`
	// Limit is the permit (or token) limit of its configuration;
	// Available the permits free now.
	Limit     int64 `json:"limit"`
	Available int64 `json:"available"`
	// Utilization is the share of the limit in use: 1 - Available/Limit.
	Utilization   float64 `json:"utilization"`
	Succeeded     int64   `json:"succeeded"`
	Refused       int64   `json:"refused"`
	QueuedPermits int64   `json:"queued_permits"`
	WaitingCalls  int64   `json:"waiting_calls"`
	ActiveLeases  int64   `json:"active_leases"`
	// Error is why the grain could not say, if it could not.
	Error string `json:"error,omitempty"`
}

// keyOfWire is the page's key of a silo's answer; its utilization is
// computed here, from the limit and what is available.
func keyOfWire(silo string, k *dpb.Key) Key {
	out := Key{Algorithm: k.Algorithm, Key: k.Key, Silo: silo, Limit: k.Limit, Available: k.Available,
		Succeeded: k.Succeeded, Refused: k.Refused, QueuedPermits: k.QueuedPermits, WaitingCalls: k.WaitingCalls,
		ActiveLeases: k.ActiveLeases, Error: k.Error}
	if k.Error == "" && k.Limit > 0 {
		out.Utilization = 1 - float64(min(max(k.Available, 0), k.Limit))/float64(k.Limit)
	}
	return out
}

// hotter orders keys hottest first: by utilization, then refusals, then
// waiting calls; ties by algorithm, key and silo, so that the table does
// not jump.
func hotter(a, b Key) int {
	return cmp.Or(cmp.Compare(b.Utilization, a.Utilization), cmp.Compare(b.Refused, a.Refused),
		cmp.Compare(b.WaitingCalls, a.WaitingCalls), cmp.Compare(a.Algorithm, b.Algorithm), cmp.Compare(a.Key, b.Key),
		cmp.Compare(a.Silo, b.Silo))
}

// algorithm is a limiter grain type as the dashboard reads it: the name
// the rate-limit API gives it, and a key's limiter with its limit.
type algorithm struct {
	name  string
	limit func(ctx context.Context, c proxy.Caller, key string) (ratelimit.Limiter, int64, error)
}

// algorithmOf reads a key's limiter through holder, and its limit from
// its configuration.
func algorithmOf[O ratelimit.Options](name string, holder func(proxy.Caller, string, ...O) *ratelimit.Holder[O], limit func(O) int64) algorithm {
	return algorithm{name: name, limit: func(ctx context.Context, c proxy.Caller, key string) (ratelimit.Limiter, int64, error) {
		h := holder(c, key)
		o, err := h.Configuration(ctx)
		return h, limit(o), err
	}}
}

// algorithms are the limiter grain types.
var algorithms = map[string]algorithm{
	pb.ConcurrencyLimiterGrainType:   algorithmOf("concurrency", ratelimit.Concurrency, func(o ratelimit.ConcurrencyOptions) int64 { return o.PermitLimit }),
	pb.FixedWindowLimiterGrainType:   algorithmOf("fixed-window", ratelimit.FixedWindow, func(o ratelimit.FixedWindowOptions) int64 { return o.PermitLimit }),
	pb.SlidingWindowLimiterGrainType: algorithmOf("sliding-window", ratelimit.SlidingWindow, func(o ratelimit.SlidingWindowOptions) int64 { return o.PermitLimit }),
	pb.TokenBucketLimiterGrainType:   algorithmOf("token-bucket", ratelimit.TokenBucket, func(o ratelimit.TokenBucketOptions) int64 { return o.TokenLimit }),
}

// hottestKeys asks up to MaxKeys of the active limiter grains for their
// statistics and configuration, and lists the Hottest. The grains are
// this silo's, so the calls stay in the process.
func (d *Dashboard) hottestKeys(ctx context.Context, active []actor.GrainID) *dpb.KeyTable {
	table := &dpb.KeyTable{}
	var limiters []actor.GrainID
	for _, id := range active {
		if _, ok := algorithms[id.Type]; ok {
			limiters = append(limiters, id)
		}
	}
	table.Active = int64(len(limiters))
	// Sorted, so that a silo with more than MaxKeys asks the same ones
	// each time rather than a new sample that makes the table jump.
	slices.SortFunc(limiters, func(a, b actor.GrainID) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Key, b.Key))
	})
	limiters = limiters[:min(len(limiters), d.opts.MaxKeys)]
	table.Asked = int64(len(limiters))
	keys := make([]*dpb.Key, 0, len(limiters))
	caller := d.silo.Caller()
	for _, id := range limiters {
		keys = append(keys, d.keyOf(ctx, caller, id))
	}
	slices.SortFunc(keys, func(a, b *dpb.Key) int { return hotter(keyOfWire("", a), keyOfWire("", b)) })
	table.Hottest = keys[:min(len(keys), d.opts.Hottest)]
	return table
}

func (d *Dashboard) keyOf(ctx context.Context, caller proxy.Caller, id actor.GrainID) *dpb.Key {
	alg := algorithms[id.Type]
	k := &dpb.Key{Algorithm: alg.name, Key: id.Key}
	ctx, cancel := context.WithTimeout(ctx, d.opts.CallTimeout)
	defer cancel()
	l, limit, err := alg.limit(ctx, caller, id.Key)
	if err != nil {
		k.Error = truncate(err.Error(), maxErrorBytes)
		return k
	}
	st, err := l.Statistics(ctx)
	if err != nil {
		k.Error = truncate(err.Error(), maxErrorBytes)
		return k
	}
	k.Limit, k.Available = limit, st.AvailablePermits
	k.Succeeded, k.Refused = st.TotalSuccessfulLeases, st.TotalFailedLeases
	k.QueuedPermits, k.WaitingCalls, k.ActiveLeases = st.QueuedPermits, st.WaitingCalls, st.ActiveLeases
	return k
}
