package envoyrls

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
)

// FuzzParse: whatever the bytes, Parse returns a configuration or an
// error wrapping ErrInvalidConfig, never both and never a panic; a
// configuration it returns can be matched against.
func FuzzParse(f *testing.F) {
	examples, err := os.ReadFile("testdata/examples.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(examples)
	f.Add([]byte("domain: a\ndescriptors: [{key: k, value: 'v*x*', share_threshold: true, rate_limit: {unit: minute, requests_per_unit: 3}}]"))
	f.Add([]byte("domain: a\ndescriptors: [{key: k, rate_limit: {unit: hour, requests_per_unit: 9, algorithm: token_bucket, replenishment_period: 1ms}}]"))
	f.Add([]byte("domain: [\n"))
	f.Add([]byte("---\n---\ndomain: b\n"))
	f.Add([]byte("domain: a\ndescriptors: &x [{key: k, descriptors: *x}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if (c == nil) == (err == nil) {
			t.Fatalf("Parse returned %v and %v", c, err)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("an error that is not ErrInvalidConfig: %v", err)
			}
			return
		}
		entries := []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "vxx"}, {Key: "k", Value: ""}}
		for _, domain := range c.Domains() {
			c.domains[domain].match(domain, entries)
		}
	})
}

// FuzzWildcardMatch: wildcardMatch agrees with a regular expression of
// the same pattern, each '*' any run of characters.
func FuzzWildcardMatch(f *testing.F) {
	f.Add("value*", "value1")
	f.Add("/api/*/action", "/api/123/action")
	f.Add("/api/*/resource/*/action", "/api/v1/resource/1/action")
	f.Add("a*a", "a")
	f.Add("*", "")
	f.Add("**b*", "bb")
	f.Fuzz(func(t *testing.T, pattern, value string) {
		if !utf8.ValidString(pattern) || !utf8.ValidString(value) {
			return // the regexp reads runes, the matcher bytes
		}
		parts := strings.Split(pattern, "*")
		quoted := make([]string, len(parts))
		for i, p := range parts {
			quoted[i] = regexp.QuoteMeta(p)
		}
		want := regexp.MustCompile(`^(?s:` + strings.Join(quoted, ".*") + `)$`).MatchString(value)
		if got := wildcardMatch(parts, value); got != want {
			t.Fatalf("wildcardMatch(%q, %q) = %v, want %v", pattern, value, got, want)
		}
	})
}

// grantingCaller answers every grain call as granted, so that a request
// fuzzed from the wire goes the whole way without a cluster.
type grantingCaller struct{}

func (grantingCaller) Call(_ context.Context, _ proxy.Call, _, out proto.Message) error {
	if md, ok := out.(*pb.LeaseMetadata); ok {
		md.Acquired, md.ReleaseOptional = true, true
	}
	return nil
}

func (grantingCaller) ResponseTimeout() time.Duration { return time.Second }

// FuzzShouldRateLimit: whatever request arrives on the wire, the server
// answers an error with a gRPC code or a response with one status per
// descriptor, and never panics.
func FuzzShouldRateLimit(f *testing.F) {
	examples, err := os.ReadFile("testdata/examples.yaml")
	if err != nil {
		f.Fatal(err)
	}
	cfg, err := Parse("examples.yaml", examples)
	if err != nil {
		f.Fatal(err)
	}
	s := NewServer(grantingCaller{}, Options{ResponseHeaders: true})
	s.SetConfig(cfg)
	seed := func(req *rlsv3.RateLimitRequest) {
		data, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	entry := func(kv ...string) *ratelimitv3.RateLimitDescriptor {
		d := &ratelimitv3.RateLimitDescriptor{}
		for i := 0; i+1 < len(kv); i += 2 {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
		}
		return d
	}
	seed(&rlsv3.RateLimitRequest{Domain: "messaging", HitsAddend: 3, Descriptors: []*ratelimitv3.RateLimitDescriptor{
		entry("message_type", "marketing", "to_number", "1"), entry("to_number", "1")}})
	seed(&rlsv3.RateLimitRequest{Domain: "example7", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		entry("key_1", "value_1", "user", "bkthomps"), entry("key_2", "value_2", "user", "bkthomps")}})
	over := entry("database", "users")
	over.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: 2, UnitMultiplier: wrapperspb.UInt32(1 << 31)}
	over.HitsAddend = wrapperspb.UInt64(1 << 63)
	seed(&rlsv3.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*ratelimitv3.RateLimitDescriptor{over}})
	seed(&rlsv3.RateLimitRequest{Domain: "internal", Descriptors: []*ratelimitv3.RateLimitDescriptor{entry("ldap", "x"), {IsNegativeHits: true}}})
	f.Fuzz(func(t *testing.T, data []byte) {
		req := new(rlsv3.RateLimitRequest)
		if proto.Unmarshal(data, req) != nil {
			return
		}
		resp, err := s.ShouldRateLimit(context.Background(), req)
		if err != nil {
			if status.Code(err) == codes.Unknown {
				t.Fatalf("an error without a code: %v", err)
			}
			return
		}
		if len(resp.GetStatuses()) != len(req.GetDescriptors()) {
			t.Fatalf("%d statuses for %d descriptors", len(resp.GetStatuses()), len(req.GetDescriptors()))
		}
	})
}
