package testcluster_test

import (
	"testing"

	"go.uber.org/goleak"
)

// memberlist's Shutdown does not wait for a probe already under way: the
// probe's goroutine waits for its ack or its ack timer, and so ends
// within one probe interval of the shutdown on its own. Under a loaded
// machine that can be later than goleak's retries look. Every other
// goroutine, memberlist's included, must be gone.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}
