package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/clock"
	"github.com/granary-go/granary/proxy"
)

// Caller.Call is public and an outgoing filter may set call.Timeout (say,
// to the time left before some deadline of its own, which is negative once
// that passed). A negative timeout must not saturate to "never", leaving a
// caller that cannot cancel waiting for ever: the call times out at the
// first sweep.
func TestNegativeTimeoutStillExpires(t *testing.T) {
	fake := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	var tbl callTable
	tbl.init(fake, 10*time.Millisecond)

	p := getPending()
	p.call = testCall(-time.Millisecond, false)
	_, err := tbl.add(p)
	require.NoError(t, err)

	fake.Advance(100 * time.Millisecond)
	select {
	case <-p.done:
		var te *proxy.TimeoutError
		require.ErrorAs(t, p.err, &te)
	default:
		tbl.close(nil)
		<-p.done
		t.Fatalf("a call with a %v response timeout had not timed out 100ms later (deadline %d)", p.call.Timeout, p.deadline)
	}
}

// Seen by a caller of LocalCaller.Call with a context that cannot cancel.
func TestNegativeTimeoutLocalCallTimesOut(t *testing.T) {
	fake := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	started := make(chan *actor.Request, 1)
	in := &goInbound{handler: func(req *actor.Request) { started <- req }}
	defer in.wg.Wait()
	l := NewLocalCaller(in, func() time.Duration { return time.Second }, fake, time.Millisecond)
	defer l.Close()

	errc := make(chan error, 1)
	go func() {
		errc <- l.Call(context.Background(), testCall(-time.Nanosecond, false), wrapperspb.Int64(1), &wrapperspb.Int64Value{})
	}()
	<-started
	fake.Advance(50 * time.Millisecond)
	require.Eventually(t, func() bool { return len(errc) == 1 }, 2*time.Second, time.Millisecond,
		"a call whose response timeout is already over must time out at a sweep, not wait for ever")
	var te *proxy.TimeoutError
	require.ErrorAs(t, <-errc, &te)
}
