package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/silo"
)

// A silo hosts the limiter grains; a holder acquires from one of them. A
// client connected to a gateway works the same as the silo's own caller
// used here.
func Example() {
	ctx := context.Background()
	s, err := silo.New(silo.Options{DisableGateway: true}, silo.WithLogger(quiet))
	if err != nil {
		panic(err)
	}
	if err := ratelimit.Register(s, ratelimit.Defaults{}); err != nil {
		panic(err)
	}
	if err := s.Start(ctx); err != nil {
		panic(err)
	}
	defer s.Stop(ctx)

	login := ratelimit.FixedWindow(s.Caller(), "login:ada",
		ratelimit.FixedWindowOptions{PermitLimit: 2, Window: time.Minute})
	for range 3 {
		lease, err := login.Acquire(ctx, 1)
		if err != nil {
			panic(err)
		}
		if !lease.Acquired() {
			fmt.Println("rejected:", lease.Reason())
			continue
		}
		fmt.Println("acquired, release needed:", !lease.ReleaseOptional())
	}
	// Output:
	// acquired, release needed: false
	// acquired, release needed: false
	// rejected: Rate limit exceeded
}

// A concurrency limiter's permits come back on Release.
func ExampleConcurrency() {
	ctx := context.Background()
	s, _ := silo.New(silo.Options{DisableGateway: true}, silo.WithLogger(quiet))
	_ = ratelimit.Register(s, ratelimit.Defaults{})
	_ = s.Start(ctx)
	defer s.Stop(ctx)

	pool := ratelimit.Concurrency(s.Caller(), "reports", ratelimit.ConcurrencyOptions{PermitLimit: 1})
	first, _ := pool.Acquire(ctx, 1)
	second, _ := pool.Acquire(ctx, 1)
	fmt.Println(first.Acquired(), second.Acquired(), second.Reason())
	_ = first.Release(ctx)
	third, _ := pool.Acquire(ctx, 1)
	fmt.Println(third.Acquired())
	_ = third.Release(ctx)
	// Output:
	// true false Queue limit reached
	// true
}

// A group is one decision over several limiters: it is acquired only when
// every one grants. On a rejection it releases what it took, which gives
// concurrency permits back; quota a time-based limiter granted stays
// spent.
func ExampleGroup() {
	ctx := context.Background()
	s, _ := silo.New(silo.Options{DisableGateway: true}, silo.WithLogger(quiet))
	_ = ratelimit.Register(s, ratelimit.Defaults{})
	_ = s.Start(ctx)
	defer s.Stop(ctx)

	perUser := ratelimit.TokenBucket(s.Caller(), "user:ada", ratelimit.TokenBucketOptions{
		TokenLimit: 5, TokensPerPeriod: 1, ReplenishmentPeriod: time.Second})
	perTenant := ratelimit.FixedWindow(s.Caller(), "tenant:acme", ratelimit.FixedWindowOptions{
		PermitLimit: 1, Window: time.Hour})
	g := ratelimit.NewGroup(perUser, perTenant)
	for range 2 {
		lease, err := g.Acquire(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Println(lease.Acquired())
		_ = lease.Release(ctx)
	}
	// Output:
	// true
	// false
}

// A leased holder answers a hot key from a slice of the window's quota,
// with no call per acquisition; together, its answers and everyone
// else's stay within the limit.
func ExampleHolder_Leased() {
	ctx := context.Background()
	s, _ := silo.New(silo.Options{DisableGateway: true}, silo.WithLogger(quiet))
	_ = ratelimit.Register(s, ratelimit.Defaults{})
	_ = s.Start(ctx)
	defer s.Stop(ctx)

	api := ratelimit.FixedWindow(s.Caller(), "api:acme",
		ratelimit.FixedWindowOptions{PermitLimit: 1000, Window: time.Hour}).
		Leased(ratelimit.LeaseOptions{MinRate: 1}) // lease from the first acquisition
	defer api.Close(ctx)
	granted := 0
	for range 1200 {
		lease, err := api.Acquire(ctx, 1)
		if err != nil {
			panic(err)
		}
		if lease.Acquired() {
			granted++
		}
	}
	fmt.Println("granted:", granted)
	// Output:
	// granted: 1000
}
