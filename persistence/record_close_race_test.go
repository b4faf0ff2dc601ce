package persistence

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// failFirstStore fails the first write of every key, after holding it until
// released.
type failFirstStore struct {
	Store
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	failed  map[Key]bool
}

var errTransientWrite = errors.New("transient write failure")

func (s *failFirstStore) Write(ctx context.Context, key Key, data []byte, etag string) (string, error) {
	s.mu.Lock()
	first := !s.failed[key]
	s.failed[key] = true
	s.mu.Unlock()
	if first {
		s.entered <- struct{}{}
		<-s.release
		return "", errTransientWrite
	}
	return s.Store.Write(ctx, key, data, etag)
}

// A background write fails while the owner deactivates: Close waits for the
// write in flight and must then see the record dirty again and write the
// state itself. A failed write marks the record dirty before it releases
// the write slot; the other way round, a Close that took the slot in
// between found the record clean, wrote nothing and returned nil, and the
// change was lost. The window is narrow; the loop hits it.
func TestCloseAfterFailedBackgroundWriteWritesState(t *testing.T) {
	store := &failFirstStore{entered: make(chan struct{}), release: make(chan struct{}), failed: map[Key]bool{}}
	fx := newFixture(t, func(s Store) Store { store.Store = s; return store })
	o := newTestOwner(t)

	const rounds = 2000
	lost := 0
	for i := range rounds {
		key := Key{GrainType: "counter", GrainKey: strconv.Itoa(i), Name: "state"}
		r := o.open(t, fx.f, key)
		o.do(t, func() { o.state = i; r.MarkDirty() })
		fx.period()     // the writer asks for a snapshot, takes it and writes it...
		<-store.entered // ...and the write, which will fail, is in flight
		var err error
		o.do(t, func() {
			store.release <- struct{}{}
			// Deactivate as soon as the write slot is free, as a turn that
			// happens to run then would.
			for {
				r.mu.Lock()
				busy := r.mu.done != nil
				r.mu.Unlock()
				if !busy {
					break
				}
				runtime.Gosched() // on one P, the writer must get to end its write
			}
			err = r.Close(context.Background())
		})
		if err == nil && fx.stored(t, key) != strconv.Itoa(i) {
			lost++
		}
	}
	require.Zero(t, lost, "of %d records closed without error after a failed background write, %d were never written", rounds, lost)
}
