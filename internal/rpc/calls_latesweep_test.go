package rpc

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/proxy"
)

// lateClock is a clock whose timers fire only when the test says so, as a
// real timer fires late when the process is busy.
type lateClock struct {
	mu    sync.Mutex
	now   time.Time
	funcs []func()
}

func (c *lateClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *lateClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func (c *lateClock) AfterFunc(_ time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.funcs = append(c.funcs, f)
	return lateTimer{}
}

// fire runs the timers scheduled so far.
func (c *lateClock) fire() {
	c.mu.Lock()
	funcs := c.funcs
	c.funcs = nil
	c.mu.Unlock()
	for _, f := range funcs {
		f()
	}
}

type lateTimer struct{}

func (lateTimer) Stop() bool { return false }

// When the sweep's timer fires late (a busy process), a call made
// meanwhile must not time out before its response timeout has passed. It
// still times out, at a later sweep.
func TestLateSweepDoesNotShortenTimeouts(t *testing.T) {
	start := time.Unix(1000, 0)
	clk := &lateClock{now: start}
	var tbl callTable
	tbl.init(clk, 10*time.Millisecond)

	slow := getPending()
	slow.call = testCall(time.Hour, false)
	_, err := tbl.add(slow) // arms the sweep, due at start+10ms
	require.NoError(t, err)

	// The sweep's timer is 40ms late; a call is made at start+45ms with a
	// 10ms response timeout: it may not fail before start+55ms.
	clk.set(start.Add(45 * time.Millisecond))
	p := getPending()
	p.call = testCall(10*time.Millisecond, false)
	_, err = tbl.add(p)
	require.NoError(t, err)

	clk.set(start.Add(50 * time.Millisecond)) // the late sweep runs 5ms after the call was made
	clk.fire()
	select {
	case <-p.done:
		t.Fatalf("a call with a 10ms response timeout failed 5ms after it was made: %v", p.err)
	default:
	}
	assert.Equal(t, 2, tbl.len())

	clk.set(start.Add(60 * time.Millisecond)) // on time, and past the exact deadline
	clk.fire()
	select {
	case <-p.done:
		var te *proxy.TimeoutError
		assert.ErrorAs(t, p.err, &te)
	default:
		t.Fatal("the call outlived its deadline by a whole sweep")
	}
	assert.Equal(t, 1, tbl.len(), "the slow call is still pending")
	tbl.close(nil)
}

// Nor may a late sweep lengthen a timeout: a call made just after a sweep,
// whose timer then fires late, times out at the first sweep past its exact
// deadline, not the lateness after it. Estimated deadlines, moved by the
// lateness so as not to shorten the calls made in between, gave such a
// call its timeout plus the whole lateness (a 2 s call failing after 4 s
// under load).
func TestLateSweepDoesNotLengthenTimeouts(t *testing.T) {
	start := time.Unix(1000, 0)
	clk := &lateClock{now: start}
	var tbl callTable
	tbl.init(clk, 10*time.Millisecond)

	slow := getPending()
	slow.call = testCall(time.Hour, false)
	_, err := tbl.add(slow) // arms the sweep, due at start+10ms
	require.NoError(t, err)

	clk.set(start.Add(time.Millisecond))
	p := getPending()
	p.call = testCall(20*time.Millisecond, false) // due at start+21ms
	_, err = tbl.add(p)
	require.NoError(t, err)

	clk.set(start.Add(500 * time.Millisecond)) // the sweep is 490ms late
	clk.fire()
	select {
	case <-p.done:
		var te *proxy.TimeoutError
		assert.ErrorAs(t, p.err, &te)
	default:
		t.Fatal("a call with a 20ms response timeout was still pending 499ms after it was made")
	}
	assert.Equal(t, 1, tbl.len(), "the slow call is still pending")
	tbl.close(nil)
}
