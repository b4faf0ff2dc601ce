package envoyrls_test

import (
	"context"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/internal/envoyrls"
	"github.com/granary-go/granary/proxy"
)

// recordingCaller passes calls on and notes their methods; with
// forgetRemaining it strips what the grains' answers say is left, as a
// silo that predates it answers.
type recordingCaller struct {
	next            proxy.Caller
	forgetRemaining bool
	mu              sync.Mutex
	methods         []string
}

func (c *recordingCaller) Call(ctx context.Context, call proxy.Call, in, out proto.Message) error {
	c.mu.Lock()
	c.methods = append(c.methods, call.Method.Name)
	c.mu.Unlock()
	err := c.next.Call(ctx, call, in, out)
	if md, ok := out.(*pb.LeaseMetadata); ok && c.forgetRemaining {
		md.Remaining, md.HasRemaining, md.ResetInNanos = 0, false, 0
	}
	return err
}

func (c *recordingCaller) ResponseTimeout() time.Duration { return c.next.ResponseTimeout() }

func (c *recordingCaller) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.methods
	c.methods = nil
	return m
}

const remainingRules = `
domain: a
descriptors:
  - {key: fixed, rate_limit: {unit: hour, requests_per_unit: 5}}
  - {key: bucket, rate_limit: {unit: minute, requests_per_unit: 10, algorithm: token_bucket}}
  - {key: sliding, rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window}}
`

// TestLimitRemainingComesWithTheDecision: limit_remaining and a fixed
// window's time to its end come back in the grains' answers to the
// decision itself, one call per descriptor and no second round; the other
// algorithms, whose permits come back piecemeal, say the whole unit.
func TestLimitRemainingComesWithTheDecision(t *testing.T) {
	r := startRLS(t, envoyrls.Options{})
	calls := &recordingCaller{next: r.cluster.Silo(1).Caller()}
	s := envoyrls.NewServer(calls, envoyrls.Options{})
	cfg, err := envoyrls.Parse("rules.yaml", []byte(remainingRules))
	require.NoError(t, err)
	s.SetConfig(cfg)
	client := serveRLS(t, s)
	req := &rlsv3.RateLimitRequest{Domain: "a", HitsAddend: 2, Descriptors: ds(d("fixed", "x"), d("bucket", "x"), d("sliding", "x"))}
	ask := func() *rlsv3.RateLimitResponse {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resp, err := client.ShouldRateLimit(ctx, req)
		require.NoError(t, err)
		return resp
	}

	resp := ask()
	require.Equal(t, ok, resp.GetOverallCode())
	require.ElementsMatch(t, []string{"TryAcquire", "TryAcquire", "TryAcquire"}, calls.take(), "one round of attempts, no Statistics")
	want := []struct {
		remaining uint32
		reset     time.Duration
	}{{3, time.Hour}, {8, time.Minute}, {8, time.Minute}}
	for i, st := range resp.GetStatuses() {
		require.Equal(t, want[i].remaining, st.GetLimitRemaining(), "status %d", i)
		require.Equal(t, want[i].reset, st.GetDurationUntilReset().AsDuration(), "status %d", i)
	}

	r.fake.Advance(10 * time.Minute)
	resp = ask()
	require.Len(t, calls.take(), 3)
	require.Equal(t, uint32(1), resp.GetStatuses()[0].GetLimitRemaining())
	require.Equal(t, 50*time.Minute, resp.GetStatuses()[0].GetDurationUntilReset().AsDuration(), "what is left of the fixed window")
	require.Equal(t, time.Minute, resp.GetStatuses()[1].GetDurationUntilReset().AsDuration())
}

// TestLimitRemainingFromOlderSilosTakesASecondRound: answers that do not
// say what is left (a silo that predates it) are asked for it with
// Statistics, so limit_remaining stays right through a rolling upgrade;
// SkipRemaining leaves it 0 and asks nothing more.
func TestLimitRemainingFromOlderSilosTakesASecondRound(t *testing.T) {
	r := startRLS(t, envoyrls.Options{})
	cfg, err := envoyrls.Parse("rules.yaml", []byte(remainingRules))
	require.NoError(t, err)
	req := &rlsv3.RateLimitRequest{Domain: "a", Descriptors: ds(d("fixed", "x"), d("bucket", "x"))}
	for _, skip := range []bool{false, true} {
		calls := &recordingCaller{next: r.cluster.Silo(0).Caller(), forgetRemaining: true}
		s := envoyrls.NewServer(calls, envoyrls.Options{SkipRemaining: skip})
		s.SetConfig(cfg)
		resp, err := s.ShouldRateLimit(context.Background(), req)
		require.NoError(t, err)
		got := []uint32{resp.GetStatuses()[0].GetLimitRemaining(), resp.GetStatuses()[1].GetLimitRemaining()}
		if skip {
			require.Equal(t, []uint32{0, 0}, got)
			require.ElementsMatch(t, []string{"TryAcquire", "TryAcquire"}, calls.take())
			continue
		}
		require.Equal(t, []uint32{4, 9}, got)
		require.ElementsMatch(t, []string{"TryAcquire", "TryAcquire", "Statistics", "Statistics"}, calls.take())
		require.Equal(t, time.Hour, resp.GetStatuses()[0].GetDurationUntilReset().AsDuration(), "without the grain's word, the whole unit")
	}
}
