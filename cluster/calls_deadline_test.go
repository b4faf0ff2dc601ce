package cluster

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/clock"
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

// Nor must a call added while the sweep runs, whose
// deadline is lastSweep + interval + timeout, even on a clock at zero.
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

// Seen by a caller: a local call made with the largest response timeout
// does not fail at the first sweep, 1ms after it was made, while
// the grain is still working on it.
func TestHugeTimeoutLocalCall(t *testing.T) {
	fake := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	started := make(chan *actor.Request, 1)
	in := &goInbound{handler: func(req *actor.Request) { started <- req }}
	defer in.wg.Wait()
	l := NewLocalCaller(in, func() time.Duration { return time.Second }, fake, time.Millisecond)
	defer l.Close()

	errc := make(chan error, 1)
	go func() {
		errc <- l.Call(context.Background(), testCall(time.Duration(math.MaxInt64), false), wrapperspb.Int64(1), &wrapperspb.Int64Value{})
	}()
	req := <-started
	fake.Advance(time.Millisecond)
	select {
	case err := <-errc:
		t.Fatalf("the call ended after 1ms of a %v response timeout: %v", time.Duration(math.MaxInt64), err)
	default:
	}
	req.Reply.Reply(req, wrapperspb.Int64(2), nil)
	require.NoError(t, <-errc)
}
