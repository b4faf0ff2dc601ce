package cli_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/granary-go/granary/bench/peer"
)

func TestMain(m *testing.M) {
	var ignore []goleak.Option
	for _, f := range peer.ProtoActorLeftovers {
		ignore = append(ignore, goleak.IgnoreAnyFunction(f))
	}
	goleak.VerifyTestMain(m, ignore...)
}
