package persistence

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Record is one piece of grain state opened on a Flusher. Its owner (the
// activation that holds the state) marks it dirty after changing the state
// and may flush, clear or close it; the flusher writes it in the background
// while it is dirty.
//
// MarkDirty, Flush, Clear and Close must be called from inside the owner's
// turns, never concurrently with each other. ETag, Key and Err may be called
// from anywhere.
type Record struct {
	flusher  *Flusher
	key      Key
	schedule func(func()) bool
	snapshot func() ([]byte, error)
	turnFn   func() // r.turn, bound once so a period allocates nothing

	// dirty is set by the owner after a change (and by the flusher when a
	// write fails) and cleared inside the owner's turn just before a
	// snapshot, so a change made after the snapshot is never lost.
	dirty atomic.Bool
	// listed says whether the record is on the flusher's dirty list; it is
	// guarded by flusher.mu.
	listed bool
	// ttl is the time to live of the state's writes, in nanoseconds
	// (SetTTL); 0 for none.
	ttl atomic.Int64

	mu struct {
		sync.Mutex
		etag string
		// pending: a snapshot turn was scheduled and has not run yet.
		pending bool
		// hasData: data is a snapshot waiting for the writer.
		hasData bool
		data    []byte
		// done is set while a Store call for this record is in flight, and
		// closed when it ends. There is at most one.
		done   chan struct{}
		closed bool
		// closing: the owner closed the record with CloseQueued and its
		// final snapshot waits for, or is in, a write; the record closes
		// once it is written.
		closing bool
		// failedFinal: a snapshot or write failed during Stop's final
		// flush, which tries each record once.
		failedFinal bool
		// conflict is the last ETag conflict, which stops background writes
		// until the owner flushes successfully.
		conflict error
		// onConflict is told of background write conflicts (OnConflict).
		onConflict func(error)
		// closed is told once the record closes, after CloseQueued's
		// final write has ended.
		onClosed func()
	}
}

// OnConflict registers fn to be told when a background write of the record
// conflicts, so that an owner whose state is stale can deactivate and
// reload without polling Err. fn runs on the goroutine that made the
// write (one of the flusher's concurrent writes, in the background or in
// Stop's final flush), once per conflicting write, possibly after Close
// has returned and beside the hooks of other records; it must not block:
// hand the decision to the owner's own turn. A later call replaces fn; nil
// removes it. Conflicts of Flush, Clear and Close are returned to their
// caller instead.
func (r *Record) OnConflict(fn func(error)) {
	r.mu.Lock()
	r.mu.onConflict = fn
	r.mu.Unlock()
}

// conflictHook returns the function to tell of a background conflict.
func (r *Record) conflictHook() func(error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.onConflict
}

// SetTTL gives the state's writes from now on a time to live: a store that
// can expire states (an ExpiringStore) drops the state once d has passed
// since its latest write, and others ignore it. 0 removes it. The owner
// sets it when the state is worthless after a while, as a rate limiter's
// is once its quota would be full again. Safe from any goroutine.
func (r *Record) SetTTL(d time.Duration) { r.ttl.Store(int64(max(d, 0))) }

// Key returns the key the record was opened with.
func (r *Record) Key() Key { return r.key }

// ETag returns the ETag of the last value this record read or wrote, or ""
// if nothing is stored.
func (r *Record) ETag() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.etag
}

// Err returns the ETag conflict (a *ConflictError) that stopped background
// writes for this record, or nil. The owner should treat a conflict as
// Orleans does: its state is stale, so it should deactivate and reload.
func (r *Record) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.conflict
}

// MarkDirty records that the state changed, so that the next period writes
// it. It costs one atomic load when the record is already dirty.
func (r *Record) MarkDirty() {
	if r.dirty.Load() {
		return
	}
	r.setDirty()
}

// Dirty reports whether the state changed since its last snapshot.
func (r *Record) Dirty() bool { return r.dirty.Load() }

func (r *Record) setDirty() {
	if !r.dirty.Swap(true) {
		r.flusher.noteDirty(r)
	}
}

// turn runs inside the owner's turn, on the flusher's request: it takes a
// snapshot if the state is still dirty and queues it for the writer.
func (r *Record) turn() {
	f := r.flusher
	defer f.signal()
	r.mu.Lock()
	if r.mu.closed || r.mu.closing || !r.dirty.CompareAndSwap(true, false) {
		r.mu.pending = false
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	data, err := r.takeSnapshot(func(err error) {
		r.mu.Lock()
		r.mu.pending = false
		r.mu.Unlock()
		r.setDirty()
		f.fail(r, "snapshot", err) // Stop's final flush then tries no more
	})
	if err != nil {
		return
	}
	r.mu.Lock()
	r.mu.pending = false
	r.mu.data, r.mu.hasData = data, true
	r.mu.Unlock()
	f.enqueue(r)
}

// Flush writes the state now: it waits for a background write of this record
// already in flight (so writes stay in order), discards any older snapshot
// still queued, takes a snapshot and writes it, whether or not the record is
// dirty. On failure the record stays dirty, for the background to retry; a
// *ConflictError (matching ErrConflict) means the state is stale. A
// snapshot that panics leaves the record dirty and usable, and the panic
// goes on to the caller.
func (r *Record) Flush(ctx context.Context) error {
	done, err := r.acquire(ctx)
	if err != nil {
		return err
	}
	return r.flushAcquired(ctx, done)
}

// Clear deletes the stored state, checked against the record's ETag, and
// marks the record clean: the owner is expected to have reset its state. It
// waits for a background write in flight first and discards a queued one.
func (r *Record) Clear(ctx context.Context) error {
	done, err := r.acquire(ctx)
	if err != nil {
		return err
	}
	etag := r.ETag()
	err = r.flusher.store.Delete(ctx, r.key, etag)
	if err == nil {
		r.dirty.Store(false)
	}
	r.endWrite(done, "", err)
	if err != nil {
		return fmt.Errorf("persistence: delete %s: %w", r.key, err)
	}
	return nil
}

// Close makes a final flush if the state is dirty (or a snapshot was still
// waiting to be written), waits for any write in flight, and unregisters the
// record; call it on deactivation. The record is closed even if the flush
// fails, and the error, a conflict included, is returned: the unwritten
// change is then lost, as the owner is going away. Close is safe to call
// twice.
func (r *Record) Close(ctx context.Context) error {
	r.mu.Lock()
	closed := r.mu.closed || r.mu.closing
	r.mu.Unlock()
	if closed {
		return nil
	}
	defer r.finishClose()
	done, err := r.acquire(ctx)
	if errors.Is(err, ErrClosed) {
		return nil
	}
	if err != nil {
		return err
	}
	if !r.dirty.Load() {
		r.release(done)
		return nil
	}
	return r.flushAcquired(ctx, done)
}

// CloseQueued is Close for an owner that goes away and need not wait for
// the store, as activations do while their silo stops: when the state is
// dirty it takes the final snapshot now and leaves writing it to the
// flusher's writers, beside the final writes of other records, instead of
// writing it in the owner's turn. A snapshot already waiting for a writer
// is kept. The record closes once the write has ended; a write that fails
// is tried again at the next period, as background writes are, until the
// flusher stops, whose final flush waits for these writes and reports
// those that failed. A conflict ends it: the state was stale. It returns
// the snapshot's error (the record is then closed and the change lost), and
// is safe to call twice and after Close.
//
// closed, if not nil, is called once the record has closed: at once when
// there was nothing to write, else when the final write has ended
// (written, or failed for good). An owner that must not be forgotten
// before its state is stored, as an activation's directory entry must
// not, waits for it. It is not called when the flusher stops with the
// write not done, nor when the record was closed or closing already.
func (r *Record) CloseQueued(closed func()) error {
	r.mu.Lock()
	if r.mu.closed || r.mu.closing {
		r.mu.Unlock()
		return nil
	}
	r.mu.onClosed = closed
	// A snapshot turn the flusher asked for will not run: the owner is
	// going. The snapshot is taken here instead.
	r.mu.pending = false
	queued := r.mu.hasData
	if !r.dirty.Load() && !queued {
		r.mu.Unlock()
		r.finishClose()
		return nil
	}
	r.mu.closing = true
	r.mu.Unlock()
	if r.dirty.CompareAndSwap(true, false) {
		data, err := r.takeSnapshot(func(error) { r.finishClose() })
		if err != nil {
			return fmt.Errorf("persistence: snapshot %s: %w", r.key, err)
		}
		r.mu.Lock()
		r.mu.data, r.mu.hasData = data, true
		r.mu.Unlock()
	}
	if !queued {
		r.flusher.enqueue(r)
	}
	return nil
}

func (r *Record) finishClose() {
	r.mu.Lock()
	r.mu.closed = true
	r.mu.data, r.mu.hasData = nil, false
	closed := r.mu.onClosed
	r.mu.onClosed = nil
	r.mu.Unlock()
	r.flusher.unregister(r)
	if closed != nil {
		closed()
	}
}

// acquire claims the record's single write slot for the owner: it discards
// a queued snapshot (the caller is about to supersede it, so it marks the
// record dirty in its place) and waits for a write in flight to end.
func (r *Record) acquire(ctx context.Context) (chan struct{}, error) {
	for {
		r.mu.Lock()
		if r.mu.closed {
			r.mu.Unlock()
			return nil, ErrClosed
		}
		superseded := r.mu.hasData
		r.mu.data, r.mu.hasData = nil, false
		wait := r.mu.done
		var done chan struct{}
		if wait == nil {
			done = r.beginWriteLocked()
		}
		r.mu.Unlock()
		if superseded {
			r.setDirty()
		}
		if done != nil {
			return done, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// flushAcquired snapshots and writes while holding the write slot, and
// releases it.
func (r *Record) flushAcquired(ctx context.Context, done chan struct{}) error {
	r.dirty.Store(false)
	data, err := r.takeSnapshot(func(error) {
		r.release(done)
		r.setDirty()
	})
	if err != nil {
		return fmt.Errorf("persistence: snapshot %s: %w", r.key, err)
	}
	err = r.write(ctx, done, data, r.ETag())
	r.flusher.countWrite(err)
	if err != nil {
		return fmt.Errorf("persistence: write %s: %w", r.key, err)
	}
	return nil
}

// write stores data while holding the write slot done, which it releases,
// and records the outcome; a failed write leaves the record dirty. The
// caller counts it (Flusher.countWrite) once it has done its own
// bookkeeping.
func (r *Record) write(ctx context.Context, done chan struct{}, data []byte, etag string) error {
	r.flusher.stats.attempted.Add(1)
	var newETag string
	var err error
	if es, ok := r.flusher.store.(ExpiringStore); ok && r.ttl.Load() > 0 {
		newETag, err = es.WriteExpiring(ctx, r.key, data, etag, time.Duration(r.ttl.Load()))
	} else {
		newETag, err = r.flusher.store.Write(ctx, r.key, data, etag)
	}
	// A failed write marks the record dirty before it gives up the slot:
	// an owner that takes the slot next (Close, on deactivation) must see
	// the change as still unwritten.
	wasDirty := err != nil && r.dirty.Swap(true)
	r.endWrite(done, newETag, err)
	if err != nil && !wasDirty {
		r.flusher.noteDirty(r)
	}
	return err
}

// errSnapshotPanicked is the failure a background snapshot that panicked
// counts as; the panic itself goes on to the owner.
var errSnapshotPanicked = errors.New("persistence: snapshot panicked")

// takeSnapshot runs the owner's snapshot. Its callers clear the dirty
// flag first, and may hold the write slot; when the snapshot fails, failed
// restores what they changed, so that the record is left dirty and usable.
// It is called with the snapshot's error or, should the snapshot panic (it
// is grain code, whose panics the host contains and answers by
// deactivating), with errSnapshotPanicked, and the panic then goes on to
// the owner.
func (r *Record) takeSnapshot(failed func(error)) ([]byte, error) {
	returned := false
	defer func() {
		if !returned {
			failed(errSnapshotPanicked)
		}
	}()
	data, err := r.snapshot()
	returned = true
	if err != nil {
		failed(err)
	}
	return data, err
}

func (r *Record) beginWriteLocked() chan struct{} {
	r.mu.done = make(chan struct{})
	return r.mu.done
}

// release gives back the write slot after writing nothing.
func (r *Record) release(done chan struct{}) {
	r.mu.Lock()
	r.mu.done = nil
	r.mu.Unlock()
	close(done)
}

// endWrite releases the write slot and records the outcome of the store
// call: a new ETag ("" after a delete) on success, the conflict on one.
func (r *Record) endWrite(done chan struct{}, newETag string, err error) {
	r.mu.Lock()
	r.mu.done = nil
	var conflict *ConflictError
	switch {
	case err == nil:
		r.mu.etag = newETag
		r.mu.conflict = nil
	case errors.As(err, &conflict):
		r.mu.conflict = conflict
	}
	r.mu.Unlock()
	close(done)
}
