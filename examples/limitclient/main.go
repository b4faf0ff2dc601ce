// Command limitclient takes permits from granary's rate limiters through
// a gateway, as a service that only acquires limits does:
//
//	limitclient -gateway 127.0.0.1:30000 -key login:ada -n 3
//
// It prints one line per acquisition: "acquired" or "rejected: " and the
// reason. The key names a fixed-window limiter with the silo's default
// options (ratelimit.Register's defaults).
//
// The program links only the client, the generated references and the
// limiter holders: none of the server runtime (the actor host, gossip,
// the metrics SDK). client's boundary test holds it to that.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/grains/ratelimit"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "limitclient:", err)
		os.Exit(1)
	}
}

// run parses args, acquires and prints each answer to out.
func run(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("limitclient", flag.ContinueOnError)
	fs.SetOutput(errOut)
	gateway := fs.String("gateway", "127.0.0.1:30000", "a gateway silo's address")
	key := fs.String("key", "", "the limiter's key (required)")
	n := fs.Int("n", 1, "how many single permits to acquire, one after another")
	timeout := fs.Duration("timeout", 10*time.Second, "the response timeout of each call")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *key == "" || *n < 1 || fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("need -key and a positive -n, and no arguments")
	}
	c, err := client.New(client.Options{Gateways: []string{*gateway}, ResponseTimeout: *timeout})
	if err != nil {
		return err
	}
	defer c.Close()
	limiter := ratelimit.FixedWindow(c, *key)
	for range *n {
		lease, err := limiter.Acquire(ctx, 1)
		if err != nil {
			return err
		}
		if lease.Acquired() {
			fmt.Fprintln(out, "acquired")
		} else {
			fmt.Fprintln(out, "rejected:", lease.Reason())
		}
	}
	return nil
}
