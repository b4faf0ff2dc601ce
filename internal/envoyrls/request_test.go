package envoyrls_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/internal/envoyrls"
	"github.com/granary-go/granary/proxy"
)

// TestRequestsOutsideTheContractAreRefused: what Envoy never sends (no
// domain, no descriptor, more than the bounds) is refused with
// InvalidArgument before any grain is asked, and nothing is answered
// before a configuration is loaded.
func TestRequestsOutsideTheContractAreRefused(t *testing.T) {
	calls := &countingCaller{}
	s := envoyrls.NewServer(calls, envoyrls.Options{})
	client := serveRLS(t, s)
	ctx := context.Background()
	_, err := client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "a", Descriptors: ds(d("k", "v"))})
	require.Equal(t, codes.Unavailable, grpcstatus.Code(err))

	cfg, err := envoyrls.Parse("rules.yaml", []byte("domain: a\ndescriptors: [{key: k, rate_limit: {unit: hour, requests_per_unit: 5}}]"))
	require.NoError(t, err)
	s.SetConfig(cfg)
	many := make([]*ratelimitv3.RateLimitDescriptor, envoyrls.MaxDescriptors+1)
	for i := range many {
		many[i] = d("k", "v")
	}
	long := d(strings.Split(strings.Repeat("k,v,", envoyrls.MaxEntries+1), ",")...)
	for name, req := range map[string]*rlsv3.RateLimitRequest{
		"no domain":        {Descriptors: ds(d("k", "v"))},
		"no descriptor":    {Domain: "a"},
		"too many":         {Domain: "a", Descriptors: many},
		"too many entries": {Domain: "a", Descriptors: ds(long)},
		"an unknown unit":  {Domain: "a", Descriptors: ds(&ratelimitv3.RateLimitDescriptor{Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: 99}})},
	} {
		_, err := client.ShouldRateLimit(ctx, req)
		require.Equal(t, codes.InvalidArgument, grpcstatus.Code(err), name)
	}
	require.Zero(t, calls.n(), "no grain was asked")
}

type countingCaller struct {
	mu    sync.Mutex
	calls int
}

func (c *countingCaller) Call(context.Context, proxy.Call, proto.Message, proto.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return proxy.ErrUnavailable
}

func (c *countingCaller) ResponseTimeout() time.Duration { return time.Second }

func (c *countingCaller) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// barrierCaller holds every call until want calls are in flight at once,
// then lets them all through: a request whose descriptors were asked one
// after another never gets there, and its call times out.
type barrierCaller struct {
	next    proxy.Caller
	want    int
	mu      sync.Mutex
	waiting int
	open    chan struct{}
}

func (b *barrierCaller) Call(ctx context.Context, call proxy.Call, in, out proto.Message) error {
	b.mu.Lock()
	b.waiting++
	if b.waiting == b.want {
		close(b.open)
	}
	b.mu.Unlock()
	select {
	case <-b.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.next.Call(ctx, call, in, out)
}

func (b *barrierCaller) ResponseTimeout() time.Duration { return b.next.ResponseTimeout() }

// TestDescriptorsAreAskedInOneRound: the three descriptors of a request
// are in flight at the same time.
func TestDescriptorsAreAskedInOneRound(t *testing.T) {
	r := startRLS(t, envoyrls.Options{SkipRemaining: true})
	barrier := &barrierCaller{next: r.cluster.Silo(1).Caller(), want: 3, open: make(chan struct{})}
	s := envoyrls.NewServer(barrier, envoyrls.Options{SkipRemaining: true})
	cfg, err := envoyrls.Parse("rules.yaml", []byte(`
domain: a
descriptors:
  - {key: one, rate_limit: {unit: hour, requests_per_unit: 5}}
  - {key: two, rate_limit: {unit: hour, requests_per_unit: 5}, shadow_mode: true}
  - {key: three, rate_limit: {unit: hour, requests_per_unit: 5, algorithm: token_bucket}}
`))
	require.NoError(t, err)
	s.SetConfig(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := s.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "a", Descriptors: ds(d("one", "x"), d("two", "x"), d("three", "x"))})
	require.NoError(t, err)
	require.Equal(t, ok, resp.GetOverallCode())
	for _, st := range resp.GetStatuses() {
		require.Equal(t, uint32(5), st.GetCurrentLimit().GetRequestsPerUnit())
	}
}

// TestAnUnreachableClusterIsAnError: when a grain cannot be asked, the
// request fails with Unavailable, for Envoy's failure_mode_deny to decide.
func TestAnUnreachableClusterIsAnError(t *testing.T) {
	s := envoyrls.NewServer(&countingCaller{}, envoyrls.Options{})
	cfg, err := envoyrls.Parse("rules.yaml", []byte("domain: a\ndescriptors: [{key: k, rate_limit: {unit: hour, requests_per_unit: 5}}]"))
	require.NoError(t, err)
	s.SetConfig(cfg)
	_, err = serveRLS(t, s).ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "a", Descriptors: ds(d("k", "v"))})
	require.Equal(t, codes.Unavailable, grpcstatus.Code(err))
}
