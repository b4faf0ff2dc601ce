package persistence

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/storefault"
)

// TestFlusherConvergesUnderConcurrentChanges drives many owners changing
// state, flushing on demand and closing, while periods tick and some writes
// fail, and then checks the invariant that matters: after Stop, the store
// holds every owner's last state, and no write ever conflicted (a conflict
// here would mean two writes of one record raced or reordered).
func TestFlusherConvergesUnderConcurrentChanges(t *testing.T) {
	var faulty *storefault.Store[Key]
	fx := newFixture(t, func(s Store) Store { faulty = storefault.New[Key](s); return faulty })
	boom := errors.New("transient")
	faulty.FailNext(storefault.OpWrite, 5, boom)

	const owners, turns = 8, 300
	type grain struct {
		o        *testOwner
		r        *Record
		closeErr error // set in the owner's last turn
	}
	grains := make([]grain, owners)
	for i := range grains {
		o := newTestOwner(t)
		grains[i] = grain{o: o, r: o.open(t, fx.f, keyN(i))}
	}

	var unexpected atomic.Value
	var workers sync.WaitGroup
	for i := range grains {
		g := &grains[i]
		workers.Go(func() {
			for n := 1; n <= turns; n++ {
				done := make(chan struct{})
				g.o.schedule(func() {
					defer close(done)
					g.o.state = n
					g.r.MarkDirty()
					var err error
					switch {
					case n == turns && i%2 == 0:
						err = g.r.Close(context.Background()) // half deactivate at the end
						g.closeErr = err
					case n%37 == 0:
						err = g.r.Flush(context.Background())
					}
					if err != nil && !errors.Is(err, boom) {
						unexpected.Store(err)
					}
				})
				<-done
			}
		})
	}
	stop := make(chan struct{})
	ticker := make(chan struct{})
	go func() {
		defer close(ticker)
		for {
			select {
			case <-stop:
				return
			default:
				fx.period()
			}
		}
	}()
	workers.Wait()
	close(stop)
	<-ticker

	if err, _ := unexpected.Load().(error); err != nil {
		t.Fatalf("unexpected owner error: %v", err)
	}
	require.NoError(t, fx.f.Stop(context.Background()))
	for i, g := range grains {
		assert.NoError(t, g.r.Err(), keyN(i).String())
		if g.closeErr != nil {
			continue // a failed final flush loses the last change, by design
		}
		assert.Equal(t, turns, atoi(t, fx.stored(t, keyN(i))), keyN(i).String())
	}
	assert.Equal(t, owners/2, fx.f.Stats().Records)
	assert.Greater(t, fx.f.Stats().WritesSucceeded, uint64(owners))
}
