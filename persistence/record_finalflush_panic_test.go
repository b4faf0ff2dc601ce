package persistence

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Stop's final flush tries each dirty record once: a record whose snapshot
// panics (the owner contains the panic, as the actor host does) counts as
// failed, is not asked again, and is reported by Stop.
func TestFinalFlushDoesNotRetryPanickingSnapshot(t *testing.T) {
	fx := newFixture(t, nil)
	o := newTestOwner(t)
	var calls atomic.Int64
	snapshot := func() ([]byte, error) {
		calls.Add(1)
		panic("grain SaveState bug")
	}
	schedule := func(fn func()) bool {
		return o.schedule(func() {
			defer func() { _ = recover() }() // the owner contains grain panics
			fn()
		})
	}
	r, _, err := fx.f.Open(context.Background(), testKey, schedule, snapshot)
	if err != nil {
		t.Fatal(err)
	}
	o.do(t, func() { r.MarkDirty() })

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err = fx.f.Stop(ctx)
	assert.False(t, errors.Is(err, context.DeadlineExceeded), "Stop waited out its context: %v", err)
	assert.Error(t, err, "Stop must report the record whose final snapshot failed")
	assert.LessOrEqual(t, calls.Load(), int64(1), "the final flush retried a panicking snapshot %d times", calls.Load())
}
