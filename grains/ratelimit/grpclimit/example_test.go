package grpclimit_test

import (
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/grpclimit"
	"github.com/granary-go/granary/proxy"
)

// A gRPC server that gives each tenant 100 calls and lets each client
// certificate run one export at a time.
func Example() {
	var caller proxy.Caller = unreachable{} // a client of the cluster, or a silo's Caller()
	configs, err := ratelimit.NewConfigs(
		ratelimit.Named("per-tenant", ratelimit.TokenBucketOptions{TokenLimit: 100, TokensPerPeriod: 10, ReplenishmentPeriod: time.Second}),
		ratelimit.Named("one-export", ratelimit.ConcurrencyOptions{PermitLimit: 1}))
	if err != nil {
		panic(err)
	}
	limits, err := grpclimit.New(caller, configs, grpclimit.Options{Rules: []grpclimit.Rule{
		grpclimit.ByMetadata("per-tenant", "x-tenant"),
		grpclimit.ByIdentity("one-export", grpclimit.TLSIdentity).ForMethods("/shop.v1.Reports/Export"),
	}})
	if err != nil {
		panic(err)
	}
	server := grpc.NewServer(
		grpc.ChainUnaryInterceptor(limits.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(limits.StreamServerInterceptor()))
	defer server.Stop()
	fmt.Println(grpclimit.ByMetadata("per-tenant", "X-Tenant").Name())
	// Output: per-tenant:x-tenant
}
