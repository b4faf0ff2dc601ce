package envoyrls_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/internal/envoyrls"
)

const (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT

	second = rlsv3.RateLimitResponse_RateLimit_SECOND
	minute = rlsv3.RateLimitResponse_RateLimit_MINUTE
	hour   = rlsv3.RateLimitResponse_RateLimit_HOUR
	day    = rlsv3.RateLimitResponse_RateLimit_DAY
)

// status is what a test expects of one descriptor: its code, its limit
// (requests 0 and no unit: none) and what remains. reset, when set, is
// the expected duration_until_reset; otherwise a status with a limit
// expects the whole unit, the fake clock never moving.
type status struct {
	code      rlsv3.RateLimitResponse_Code
	requests  uint32
	unit      rlsv3.RateLimitResponse_RateLimit_Unit
	remaining uint32
	reset     time.Duration
}

var (
	noLimit   = status{code: ok}
	unlimited = status{code: ok, remaining: math.MaxUint32}
)

func within(requests uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, remaining uint32) status {
	return status{code: ok, requests: requests, unit: unit, remaining: remaining}
}

func overLimit(requests uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit) status {
	return status{code: over, requests: requests, unit: unit}
}

// step sends a request times times (once when 0) and checks the last
// answer.
type step struct {
	domain      string
	descriptors []*ratelimitv3.RateLimitDescriptor
	hits        uint32
	times       int
	overall     rlsv3.RateLimitResponse_Code
	statuses    []status
}

func unitLength(u rlsv3.RateLimitResponse_RateLimit_Unit) time.Duration {
	return map[rlsv3.RateLimitResponse_RateLimit_Unit]time.Duration{second: time.Second, minute: time.Minute, hour: time.Hour, day: 24 * time.Hour}[u]
}

func (s step) check(t *testing.T, r *rls) {
	t.Helper()
	req := &rlsv3.RateLimitRequest{Domain: s.domain, Descriptors: s.descriptors, HitsAddend: s.hits}
	var resp *rlsv3.RateLimitResponse
	for range max(s.times, 1) {
		resp = r.ask(t, req)
	}
	require.Equal(t, s.overall, resp.GetOverallCode(), "overall code of %v", resp)
	require.Len(t, resp.GetStatuses(), len(s.statuses))
	for i, want := range s.statuses {
		got := resp.GetStatuses()[i]
		where := fmt.Sprintf("status %d of %v", i, resp)
		require.Equal(t, want.code, got.GetCode(), where)
		require.Equal(t, want.remaining, got.GetLimitRemaining(), where)
		if want.requests == 0 && want.unit == 0 {
			require.Nil(t, got.GetCurrentLimit(), where)
			continue
		}
		require.Equal(t, want.requests, got.GetCurrentLimit().GetRequestsPerUnit(), where)
		require.Equal(t, want.unit, got.GetCurrentLimit().GetUnit(), where)
		reset := want.reset
		if reset == 0 {
			reset = unitLength(want.unit)
		}
		require.Equal(t, reset, got.GetDurationUntilReset().AsDuration(), where)
	}
}

func d(kv ...string) *ratelimitv3.RateLimitDescriptor { return descriptor(kv...) }

func ds(list ...*ratelimitv3.RateLimitDescriptor) []*ratelimitv3.RateLimitDescriptor { return list }

// TestExamplesAnswerAsTheReferenceDocuments drives the examples of
// envoyproxy/ratelimit's README through a grpc-go client against a
// two-silo cluster, and expects the answers the README gives. Where
// granary differs on purpose (a request over one limit takes nothing from
// the others) the case says so.
func TestExamplesAnswerAsTheReferenceDocuments(t *testing.T) {
	cfg, err := envoyrls.Load("testdata/examples.yaml")
	require.NoError(t, err)
	r := startRLS(t, envoyrls.Options{})
	r.server.SetConfig(cfg)

	cases := []struct {
		name  string
		steps []step
	}{
		{"1 key and value", []step{
			{domain: "mongo_cps", descriptors: ds(d("database", "users")), overall: ok, statuses: []status{within(500, second, 499)}},
			{domain: "mongo_cps", descriptors: ds(d("database", "default")), times: 2, overall: ok, statuses: []status{within(500, second, 498)}},
			{domain: "mongo_cps", descriptors: ds(d("database", "other")), overall: ok, statuses: []status{noLimit}},
		}},
		{"2 nested lists and a key alone", []step{
			{domain: "messaging", descriptors: ds(d("message_type", "marketing", "to_number", "2061111111"), d("to_number", "2061111111")),
				times: 5, overall: ok, statuses: []status{within(5, day, 0), within(100, day, 95)}},
			// Over the marketing limit: the request is refused, and (unlike
			// envoyproxy/ratelimit, which counts it against every limit) the
			// per-number count keeps what it had.
			{domain: "messaging", descriptors: ds(d("message_type", "marketing", "to_number", "2061111111"), d("to_number", "2061111111")),
				overall: over, statuses: []status{overLimit(5, day), within(100, day, 95)}},
			{domain: "messaging", descriptors: ds(d("message_type", "marketing", "to_number", "2062222222")),
				overall: ok, statuses: []status{within(5, day, 4)}},
			{domain: "messaging", descriptors: ds(d("to_number", "2061111111")), overall: ok, statuses: []status{within(100, day, 94)}},
		}},
		{"3 the most specific match", []step{
			{domain: "edge_proxy_per_ip", descriptors: ds(d("remote_address", "50.0.0.1")), overall: ok, statuses: []status{within(10, second, 9)}},
			{domain: "edge_proxy_per_ip", descriptors: ds(d("remote_address", "50.0.0.5")), overall: over, statuses: []status{overLimit(0, second)}},
		}},
		{"4 levels must match", []step{
			{domain: "example4", descriptors: ds(d("key", "value", "subkey", "subvalue")), overall: ok, statuses: []status{noLimit}},
			{domain: "example4", descriptors: ds(d("key", "value")), overall: ok, statuses: []status{within(300, second, 299)}},
			{domain: "example4_nested", descriptors: ds(d("key", "value", "subkey", "subvalue")), overall: ok, statuses: []status{within(300, second, 299)}},
			{domain: "example4_nested", descriptors: ds(d("key", "value")), overall: ok, statuses: []status{noLimit}},
		}},
		{"5 unlimited", []step{
			{domain: "internal", descriptors: ds(d("ldap", "a"), d("azure", "b")), overall: ok, statuses: []status{unlimited, within(100, minute, 99)}},
		}},
		{"6 shadow mode", []step{
			{domain: "example6", descriptors: ds(d("service", "auth-service", "user", "user-a")), times: 11,
				overall: ok, statuses: []status{within(10, second, 0)}},
			{domain: "example6", descriptors: ds(d("service", "auth-service", "user", "user-b")), overall: ok, statuses: []status{within(20, second, 19)}},
			{domain: "example6", descriptors: ds(d("service", "auth-service", "user", "user-b")), times: 20,
				overall: over, statuses: []status{overLimit(20, second)}},
		}},
		{"7 replaces", []step{
			{domain: "example7", descriptors: ds(d("key_1", "value_1", "user", "bkthomps")), overall: ok, statuses: []status{within(5, second, 4)}},
			{domain: "example7", descriptors: ds(d("key_2", "value_2", "user", "bkthomps")), overall: ok, statuses: []status{within(10, second, 9)}},
			{domain: "example7", descriptors: ds(d("key_1", "value_1", "user", "bkthomps"), d("key_2", "value_2", "user", "bkthomps")),
				times: 9, overall: ok, statuses: []status{noLimit, within(10, second, 0)}},
			// The replaced limit was not counted.
			{domain: "example7", descriptors: ds(d("key_1", "value_1", "user", "bkthomps")), overall: ok, statuses: []status{within(5, second, 3)}},
		}},
		{"8 a value and the key alone", []step{
			{domain: "example8", descriptors: ds(d("key1", "unspecified_value")), overall: ok, statuses: []status{within(10, minute, 9)}},
			{domain: "example8", descriptors: ds(d("key1", "unspecified_value2")), overall: ok, statuses: []status{within(10, minute, 9)}},
			{domain: "example8", descriptors: ds(d("key1", "value1")), overall: ok, statuses: []status{within(20, minute, 19)}},
		}},
		{"9 wildcards", []step{
			{domain: "example9", descriptors: ds(d("key1", "value1"), d("key1", "valueXYZ"), d("key1", "other")),
				overall: ok, statuses: []status{within(20, minute, 19), within(20, minute, 19), noLimit}},
			{domain: "example9", descriptors: ds(d("path", "/api/123/action"), d("path", "/api/123/other")),
				overall: ok, statuses: []status{within(21, minute, 20), noLimit}},
			{domain: "example9", descriptors: ds(d("route", "/api/v1/resource/123/action"), d("route", "/api/v1/resource/123")),
				overall: ok, statuses: []status{within(22, minute, 21), noLimit}},
		}},
		{"11 shared thresholds", []step{
			{domain: "example11", descriptors: ds(d("files", "files/a.pdf")), times: 5, overall: ok, statuses: []status{within(10, hour, 5)}},
			{domain: "example11", descriptors: ds(d("files", "files/b.csv")), times: 5, overall: ok, statuses: []status{within(10, hour, 0)}},
			{domain: "example11", descriptors: ds(d("files", "files/c.txt")), overall: over, statuses: []status{overLimit(10, hour)}},
			{domain: "example11", descriptors: ds(d("files_no_share", "files_no_share/a.pdf")), times: 10, overall: ok, statuses: []status{within(10, hour, 0)}},
			{domain: "example11", descriptors: ds(d("files_no_share", "files_no_share/b.csv")), overall: ok, statuses: []status{within(10, hour, 9)}},
		}},
		{"hits_addend", []step{
			{domain: "messaging", descriptors: ds(d("message_type", "marketing", "to_number", "2063333333"), d("to_number", "2063333333")),
				hits: 3, overall: ok, statuses: []status{within(5, day, 2), within(100, day, 97)}},
			{domain: "messaging", descriptors: ds(d("message_type", "marketing", "to_number", "2063333333"), d("to_number", "2063333333")),
				hits: 3, overall: over, statuses: []status{overLimit(5, day), within(100, day, 97)}},
			{domain: "messaging", descriptors: ds(d("to_number", "2063333333")), hits: 200, overall: over, statuses: []status{overLimit(100, day)}},
		}},
		{"a domain not configured", []step{
			{domain: "nowhere", descriptors: ds(d("a", "b")), overall: ok, statuses: []status{noLimit}},
		}},
		{"granary algorithms", []step{
			{domain: "granary", descriptors: ds(d("bucket", "x")), times: 3, overall: ok, statuses: []status{within(3, hour, 0)}},
			{domain: "granary", descriptors: ds(d("bucket", "x")), overall: over,
				statuses: []status{{code: over, requests: 3, unit: hour, reset: time.Minute}}},
			{domain: "granary", descriptors: ds(d("sliding", "x")), times: 4, overall: ok, statuses: []status{within(4, hour, 0)}},
			// All four were taken in the first segment: they slide out with
			// it, a whole window later.
			{domain: "granary", descriptors: ds(d("sliding", "x")), overall: over, statuses: []status{overLimit(4, hour)}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, s := range c.steps {
				s.check(t, r)
			}
		})
	}
}

// TestLimitOverrideCountsItsOwnWindow: a descriptor carrying its own
// limit (Envoy's limit override) is limited by it, whatever the file
// says, and a different override of the same entries counts apart.
func TestLimitOverrideCountsItsOwnWindow(t *testing.T) {
	cfg, err := envoyrls.Load("testdata/examples.yaml")
	require.NoError(t, err)
	r := startRLS(t, envoyrls.Options{})
	r.server.SetConfig(cfg)
	withLimit := func(n uint32, multiplier uint32) *ratelimitv3.RateLimitDescriptor {
		desc := d("database", "users")
		desc.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: typev3.RateLimitUnit_MINUTE}
		if multiplier > 0 {
			desc.Limit.UnitMultiplier = wrapperspb.UInt32(multiplier)
		}
		return desc
	}
	step{domain: "mongo_cps", descriptors: ds(withLimit(2, 0)), times: 2, overall: ok, statuses: []status{within(2, minute, 0)}}.check(t, r)
	step{domain: "mongo_cps", descriptors: ds(withLimit(2, 0)), overall: over, statuses: []status{overLimit(2, minute)}}.check(t, r)
	step{domain: "mongo_cps", descriptors: ds(withLimit(3, 0)), overall: ok, statuses: []status{within(3, minute, 2)}}.check(t, r)
	step{domain: "mongo_cps", descriptors: ds(d("database", "users")), overall: ok, statuses: []status{within(500, second, 499)}}.check(t, r)

	// As in the reference, a domain it does not know limits nothing, overrides included.
	step{domain: "nowhere", descriptors: ds(withLimit(2, 0)), times: 3, overall: ok, statuses: []status{noLimit}}.check(t, r)

	resp := r.ask(t, &rlsv3.RateLimitRequest{Domain: "mongo_cps", Descriptors: ds(withLimit(1, 5))})
	require.Equal(t, ok, resp.GetOverallCode())
	require.Equal(t, 5*time.Minute, resp.GetStatuses()[0].GetDurationUntilReset().AsDuration())
	require.Equal(t, uint32(5), resp.GetStatuses()[0].GetCurrentLimit().GetUnitMultiplier().GetValue())
}

// TestResponseHeadersNameTheClosestLimit: with response headers on, the
// response carries the limit, remaining count and reset of the
// descriptor closest to its limit; once one is over, of that one.
func TestResponseHeadersNameTheClosestLimit(t *testing.T) {
	cfg, err := envoyrls.Load("testdata/examples.yaml")
	require.NoError(t, err)
	r := startRLS(t, envoyrls.Options{ResponseHeaders: true, ResetHeader: "X-Reset"})
	r.server.SetConfig(cfg)
	headers := func(resp *rlsv3.RateLimitResponse) string {
		var out []string
		for _, h := range resp.GetResponseHeadersToAdd() {
			out = append(out, h.GetKey()+": "+h.GetValue())
		}
		return strings.Join(out, ", ")
	}
	req := &rlsv3.RateLimitRequest{Domain: "messaging", Descriptors: ds(d("message_type", "marketing", "to_number", "1"), d("to_number", "1"))}
	require.Equal(t, "RateLimit-Limit: 5, RateLimit-Remaining: 4, X-Reset: 86400", headers(r.ask(t, req)))
	for range 4 {
		r.ask(t, req)
	}
	require.Equal(t, "RateLimit-Limit: 5, RateLimit-Remaining: 0, X-Reset: 86400", headers(r.ask(t, req)))

	unlimitedOnly := &rlsv3.RateLimitRequest{Domain: "internal", Descriptors: ds(d("ldap", "a"))}
	require.Empty(t, r.ask(t, unlimitedOnly).GetResponseHeadersToAdd())
}

// TestGlobalShadowModeAnswersOK: in global shadow mode the overall code is
// OK, and the statuses still say which limit is over.
func TestGlobalShadowModeAnswersOK(t *testing.T) {
	cfg, err := envoyrls.Load("testdata/examples.yaml")
	require.NoError(t, err)
	r := startRLS(t, envoyrls.Options{ShadowMode: true})
	r.server.SetConfig(cfg)
	step{domain: "edge_proxy_per_ip", descriptors: ds(d("remote_address", "50.0.0.5")), overall: ok, statuses: []status{overLimit(0, second)}}.check(t, r)
}
