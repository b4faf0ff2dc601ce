package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/granary-go/granary/cluster"
)

// Two silos on loopback: the first starts a cluster, the second joins it
// through the first one's gossip address, and both see each other.
func ExampleMembership() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	quiet := cluster.WithLogger(slog.New(slog.DiscardHandler))

	first, err := cluster.New(cluster.Options{
		SiloID:      "silo-a",
		Address:     "127.0.0.1:11111", // its silo-to-silo listener
		Gateway:     "127.0.0.1:30000",
		BindAddress: "127.0.0.1:0", // any free gossip port
		Timings:     cluster.FastTimings(),
	}, quiet)
	if err != nil {
		panic(err)
	}
	if err := first.Start(ctx); err != nil {
		panic(err)
	}
	defer first.Stop(ctx)
	_, events := first.Subscribe()

	second, err := cluster.New(cluster.Options{
		SiloID:      "silo-b",
		Address:     "127.0.0.1:11112",
		BindAddress: "127.0.0.1:0",
		Seeds:       []string{first.GossipAddress()},
		Timings:     cluster.FastTimings(),
	}, quiet)
	if err != nil {
		panic(err)
	}
	if err := second.Start(ctx); err != nil {
		panic(err)
	}
	_ = second.SetStatus(cluster.StatusActive)

	for seen := false; !seen; {
		batch, err := events.Next(ctx)
		if err != nil {
			panic(err)
		}
		for _, e := range batch {
			fmt.Println(e.Kind, e.Member.ID, e.Member.Status)
			seen = e.Member.ID == "silo-b" && e.Member.Status == cluster.StatusActive
		}
	}

	_ = second.Stop(ctx)
	for left := false; !left; {
		batch, _ := events.Next(ctx)
		for _, e := range batch {
			if e.Kind == cluster.EventLeft {
				fmt.Println(e.Kind, e.Member.ID)
				left = true
			}
		}
	}
	for _, m := range first.View().Members {
		fmt.Println("still here:", m.ID)
	}
	// Output:
	// joined silo-b joining
	// updated silo-b active
	// left silo-b
	// still here: silo-a
}
