package persistence

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/storefault"
)

func TestFlusherWritesDirtyStateOnPeriod(t *testing.T) {
	fx := newFixture(t, nil)
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)

	o.do(t, func() { o.state = 1; r.MarkDirty() })
	fx.clock.Advance(fx.f.Options().Period - time.Nanosecond)
	assert.Zero(t, fx.f.Stats().WritesAttempted, "nothing is written before the period ends")

	fx.clock.Advance(time.Nanosecond)
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesSucceeded == 1 })
	assert.Equal(t, "1", fx.stored(t, testKey))
	_, etag, err := fx.store.Read(context.Background(), testKey)
	require.NoError(t, err)
	assert.Equal(t, etag, r.ETag(), "the record must carry the new etag for its next write")
	assert.False(t, r.Dirty())

	// A second change is written with that etag, i.e. as an update.
	o.do(t, func() { o.state = 2; r.MarkDirty() })
	fx.period()
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesSucceeded == 2 })
	assert.Equal(t, "2", fx.stored(t, testKey))
	assert.Zero(t, fx.f.Stats().WritesFailed)
}

func TestFlusherCoalescesChangesWithinAPeriod(t *testing.T) {
	fx := newFixture(t, nil)
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)

	for i := 1; i <= 10; i++ {
		o.do(t, func() { o.state = i; r.MarkDirty() })
	}
	fx.period()
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesSucceeded == 1 })
	assert.Equal(t, "10", fx.stored(t, testKey))
	assert.Equal(t, uint64(1), fx.f.Stats().WritesAttempted)
}

func TestFlusherLeavesCleanRecordsAlone(t *testing.T) {
	fx := newFixture(t, nil)
	clean := newTestOwner(t)
	clean.open(t, fx.f, testKey)
	for range 3 {
		fx.period()
	}

	// A dirty record written after those periods shows the writer has run
	// them; every collection finishes its requests before any write.
	dirty := newTestOwner(t)
	r := dirty.open(t, fx.f, keyN(2))
	dirty.do(t, func() { dirty.state = 7; r.MarkDirty() })
	fx.period()
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesSucceeded == 1 })

	clean.do(t, func() { assert.Zero(t, clean.snapshots, "a clean record is never snapshotted") })
	assert.Equal(t, uint64(1), fx.f.Stats().WritesAttempted)
	_, _, err := fx.store.Read(context.Background(), testKey)
	assert.ErrorIs(t, err, ErrNotFound)
}

func TestFlusherRetriesFailedWrites(t *testing.T) {
	var faulty *storefault.Store[Key]
	fx := newFixture(t, func(s Store) Store { faulty = storefault.New[Key](s); return faulty })
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)
	boom := errors.New("disk on fire")
	faulty.FailNext(storefault.OpWrite, 2, boom)

	o.do(t, func() { o.state = 1; r.MarkDirty() })
	fx.period()
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesFailed == 1 })
	assert.True(t, r.Dirty(), "a failed write leaves the record dirty")

	// The retry takes a fresh snapshot, so a change made meanwhile is in it.
	o.do(t, func() { o.state = 2 })
	fx.period()
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesFailed == 2 })
	fx.period()
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesSucceeded == 1 })

	assert.Equal(t, "2", fx.stored(t, testKey))
	assert.False(t, r.Dirty())
	assert.Equal(t, uint64(3), fx.f.Stats().WritesAttempted)
	assert.Equal(t, 2, fx.logs.count(slog.LevelWarn, testKey), "each failed background write is logged at warn")
	assert.NoError(t, r.Err(), "a transient failure is not a conflict")
}

func TestFlusherRetriesFailedSnapshots(t *testing.T) {
	fx := newFixture(t, nil)
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)
	o.do(t, func() { o.state = 3; o.snapshotErr = errors.New("cannot encode"); r.MarkDirty() })

	fx.period()
	require.Eventually(t, func() bool { return fx.logs.count(slog.LevelWarn, testKey) == 1 }, waitFor, pollEvery)
	assert.True(t, r.Dirty())
	assert.Zero(t, fx.f.Stats().WritesAttempted)

	o.do(t, func() { o.snapshotErr = nil })
	fx.period()
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesSucceeded == 1 })
	assert.Equal(t, "3", fx.stored(t, testKey))
}

func TestRecordFlushWritesNow(t *testing.T) {
	fx := newFixture(t, nil)
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)

	var err error
	o.do(t, func() { o.state = 5; r.MarkDirty(); err = r.Flush(context.Background()) })
	require.NoError(t, err)
	assert.Equal(t, "5", fx.stored(t, testKey), "Flush returns after the write, without a period")
	assert.False(t, r.Dirty())
	assert.Equal(t, FlusherStats{Records: 1, WritesAttempted: 1, WritesSucceeded: 1}, fx.f.Stats())

	// Flush writes even a clean record: the owner asked for it.
	o.do(t, func() { o.state = 6; err = r.Flush(context.Background()) })
	require.NoError(t, err)
	assert.Equal(t, "6", fx.stored(t, testKey))

	// Nothing is left for the period to write.
	fx.period()
	o.do(t, func() {})
	assert.Equal(t, uint64(2), fx.f.Stats().WritesAttempted)
}

func TestRecordFlushReportsFailures(t *testing.T) {
	var faulty *storefault.Store[Key]
	fx := newFixture(t, func(s Store) Store { faulty = storefault.New[Key](s); return faulty })
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)
	boom := errors.New("boom")
	faulty.FailNext(storefault.OpWrite, 1, boom)

	var err error
	o.do(t, func() { o.state = 1; r.MarkDirty(); err = r.Flush(context.Background()) })
	require.ErrorIs(t, err, boom)
	assert.True(t, r.Dirty(), "the background retries a failed Flush")
	fx.period()
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesSucceeded == 1 })
	assert.Equal(t, "1", fx.stored(t, testKey))

	o.do(t, func() { o.snapshotErr = boom; err = r.Flush(context.Background()) })
	require.ErrorIs(t, err, boom)
	assert.True(t, r.Dirty())
}

func TestRecordCloseFlushesDirtyState(t *testing.T) {
	fx := newFixture(t, nil)
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)
	require.Equal(t, 1, fx.f.Stats().Records)

	var err error
	o.do(t, func() { o.state = 4; r.MarkDirty(); err = r.Close(context.Background()) })
	require.NoError(t, err)
	assert.Equal(t, "4", fx.stored(t, testKey))
	assert.Equal(t, 0, fx.f.Stats().Records)

	o.do(t, func() {
		assert.NoError(t, r.Close(context.Background()), "Close twice is fine")
		assert.ErrorIs(t, r.Flush(context.Background()), ErrClosed)
		assert.ErrorIs(t, r.Clear(context.Background()), ErrClosed)
		r.MarkDirty()
	})
	fx.period()
	o.do(t, func() {})
	assert.Equal(t, uint64(1), fx.f.Stats().WritesAttempted, "a closed record is never written")
}

func TestRecordCloseSkipsCleanState(t *testing.T) {
	fx := newFixture(t, nil)
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)
	var err error
	o.do(t, func() { err = r.Close(context.Background()) })
	require.NoError(t, err)
	assert.Zero(t, fx.f.Stats().WritesAttempted)
	assert.Zero(t, fx.f.Stats().Records)
}

func TestFlusherStopFlushesEverything(t *testing.T) {
	fx := newFixture(t, nil)
	const n = 5
	records := make([]*Record, n)
	for i := range n {
		o := newTestOwner(t)
		records[i] = o.open(t, fx.f, keyN(i))
		if i == 0 {
			continue // one clean record
		}
		o.do(t, func() { o.state = 100 + i; records[i].MarkDirty() })
	}

	require.NoError(t, fx.f.Stop(context.Background()))
	for i := 1; i < n; i++ {
		assert.Equal(t, 100+i, atoi(t, fx.stored(t, keyN(i))))
		assert.False(t, records[i].Dirty())
	}
	assert.Equal(t, uint64(n-1), fx.f.Stats().WritesSucceeded)
	assert.Zero(t, fx.clock.Pending(), "the timer is disarmed")
	require.NoError(t, fx.f.Stop(context.Background()), "Stop twice is fine")

	_, _, err := fx.f.Open(context.Background(), keyN(9), func(func()) bool { return true }, func() ([]byte, error) { return nil, nil })
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, fx.f.Start(context.Background()), ErrClosed)
}

func TestFlusherStopWithoutStart(t *testing.T) {
	store := NewMemoryStore()
	f, err := NewFlusher(store, FlusherOptions{}, WithClock(clock.NewFake(time.Unix(0, 0))))
	require.NoError(t, err)
	o := newTestOwner(t)
	r := o.open(t, f, testKey)
	o.do(t, func() { o.state = 9; r.MarkDirty() })
	require.NoError(t, f.Stop(context.Background()))
	data, _, err := store.Read(context.Background(), testKey)
	require.NoError(t, err)
	assert.Equal(t, "9", string(data))
}

func TestFlusherStopReportsFinalFailures(t *testing.T) {
	var faulty *storefault.Store[Key]
	fx := newFixture(t, func(s Store) Store { faulty = storefault.New[Key](s); return faulty })
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)
	boom := errors.New("boom")
	faulty.FailNext(storefault.OpWrite, 1, boom)
	o.do(t, func() { o.state = 1; r.MarkDirty() })
	assert.ErrorIs(t, fx.f.Stop(context.Background()), boom)
}

func TestFlusherStopGivesUpWhenContextEnds(t *testing.T) {
	fx := newFixture(t, nil)
	// An owner that accepts turns and never runs them.
	swallow := func(func()) bool { return true }
	r, _, err := fx.f.Open(context.Background(), testKey, swallow, func() ([]byte, error) { return nil, nil })
	require.NoError(t, err)
	r.MarkDirty()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, fx.f.Stop(ctx), context.Canceled)
	assert.NoError(t, fx.f.Stop(context.Background()), "a later Stop sees the first one finished")
}

func TestFlusherConcurrentStopsWaitForTheFirst(t *testing.T) {
	fx := newFixture(t, nil)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { assert.NoError(t, fx.f.Stop(context.Background())) })
	}
	wg.Wait()
}

func TestFlusherDropsRecordWhenOwnerIsGone(t *testing.T) {
	fx := newFixture(t, nil)
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)
	o.do(t, func() { o.state = 1; r.MarkDirty() })
	o.stop()

	fx.period()
	fx.waitStats(t, func(s FlusherStats) bool { return s.Dropped == 1 && s.Records == 0 })
	assert.Zero(t, fx.f.Stats().WritesAttempted)
	assert.Zero(t, fx.logs.count(slog.LevelWarn, testKey), "dropping is quiet")
	assert.ErrorIs(t, r.Flush(context.Background()), ErrClosed)
	require.NoError(t, fx.f.Stop(context.Background()), "a dropped record does not fail the final flush")
}

func TestFlusherStopsRetryingOnConflict(t *testing.T) {
	fx := newFixture(t, nil)
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)
	// Another activation writes the same state behind this one's back.
	theirETag, err := fx.store.Write(context.Background(), testKey, []byte("theirs"), "")
	require.NoError(t, err)

	o.do(t, func() { o.state = 1; r.MarkDirty() })
	fx.period()
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesFailed == 1 })
	var conflict *ConflictError
	require.ErrorAs(t, r.Err(), &conflict)
	assert.Equal(t, ConflictError{Key: testKey, Expected: "", Actual: theirETag}, *conflict)

	// Further periods leave it alone: retrying cannot heal a conflict.
	other := newTestOwner(t)
	r2 := other.open(t, fx.f, keyN(2))
	other.do(t, func() { r2.MarkDirty() })
	o.do(t, func() { o.snapshots = 0 })
	fx.period()
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesSucceeded == 1 })
	o.do(t, func() { assert.Zero(t, o.snapshots) })
	assert.Equal(t, uint64(1), fx.f.Stats().WritesFailed)
	assert.Equal(t, "theirs", fx.stored(t, testKey))

	// The owner learns of it from Flush and Close too.
	o.do(t, func() {
		assert.ErrorIs(t, r.Flush(context.Background()), ErrConflict)
		err = r.Close(context.Background())
	})
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, 1, fx.f.Stats().Records, "Close unregisters even when its flush fails; only r2 is left")
}

// The function registered with OnConflict is told of a conflicting
// background write, once, with the conflict; the owner's own Flush
// returns its conflict instead.
func TestRecordOnConflictHearsOfBackgroundConflicts(t *testing.T) {
	fx := newFixture(t, nil)
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)
	heard := make(chan error, 4)
	r.OnConflict(func(err error) { heard <- err })
	_, err := fx.store.Write(context.Background(), testKey, []byte("theirs"), "")
	require.NoError(t, err)

	o.do(t, func() { o.state = 1; r.MarkDirty() })
	fx.period()
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesFailed == 1 })
	var conflict *ConflictError
	require.ErrorAs(t, <-heard, &conflict)
	assert.Equal(t, testKey, conflict.Key)

	fx.period()
	o.do(t, func() { assert.ErrorIs(t, r.Flush(context.Background()), ErrConflict) })
	assert.Empty(t, heard, "a conflict is not retried, so it is told once; Flush returns its own to the owner")
}

func TestRecordFlushClearsConflictOnSuccess(t *testing.T) {
	fx := newFixture(t, nil)
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)
	theirETag, err := fx.store.Write(context.Background(), testKey, []byte("theirs"), "")
	require.NoError(t, err)
	o.do(t, func() { assert.ErrorIs(t, r.Flush(context.Background()), ErrConflict) })
	require.Error(t, r.Err())

	// An operator removes the other state; the owner's next Flush wins.
	require.NoError(t, fx.store.Delete(context.Background(), testKey, theirETag))
	o.do(t, func() { o.state = 8; assert.NoError(t, r.Flush(context.Background())) })
	assert.NoError(t, r.Err())
	assert.Equal(t, "8", fx.stored(t, testKey))
}

func TestRecordClear(t *testing.T) {
	fx := newFixture(t, nil)
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)
	o.do(t, func() {
		o.state = 1
		require.NoError(t, r.Flush(context.Background()))
		o.state = 2
		r.MarkDirty()
		o.state = 0
		require.NoError(t, r.Clear(context.Background()))
	})
	_, _, err := fx.store.Read(context.Background(), testKey)
	assert.ErrorIs(t, err, ErrNotFound)
	assert.Empty(t, r.ETag())
	assert.False(t, r.Dirty(), "Clear marks the record clean")

	// State set after a Clear is created afresh.
	o.do(t, func() { o.state = 3; r.MarkDirty() })
	fx.period()
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesSucceeded == 2 })
	assert.Equal(t, "3", fx.stored(t, testKey))

	// Clear is etag-checked.
	_, err = fx.store.Write(context.Background(), testKey, []byte("theirs"), r.ETag())
	require.NoError(t, err)
	o.do(t, func() { err = r.Clear(context.Background()) })
	assert.ErrorIs(t, err, ErrConflict)
	assert.Equal(t, "theirs", fx.stored(t, testKey))
}

func TestFlusherOpenReadsStoredState(t *testing.T) {
	fx := newFixture(t, nil)
	etag, err := fx.store.Write(context.Background(), testKey, []byte("41"), "")
	require.NoError(t, err)
	o := newTestOwner(t)
	r, data, err := fx.f.Open(context.Background(), testKey, o.schedule, o.snapshot)
	require.NoError(t, err)
	assert.Equal(t, []byte("41"), data)
	assert.Equal(t, etag, r.ETag())
	assert.Equal(t, testKey, r.Key())

	// The update goes out with the loaded etag.
	o.do(t, func() { o.state = 42; assert.NoError(t, r.Flush(context.Background())) })
	assert.Equal(t, "42", fx.stored(t, testKey))

	r2, data, err := fx.f.Open(context.Background(), keyN(5), o.schedule, o.snapshot)
	require.NoError(t, err)
	assert.Nil(t, data, "missing state is not an error")
	assert.Empty(t, r2.ETag())
}

func TestFlusherOpenErrors(t *testing.T) {
	var faulty *storefault.Store[Key]
	fx := newFixture(t, func(s Store) Store { faulty = storefault.New[Key](s); return faulty })
	boom := errors.New("boom")
	faulty.FailNext(storefault.OpRead, 1, boom)
	o := newTestOwner(t)
	_, _, err := fx.f.Open(context.Background(), testKey, o.schedule, o.snapshot)
	assert.ErrorIs(t, err, boom)
	_, _, err = fx.f.Open(context.Background(), testKey, nil, o.snapshot)
	assert.Error(t, err)
	_, _, err = fx.f.Open(context.Background(), testKey, o.schedule, nil)
	assert.Error(t, err)
	assert.Zero(t, fx.f.Stats().Records)
}

func TestFlusherTimerArmedOnlyWhileRunning(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	f, err := NewFlusher(NewMemoryStore(), FlusherOptions{Period: time.Second}, WithClock(fake))
	require.NoError(t, err)
	assert.Zero(t, fake.Pending(), "NewFlusher arms nothing")

	require.NoError(t, f.Start(context.Background()))
	assert.Equal(t, 1, fake.Pending())
	assert.Error(t, f.Start(context.Background()), "Start twice")
	fake.Advance(5 * time.Second)
	assert.Equal(t, 1, fake.Pending(), "each tick re-arms exactly one timer")

	require.NoError(t, f.Stop(context.Background()))
	assert.Zero(t, fake.Pending())
	fake.Advance(5 * time.Second)
	assert.Zero(t, fake.Pending())
}

func TestFlusherLeavesNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t)
	f, err := NewFlusher(NewMemoryStore(), FlusherOptions{Period: time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, f.Start(context.Background()))
	require.NoError(t, f.Stop(context.Background()))
}

// TestFlusherNewFlusherValidates also checks defaults.
func TestNewFlusherValidates(t *testing.T) {
	f, err := NewFlusher(NewMemoryStore(), FlusherOptions{})
	require.NoError(t, err)
	assert.Equal(t, FlusherOptions{Period: DefaultPeriod, WriteTimeout: DefaultWriteTimeout, Writers: DefaultWriters}, f.Options())

	_, err = NewFlusher(NewMemoryStore(), FlusherOptions{Period: -time.Second})
	assert.ErrorContains(t, err, "Period")
	_, err = NewFlusher(nil, FlusherOptions{})
	assert.ErrorContains(t, err, "Store")
}

func TestFlusherOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    FlusherOptions
		wantBad []string
	}{
		{"defaults", *(&FlusherOptions{}).EnsureDefaults(), nil},
		{"zero before defaults", FlusherOptions{}, []string{"Period", "WriteTimeout", "Writers"}},
		{"negative period", FlusherOptions{Period: -1, WriteTimeout: time.Second, Writers: 1}, []string{"Period"}},
		{"negative timeout", FlusherOptions{Period: time.Second, WriteTimeout: -1, Writers: 1}, []string{"WriteTimeout"}},
		{"no writers", FlusherOptions{Period: time.Second, WriteTimeout: time.Second, Writers: -1}, []string{"Writers"}},
		{"all bad", FlusherOptions{Period: -1, WriteTimeout: -1}, []string{"Period", "WriteTimeout", "Writers"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			if tt.wantBad == nil {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, field := range tt.wantBad {
				assert.ErrorContains(t, err, "FlusherOptions."+field)
			}
			for _, field := range []string{"Period", "WriteTimeout", "Writers"} {
				if !slices.Contains(tt.wantBad, field) {
					assert.NotContains(t, err.Error(), "FlusherOptions."+field+" ")
				}
			}
		})
	}
}

func TestFlusherOptionsEnsureDefaultsKeepsSetFields(t *testing.T) {
	o := FlusherOptions{Period: time.Second}
	o.EnsureDefaults()
	assert.Equal(t, FlusherOptions{Period: time.Second, WriteTimeout: DefaultWriteTimeout, Writers: DefaultWriters}, o)
}
