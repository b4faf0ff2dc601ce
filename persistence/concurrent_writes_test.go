package persistence

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
)

// holdStore holds every write until released, and records how many were
// in flight at most, overall and per key.
type holdStore struct {
	Store
	release chan struct{}

	mu          sync.Mutex
	inFlight    int
	maxInFlight int
	perKey      map[Key]int
	maxPerKey   int
}

func (s *holdStore) Write(ctx context.Context, key Key, data []byte, etag string) (string, error) {
	s.mu.Lock()
	s.inFlight++
	s.perKey[key]++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	s.maxPerKey = max(s.maxPerKey, s.perKey[key])
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.perKey[key]--
		s.mu.Unlock()
	}()
	select {
	case <-s.release:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	return s.Store.Write(ctx, key, data, etag)
}

func (s *holdStore) counts() (inFlight, maxInFlight, maxPerKey int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight, s.maxInFlight, s.maxPerKey
}

// A period's dirty records are written up to Writers at a time, never two
// writes of one record at once, and every one of them is written.
func TestFlusherWritesUpToWritersRecordsAtOnce(t *testing.T) {
	for _, writers := range []int{1, 4} {
		t.Run(fmt.Sprint(writers, " writers"), func(t *testing.T) {
			store := &holdStore{Store: NewMemoryStore(), release: make(chan struct{}), perKey: make(map[Key]int)}
			fake := clock.NewFake(time.Unix(1_700_000_000, 0))
			f, err := NewFlusher(store, FlusherOptions{Writers: writers}, WithClock(fake))
			require.NoError(t, err)
			require.NoError(t, f.Start(context.Background()))
			t.Cleanup(func() { _ = f.Stop(context.Background()) })

			const records = 10
			owner := newTestOwner(t)
			var recs []*Record
			for i := range records {
				recs = append(recs, owner.open(t, f, Key{GrainType: "T", GrainKey: fmt.Sprint(i), Name: "s"}))
			}
			change := func() {
				for _, r := range recs {
					owner.do(t, func() { owner.state++; r.MarkDirty() })
				}
			}
			change()
			fake.Advance(f.Options().Period)
			require.Eventually(t, func() bool { n, _, _ := store.counts(); return n == writers }, waitFor, pollEvery,
				"%d writes start at once", writers)
			// Every record changes again, and a period passes, while the
			// first writes are held.
			change()
			fake.Advance(f.Options().Period)
			close(store.release)
			require.Eventually(t, func() bool { return f.Stats().WritesSucceeded == 2*records }, waitFor, pollEvery,
				"both rounds are written")
			_, most, perKey := store.counts()
			assert.Equal(t, writers, most, "never more than Writers in flight")
			assert.Equal(t, 1, perKey, "one write per record at a time")
		})
	}
}

// Owners take their snapshots in their own turns, so a period's snapshots
// reach the writer one by one. One that arrives while earlier writes of
// the same period are held still starts at once, beside them: a slow
// write does not hold up the records behind it.
func TestASnapshotThatArrivesDuringAWriteIsWrittenBesideIt(t *testing.T) {
	store := &holdStore{Store: NewMemoryStore(), release: make(chan struct{}), perKey: make(map[Key]int)}
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	f, err := NewFlusher(store, FlusherOptions{Writers: 4, WriteTimeout: time.Minute}, WithClock(fake))
	require.NoError(t, err)
	require.NoError(t, f.Start(context.Background()))
	t.Cleanup(func() { _ = f.Stop(context.Background()) })

	quick, busy := newTestOwner(t), newTestOwner(t)
	first := quick.open(t, f, keyN(1))
	second := busy.open(t, f, keyN(2))
	quick.do(t, func() { quick.state = 1; first.MarkDirty() })
	busy.do(t, func() { busy.state = 2; second.MarkDirty() })
	// The busy owner's turn runs long: its snapshot turn waits behind it.
	inTurn, endTurn := make(chan struct{}), make(chan struct{})
	require.True(t, busy.schedule(func() { close(inTurn); <-endTurn }))
	<-inTurn

	fake.Advance(f.Options().Period)
	require.Eventually(t, func() bool { n, _, _ := store.counts(); return n == 1 }, waitFor, pollEvery,
		"the quick owner's snapshot is being written")
	close(endTurn) // the busy owner's snapshot arrives while that write is held
	assert.Eventually(t, func() bool { n, _, _ := store.counts(); return n == 2 }, waitFor, pollEvery,
		"the late snapshot is written beside the held one")
	close(store.release)
	require.Eventually(t, func() bool { return f.Stats().WritesSucceeded == 2 }, waitFor, pollEvery, "stats %+v", f.Stats())
	_, _, perKey := store.counts()
	assert.Equal(t, 1, perKey, "one write per record at a time")
}
