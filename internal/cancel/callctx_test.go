package cancel

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInvocationContextContract(t *testing.T) {
	t.Run("not cancelled", func(t *testing.T) {
		c := new(invocationContext)
		assert.NoError(t, c.Err())
		_, ok := c.Deadline()
		assert.False(t, ok, "no deadline")
		assert.Nil(t, c.Value("anything"))
		d := c.Done()
		require.NotNil(t, d)
		assert.True(t, d == c.Done(), "Done returns the same channel every time")
		select {
		case <-d:
			t.Fatal("Done closed before cancel")
		default:
		}
	})

	t.Run("cancel closes Done and sets Err", func(t *testing.T) {
		c := new(invocationContext)
		d := c.Done()
		c.cancel()
		select {
		case <-d:
		default:
			t.Fatal("Done not closed by cancel")
		}
		assert.ErrorIs(t, c.Err(), context.Canceled)
		assert.ErrorIs(t, context.Cause(c), context.Canceled)
		c.cancel() // a second cancel is a no-op
		assert.ErrorIs(t, c.Err(), context.Canceled)
	})

	t.Run("Done asked for after cancel is closed", func(t *testing.T) {
		c := new(invocationContext)
		c.cancel()
		select {
		case <-c.Done():
		default:
			t.Fatal("Done of a cancelled context is not closed")
		}
		assert.ErrorIs(t, c.Err(), context.Canceled)
	})

	t.Run("context.AfterFunc runs on cancel", func(t *testing.T) {
		c := new(invocationContext)
		ran := make(chan struct{})
		context.AfterFunc(c, func() { close(ran) })
		select {
		case <-ran:
			t.Fatal("ran before cancel")
		case <-time.After(10 * time.Millisecond):
		}
		c.cancel()
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			t.Fatal("AfterFunc did not run after cancel")
		}
	})

	t.Run("context.AfterFunc stop keeps f from running", func(t *testing.T) {
		c := new(invocationContext)
		ran := make(chan struct{}, 2)
		stop := context.AfterFunc(c, func() { ran <- struct{}{} })
		other := context.AfterFunc(c, func() { ran <- struct{}{} })
		assert.True(t, stop(), "stop before cancel stops f")
		assert.False(t, stop(), "a second stop reports false")
		c.cancel()
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			t.Fatal("the other AfterFunc did not run")
		}
		assert.False(t, other(), "stop after f started reports false")
		select {
		case <-ran:
			t.Fatal("a stopped AfterFunc ran")
		case <-time.After(10 * time.Millisecond):
		}
	})

	t.Run("context.AfterFunc on a cancelled context runs at once", func(t *testing.T) {
		c := new(invocationContext)
		c.cancel()
		ran := make(chan struct{})
		stop := context.AfterFunc(c, func() { close(ran) })
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			t.Fatal("AfterFunc on a cancelled context did not run")
		}
		assert.False(t, stop())
	})

	t.Run("children are cancelled without a goroutine", func(t *testing.T) {
		c := new(invocationContext)
		before := runtime.NumGoroutine()
		child, cancel := context.WithCancel(c)
		defer cancel()
		assert.Equal(t, before, runtime.NumGoroutine(), "propagation uses AfterFunc, not a watcher goroutine")
		c.cancel()
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("child not cancelled")
		}
		assert.ErrorIs(t, child.Err(), context.Canceled)
	})
}

func TestCancelRegistryContextsAreLight(t *testing.T) {
	r := NewRegistry(nil)
	var id uint64
	allocs := testing.AllocsPerRun(1000, func() {
		id++
		ctx, err := r.Register(id)
		if err != nil || ctx.Err() != nil {
			t.Fatal("register failed")
		}
		r.Done(id)
	})
	assert.LessOrEqual(t, allocs, 1.0, "one allocation per invocation context")
	assert.Zero(t, r.Stats().Active)
}

// BenchmarkCancelRegistry is the server-side cost of one cancellable call
// that is not cancelled: register, the queued-cancel check, done.
func BenchmarkCancelRegistry(b *testing.B) {
	r := NewRegistry(nil)
	b.ReportAllocs()
	var id uint64
	for b.Loop() {
		id++
		ctx, err := r.Register(id)
		if err != nil || ctx.Err() != nil {
			b.Fatal("register failed")
		}
		r.Done(id)
	}
}
