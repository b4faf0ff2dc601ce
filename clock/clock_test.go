package clock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFakeRunsDueCallbacksInOrder(t *testing.T) {
	start := time.Unix(1000, 0)
	c := NewFake(start)
	var got []string
	c.AfterFunc(2*time.Second, func() { got = append(got, "b") })
	c.AfterFunc(time.Second, func() { got = append(got, "a") })
	stopped := c.AfterFunc(1500*time.Millisecond, func() { got = append(got, "never") })
	require.True(t, stopped.Stop())
	assert.False(t, stopped.Stop())
	assert.Equal(t, 2, c.Pending())

	c.Advance(time.Second)
	assert.Equal(t, []string{"a"}, got)
	c.Advance(time.Second)
	assert.Equal(t, []string{"a", "b"}, got)
	assert.Equal(t, start.Add(2*time.Second), c.Now())
	assert.Zero(t, c.Pending())
}

func TestFakeCallbackSeesItsDueTimeAndMayReschedule(t *testing.T) {
	start := time.Unix(0, 0)
	c := NewFake(start)
	var seen []time.Duration
	var tick func()
	tick = func() {
		seen = append(seen, c.Now().Sub(start))
		if len(seen) < 3 {
			c.AfterFunc(time.Second, tick)
		}
	}
	c.AfterFunc(time.Second, tick)
	c.Advance(10 * time.Second)
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, seen)
	assert.Equal(t, start.Add(10*time.Second), c.Now())
}

func TestRealClock(t *testing.T) {
	done := make(chan struct{})
	Real{}.AfterFunc(time.Millisecond, func() { close(done) })
	<-done
	assert.False(t, Real{}.Now().IsZero())
}
