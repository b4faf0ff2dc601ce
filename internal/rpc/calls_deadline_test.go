package rpc

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/proxy"
)

// A response timeout is a time.Duration; the largest one (a common way to
// say "no timeout", e.g. proxy.WithTimeout(math.MaxInt64)) must not make
// the call time out at the first sweep. Deadlines saturate instead of
// wrapping to a negative value.
func TestHugeTimeoutDoesNotExpireAtOnce(t *testing.T) {
	fake := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	var tbl callTable
	tbl.init(fake, 10*time.Millisecond)

	p := getPending()
	p.call = testCall(time.Duration(math.MaxInt64), false)
	id, err := tbl.add(p)
	require.NoError(t, err)

	fake.Advance(10 * time.Millisecond) // one sweep
	select {
	case <-p.done:
		t.Fatalf("a call with a %v response timeout timed out after 10ms: %v", p.call.Timeout, p.err)
	default:
	}
	assert.Equal(t, 1, tbl.len())
	assert.Same(t, p, tbl.take(id))
	tbl.close(nil)
}

// Nor must a call added while the sweep runs, even on a clock at zero.
func TestHugeTimeoutWhileSweeping(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	var tbl callTable
	tbl.init(fake, 10*time.Millisecond)

	first := getPending()
	first.call = testCall(time.Hour, false)
	_, err := tbl.add(first) // arms the sweep
	require.NoError(t, err)

	second := getPending()
	second.call = testCall(time.Duration(math.MaxInt64), false)
	id, err := tbl.add(second)
	require.NoError(t, err)

	fake.Advance(10 * time.Millisecond)
	select {
	case <-second.done:
		t.Fatalf("a call with a %v response timeout timed out after 10ms: %v", second.call.Timeout, second.err)
	default:
	}
	assert.Same(t, second, tbl.take(id))
	tbl.close(nil)
	<-first.done
}

// localCall makes a local call with the given response timeout, on a
// goroutine, and returns the fake clock, the request as the grain received
// it, and where the call's outcome arrives.
func localCall(t *testing.T, timeout time.Duration) (*clock.Fake, *host.Request, chan error) {
	t.Helper()
	fake := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	started := make(chan *host.Request, 1)
	in := &goInbound{handler: func(req *host.Request) { started <- req }}
	t.Cleanup(in.wg.Wait)
	l := NewLocalCaller(in, func() time.Duration { return time.Second }, fake, time.Millisecond)
	t.Cleanup(l.Close)
	errc := make(chan error, 1)
	go func() {
		errc <- l.Call(context.Background(), testCall(timeout, false), wrapperspb.Int64(1), &wrapperspb.Int64Value{})
	}()
	return fake, <-started, errc
}

// Seen by a caller: a local call made with the largest response timeout
// does not fail at the first sweep, 1ms after it was made, while
// the grain is still working on it.
func TestHugeTimeoutLocalCall(t *testing.T) {
	fake, req, errc := localCall(t, time.Duration(math.MaxInt64))
	fake.Advance(time.Millisecond)
	select {
	case err := <-errc:
		t.Fatalf("the call ended after 1ms of a %v response timeout: %v", time.Duration(math.MaxInt64), err)
	default:
	}
	req.Reply.Reply(req, wrapperspb.Int64(2), nil)
	require.NoError(t, <-errc)
}

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

// The same seen by a caller of LocalCaller.Call with a context that cannot
// cancel.
func TestNegativeTimeoutLocalCallTimesOut(t *testing.T) {
	fake, _, errc := localCall(t, -time.Nanosecond)
	fake.Advance(50 * time.Millisecond)
	require.Eventually(t, func() bool { return len(errc) == 1 }, 2*time.Second, time.Millisecond,
		"a call whose response timeout is already over must time out at a sweep, not wait for ever")
	var te *proxy.TimeoutError
	require.ErrorAs(t, <-errc, &te)
}
