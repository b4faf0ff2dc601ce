package ratelimit_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

// storm queues n acquisitions that can never be granted on h (its one
// permit is held and it never replenishes), moves the fake clock past
// their budget (but not to the response timeout) and returns the leases
// they came back with, and how far apart, in wall time, they came.
func storm(t *testing.T, e *env, h ratelimit.Limiter, ctx context.Context, n int, budget time.Duration) ([]*ratelimit.Lease, time.Duration) {
	t.Helper()
	type result struct {
		lease *ratelimit.Lease
		err   error
		at    time.Time
	}
	results := make(chan result, n)
	for range n {
		go func() {
			l, err := h.Acquire(ctx, 1)
			results <- result{l, err, time.Now()}
		}()
	}
	waitForWaiting(t, h, int64(n))
	e.clock.Advance(budget)
	var leases []*ratelimit.Lease
	var first, last time.Time
	for range n {
		r := <-results
		require.NoError(t, r.err)
		leases = append(leases, r.lease)
		if first.IsZero() || r.at.Before(first) {
			first = r.at
		}
		if r.at.After(last) {
			last = r.at
		}
	}
	return leases, last.Sub(first)
}

func TestTimeoutStormLeavesNoQueuedOrOrphanedPermits(t *testing.T) {
	const queued = 16
	// Unconfigured grains use the silo's defaults: one permit, room for
	// all; configured ones are reconfigured by their holder's options.
	e := newEnv(t, withFakeClock(), withResponseTimeout(time.Second), withDefaults(allDefaults(1, queued)))
	c := e.client()
	for _, alg := range algorithms {
		for _, cancellable := range []bool{false, true} {
			for _, configured := range []bool{false, true} {
				name := fmt.Sprintf("%s/cancellable=%v/configured=%v", alg.name, cancellable, configured)
				t.Run(name, func(t *testing.T) {
					h := alg.holder(c, name, 1, queued+4, configured)
					ctx := context.Background()
					if cancellable {
						var cancel context.CancelFunc
						ctx, cancel = context.WithCancel(ctx) // never cancelled
						defer cancel()
					}
					held, err := h.Acquire(ctx, 1)
					require.NoError(t, err)
					require.True(t, held.Acquired())

					leases, spread := storm(t, e, h, ctx, queued, 800*time.Millisecond)
					t.Logf("%d rejections within %v of each other (wall time)", queued, spread)
					for _, l := range leases {
						assert.False(t, l.Acquired())
						assert.Equal(t, ratelimit.ReasonLeaseNotAcquired, l.Reason(), "the grain's answer, before the response timeout")
					}
					waitForWaiting(t, h, 0)
					st, err := h.Statistics(ctx)
					require.NoError(t, err)
					assert.Zero(t, st.QueuedPermits, "every queue is empty")
					require.NoError(t, held.Release(ctx))
					if alg.releases {
						assert.EqualValues(t, 1, available(t, h), "the concurrency limiter has its full capacity")
					}
				})
			}
		}
	}
}

// prober is a grain that acquires from a limiter through its silo, as a
// grain protecting a resource would.
type prober struct{ act *actor.Context }

func (p *prober) OnActivate(_ context.Context, act *actor.Context) error {
	p.act = act
	return nil
}

const proberType = "test.Prober"

var proberAcquire = &proxy.MethodDesc{Service: proberType, Name: "Acquire", ID: proxy.MethodID(proberType, "Acquire")}

// proberService's Acquire takes "algorithm/key" and answers the lease's
// reason ("" when acquired).
var proberService = &proxy.ServiceDesc{Name: proberType, Methods: []proxy.Method{{
	Desc:       proberAcquire,
	NewRequest: func() proto.Message { return new(wrapperspb.StringValue) },
	Invoke: func(ctx context.Context, g any, req proto.Message) (proto.Message, error) {
		p := g.(*prober)
		name, key, _ := strings.Cut(req.(*wrapperspb.StringValue).Value, "/")
		l, err := algorithmNamed(name).holder(silo.CallerOf(p.act), key, 1, 16, false).Acquire(ctx, 1)
		if err != nil {
			return nil, err
		}
		return wrapperspb.String(l.Reason()), nil
	},
}}}

func registerProber(s *silo.Silo) error {
	return s.RegisterGrain(proberService, func(actor.GrainID) any { return &prober{} })
}

func TestTimeoutStormFromInsideASilo(t *testing.T) {
	const queued = 16
	// The silo's response timeout (500 ms) gives the grains' calls 400 ms.
	e := newEnv(t, withFakeClock(), withResponseTimeout(500*time.Millisecond), withDefaults(allDefaults(1, queued)), withGrains(registerProber))
	for _, alg := range algorithms {
		t.Run(alg.name, func(t *testing.T) {
			h := alg.holder(e.silo.Caller(), "origin", 1, queued, false)
			held, err := h.Acquire(context.Background(), 1)
			require.NoError(t, err)
			require.True(t, held.Acquired())
			var wg sync.WaitGroup
			reasons := make(chan string, queued)
			for i := range queued {
				wg.Add(1)
				go func() {
					defer wg.Done()
					out := new(wrapperspb.StringValue)
					ref := proxy.NewRef(e.silo.Caller(), proberType, fmt.Sprint("prober-", i))
					err := ref.Invoke(context.Background(), proberAcquire, wrapperspb.String(alg.name+"/origin"), out, proxy.WithTimeout(time.Minute))
					assert.NoError(t, err)
					reasons <- out.Value
				}()
			}
			waitForWaiting(t, h, queued)
			e.clock.Advance(400 * time.Millisecond)
			wg.Wait()
			close(reasons)
			for r := range reasons {
				assert.Equal(t, ratelimit.ReasonLeaseNotAcquired, r)
			}
			waitForWaiting(t, h, 0)
			require.NoError(t, held.Release(context.Background()))
			if alg.releases {
				assert.EqualValues(t, 1, available(t, h))
			}
		})
	}
}
