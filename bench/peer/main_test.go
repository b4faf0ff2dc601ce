package peer_test

import (
	"context"
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/granary-go/granary/bench"
	"github.com/granary-go/granary/bench/peer"
)

// fakeGubernator makes the test binary stand in for the gubernator peer's
// binary when the launcher runs it: the same harness, x/time/rate under
// gubernator's name.
const fakeGubernator = "PEER_TEST_FAKE_GUBERNATOR"

func TestMain(m *testing.M) {
	if os.Getenv(fakeGubernator) == "1" {
		os.Exit(runFakeGubernator(os.Args[1:]))
	}
	var ignore []goleak.Option
	for _, f := range peer.ProtoActorLeftovers {
		ignore = append(ignore, goleak.IgnoreAnyFunction(f))
	}
	goleak.VerifyTestMain(m, ignore...)
}

type renamed struct {
	bench.System
	name string
}

func (r renamed) Name() string { return r.name }

func runFakeGubernator(args []string) int {
	var cfg bench.Config
	fs := flag.NewFlagSet("fake", flag.ContinueOnError)
	if err := cfg.Bind(fs, os.LookupEnv); err != nil || fs.Parse(args) != nil {
		return 2
	}
	systems := []bench.System{renamed{peer.XRate{}, "gubernator"}}
	if err := bench.Execute(context.Background(), cfg, systems, nil, os.Stdout, os.Stderr); err != nil {
		return 1
	}
	return 0
}
