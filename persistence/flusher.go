package persistence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/granary-go/granary/clock"
)

// errAlreadyStarted is returned by a second call to Flusher.Start.
var errAlreadyStarted = errors.New("persistence: flusher already started")

// Flusher writes dirty grain state to a Store in the background, once per
// period, and on demand through the Records it opens.
//
// Grain state belongs to its activation and is only touched inside the
// activation's turns, so the flusher never reads state itself: for each dirty
// Record it asks the owner, through the schedule function given to Open, to
// run a snapshot inside its next turn, and then writes the bytes from its own
// goroutine. One goroutine, started by Start and joined by Stop, collects
// the dirty records and hands their snapshots to up to Writers concurrent
// writes, waiting for all of them before it collects again, so at most one
// write is in flight per Record and a Record's writes are applied in order.
//
// A Flusher is safe for concurrent use. Create one with NewFlusher.
type Flusher struct {
	store  Store
	opts   FlusherOptions
	clock  clock.Clock
	logger *slog.Logger
	tickFn func() // f.onTick, bound once so re-arming does not allocate

	// tick carries a due period to the writer; work wakes whoever drains the
	// queue (the writer, or Stop) after a snapshot turn queued or settled.
	// Both hold at most one signal: a signal means "look again", not a count.
	tick chan struct{}
	work chan struct{}
	// slots holds a token per background write in flight, Writers at most;
	// written tells drain that one of them ended (one signal at most).
	slots   chan struct{}
	written chan struct{}

	// spare is the writer's second buffer for the dirty list, swapped with
	// mu.dirty at every collection so a period allocates nothing.
	spare []*Record

	// stopDone is closed when the first Stop returns.
	stopDone chan struct{}

	stats struct {
		attempted, succeeded, failed, dropped atomic.Uint64
	}

	mu struct {
		sync.Mutex
		records map[*Record]struct{}
		// dirty lists records that turned dirty since the last collection;
		// Record.listed says whether a record is on it.
		dirty []*Record
		// queue holds records whose snapshot waits to be written. A record
		// can appear twice if its first snapshot was superseded; the stale
		// entry finds no data and is skipped.
		queue []*Record

		started, stopping bool
		timer             clock.Timer
		quit              chan struct{}
		writerDone        chan struct{}
		cancel            context.CancelFunc
		// finalizing is set once Stop's final flush begins; finalFailed
		// counts its failures and finalErrs keeps the first of them, for
		// Stop to return.
		finalizing  bool
		finalFailed int
		finalErrs   []error
	}
}

// FlusherStats is a snapshot of a Flusher's counters.
type FlusherStats struct {
	// Records is how many Records are open.
	Records int
	// WritesAttempted counts Store.Write calls, background and on demand.
	WritesAttempted uint64
	// WritesSucceeded counts Store.Write calls that returned no error.
	WritesSucceeded uint64
	// WritesFailed counts Store.Write calls that returned an error.
	WritesFailed uint64
	// Dropped counts Records closed because their owner's schedule function
	// reported that the owner was gone.
	Dropped uint64
}

// NewFlusher returns a Flusher that writes to store. It fills opts' zero
// fields with defaults and reports invalid options; it does no I/O and starts
// nothing. Records may be opened before Start, but background flushing runs
// only between Start and Stop.
func NewFlusher(store Store, opts FlusherOptions, optFns ...Option) (*Flusher, error) {
	if store == nil {
		return nil, errors.New("persistence: NewFlusher needs a Store")
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	deps := flusherDeps{clock: clock.Real{}, logger: slog.New(slog.DiscardHandler)}
	for _, fn := range optFns {
		fn(&deps)
	}
	f := &Flusher{
		store:   store,
		opts:    opts,
		clock:   deps.clock,
		logger:  deps.logger,
		tick:    make(chan struct{}, 1),
		work:    make(chan struct{}, 1),
		slots:   make(chan struct{}, opts.Writers),
		written: make(chan struct{}, 1),
	}
	f.tickFn = f.onTick
	f.mu.records = make(map[*Record]struct{})
	f.stopDone = make(chan struct{})
	return f, nil
}

// Options returns the options in effect, defaults filled in.
func (f *Flusher) Options() FlusherOptions { return f.opts }

// Stats returns the current counters.
func (f *Flusher) Stats() FlusherStats {
	f.mu.Lock()
	n := len(f.mu.records)
	f.mu.Unlock()
	return FlusherStats{
		Records:         n,
		WritesAttempted: f.stats.attempted.Load(),
		WritesSucceeded: f.stats.succeeded.Load(),
		WritesFailed:    f.stats.failed.Load(),
		Dropped:         f.stats.dropped.Load(),
	}
}

// Start starts the background writer and arms the period timer. ctx's values
// (not its cancellation) reach the Store calls the writer makes; the writer
// runs until Stop. Start fails on a second call and after Stop.
func (f *Flusher) Start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.stopping {
		return ErrClosed
	}
	if f.mu.started {
		return errAlreadyStarted
	}
	f.mu.started = true
	writerCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f.mu.cancel = cancel
	f.mu.quit = make(chan struct{})
	f.mu.writerDone = make(chan struct{})
	go f.run(writerCtx, f.mu.quit, f.mu.writerDone)
	f.mu.timer = f.clock.AfterFunc(f.opts.Period, f.tickFn)
	return nil
}

// Stop disarms the timer, joins the background writer, and then makes a
// final flush: every open Record that is dirty is snapshotted through its
// owner and written, and Stop waits for those writes. It returns the failures
// of the final flush joined into one error, or ctx's error if ctx ends first
// (writes still in flight are then cancelled). Records stay usable for
// on-demand Flush, Clear and Close after Stop, but Open fails with ErrClosed.
// Stop may be called more than once, and without Start; later calls wait for
// the first to finish and return nil.
func (f *Flusher) Stop(ctx context.Context) error {
	f.mu.Lock()
	if f.mu.stopping {
		done := f.stopDone
		f.mu.Unlock()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.stopping = true
	if f.mu.timer != nil {
		f.mu.timer.Stop()
		f.mu.timer = nil
	}
	started, quit, writerDone, cancel := f.mu.started, f.mu.quit, f.mu.writerDone, f.mu.cancel
	f.mu.Unlock()
	defer close(f.stopDone)

	if started {
		close(quit)
		select {
		case <-writerDone:
		case <-ctx.Done():
			cancel() // abandon the in-flight write rather than overstay ctx
			<-writerDone
		}
		cancel()
	}
	err := f.finalFlush(ctx)
	f.mu.Lock()
	failed, errs := f.mu.finalFailed, f.mu.finalErrs
	f.mu.Unlock()
	if err != nil {
		n, keys := f.Unwritten(unwrittenSample)
		f.logger.Warn("persistence: stop ran out of time: grain states not written", "count", n, "keys", keys)
		return fmt.Errorf("persistence: stop: %w: %d grain states not written", err, n)
	}
	if failed == 0 {
		return nil
	}
	f.logger.Warn("persistence: stop: grain states not written", "count", failed, "err", errors.Join(errs...))
	if failed > len(errs) {
		return fmt.Errorf("persistence: %d grain states not written, among them: %w", failed, errors.Join(errs...))
	}
	return errors.Join(errs...)
}

// unwrittenSample is how many keys of unwritten states a stop names.
const unwrittenSample = 10

// Unwritten counts the open records whose state is not written yet: dirty,
// with a snapshot asked for or waiting for a writer, or closed with
// CloseQueued and not yet written. It returns up to most of their keys,
// for a log line that says what a stop that ran out of time could not
// write. It walks every open record.
func (f *Flusher) Unwritten(most int) (int, []Key) {
	f.mu.Lock()
	records := make([]*Record, 0, len(f.mu.records))
	for r := range f.mu.records {
		records = append(records, r)
	}
	f.mu.Unlock()
	n := 0
	var keys []Key
	for _, r := range records {
		r.mu.Lock()
		unwritten := !r.mu.closed && (r.mu.pending || r.mu.hasData || r.mu.closing || r.dirty.Load())
		r.mu.Unlock()
		if unwritten {
			n++
			if len(keys) < most {
				keys = append(keys, r.key)
			}
		}
	}
	return n, keys
}

// Open reads the state stored under key and opens a Record to flush it. It
// returns the stored data, or nil if nothing is stored (a missing state is not
// an error; Record.ETag is then "").
//
// schedule must arrange for fn to run inside the owner's next turn and return
// true, or return false if the owner is gone, in which case the Record is
// closed quietly. It must not block on the turn itself: the flusher calls it
// from its writer goroutine. snapshot returns the state's current bytes; it is
// only ever called inside a function passed to schedule or inside the
// owner's own calls to Flush and Close, so it may read state without locks.
// The flusher owns the returned slice and the owner must not change it.
//
// Open does not stop two records for one key: their writes would then
// conflict, which is how a duplicate activation is detected.
func (f *Flusher) Open(ctx context.Context, key Key, schedule func(fn func()) bool, snapshot func() ([]byte, error)) (*Record, []byte, error) {
	if schedule == nil || snapshot == nil {
		return nil, nil, errors.New("persistence: Open needs schedule and snapshot functions")
	}
	if f.isStopping() {
		return nil, nil, ErrClosed
	}
	data, etag, err := f.store.Read(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		data, etag = nil, ""
	case err != nil:
		return nil, nil, fmt.Errorf("persistence: read %s: %w", key, err)
	}
	r := &Record{flusher: f, key: key, schedule: schedule, snapshot: snapshot}
	r.turnFn = r.turn
	r.mu.etag = etag
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.stopping {
		return nil, nil, ErrClosed
	}
	f.mu.records[r] = struct{}{}
	return r, data, nil
}

func (f *Flusher) isStopping() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.stopping
}

// onTick runs on the clock's goroutine (inside Advance for a fake clock). It
// only hands the period to the writer and re-arms, so that a slow owner or
// store never delays the clock.
func (f *Flusher) onTick() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mu.stopping {
		return
	}
	f.mu.timer = f.clock.AfterFunc(f.opts.Period, f.tickFn)
	select {
	case f.tick <- struct{}{}:
	default:
	}
}

// run is the background writer.
func (f *Flusher) run(ctx context.Context, quit <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-quit:
			return
		case <-f.tick:
			f.collect()
		case <-f.work:
		}
		f.drain(ctx, quit)
	}
}

// collect asks the owner of every record that turned dirty since the last
// period for a snapshot.
func (f *Flusher) collect() {
	f.mu.Lock()
	list := f.mu.dirty
	f.mu.dirty = f.spare[:0]
	for _, r := range list {
		r.listed = false
	}
	f.mu.Unlock()

	var carry, requeue []*Record
	for _, r := range list {
		if !r.dirty.Load() && !r.closingWithData() {
			continue // flushed on demand since it was listed
		}
		r.mu.Lock()
		request := false
		switch {
		case r.mu.closed, r.mu.conflict != nil:
			// A conflict will not heal by retrying: leave it to the owner.
		case r.mu.closing:
			requeue = append(requeue, r) // a final snapshot whose write failed
		case r.mu.pending, r.mu.hasData:
			carry = append(carry, r) // a snapshot is on its way; look again next period
		default:
			r.mu.pending = true
			request = true
		}
		r.mu.Unlock()
		if request {
			f.request(r)
		}
	}
	for _, r := range carry {
		f.noteDirty(r)
	}
	for _, r := range requeue {
		f.enqueue(r)
	}
	clear(list)
	f.spare = list[:0]
}

// request asks r's owner for a snapshot turn; r.mu.pending must already be
// set. It calls the owner's code, so no lock may be held.
func (f *Flusher) request(r *Record) {
	if r.schedule(r.turnFn) {
		return
	}
	r.mu.Lock()
	r.mu.pending = false
	wasClosed := r.mu.closed
	r.mu.closed = true
	r.mu.data, r.mu.hasData = nil, false
	r.mu.Unlock()
	if !wasClosed {
		f.unregister(r)
		f.stats.dropped.Add(1)
		f.logger.Debug("persistence: owner gone, record dropped", "key", r.key.String())
	}
	f.signal()
}

func (f *Flusher) unregister(r *Record) {
	f.mu.Lock()
	delete(f.mu.records, r)
	f.mu.Unlock()
}

// noteDirty puts r on the dirty list unless it is already there.
func (f *Flusher) noteDirty(r *Record) {
	f.mu.Lock()
	if !r.listed {
		r.listed = true
		f.mu.dirty = append(f.mu.dirty, r)
	}
	f.mu.Unlock()
}

func (f *Flusher) enqueue(r *Record) {
	f.mu.Lock()
	f.mu.queue = append(f.mu.queue, r)
	f.mu.Unlock()
	f.signal()
}

func (f *Flusher) signal() {
	select {
	case f.work <- struct{}{}:
	default:
	}
}

func (f *Flusher) dequeue() *Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.mu.queue) == 0 {
		return nil
	}
	r := f.mu.queue[0]
	f.mu.queue[0] = nil
	f.mu.queue = f.mu.queue[1:]
	return r
}

// drain writes every queued snapshot, starting them in queue order with up
// to Writers in flight, and reports how many records it took from the
// queue once every write it started has ended. Owners take snapshots in
// their own turns, so they arrive one by one: one that arrives while
// writes are in flight joins them. A nil quit drains to the end; otherwise
// drain stops starting writes once quit is closed.
func (f *Flusher) drain(ctx context.Context, quit <-chan struct{}) int {
	n := 0
	var writes sync.WaitGroup
	defer writes.Wait()
	for {
		if quit != nil {
			select {
			case <-quit:
				return n
			default:
			}
		}
		r := f.dequeue()
		if r == nil {
			if len(f.slots) == 0 {
				return n
			}
			// Waiting here rather than for every write keeps a slow write
			// from holding up the snapshots behind it. The next collection
			// still waits for all of them: it could ask for a snapshot of
			// a record whose write is in flight.
			select {
			case <-f.work:
			case <-f.written:
			case <-quit:
			}
			continue
		}
		n++
		if f.opts.Writers == 1 {
			f.writeQueued(ctx, r)
			continue
		}
		f.slots <- struct{}{}
		writes.Go(func() {
			defer func() {
				<-f.slots
				select {
				case f.written <- struct{}{}:
				default:
				}
			}()
			f.writeQueued(ctx, r)
		})
	}
}

// writeQueued writes r's queued snapshot, if it still has one.
func (f *Flusher) writeQueued(ctx context.Context, r *Record) {
	r.mu.Lock()
	// The owner supersedes a queued snapshot by dropping it before it writes
	// (Record.acquire), and queues a new one only in a later turn, so a
	// record with data here never has a write in flight, unless the owner
	// closed it with CloseQueued while a background write was in flight:
	// the final snapshot then waits for that write, so that writes stay in
	// order.
	for r.mu.closing && r.mu.done != nil {
		wait := r.mu.done
		r.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return
		}
		r.mu.Lock()
	}
	if !r.mu.hasData || r.mu.closed {
		r.mu.Unlock()
		return
	}
	data, etag := r.mu.data, r.mu.etag
	r.mu.data, r.mu.hasData = nil, false
	closing := r.mu.closing
	done := r.beginWriteLocked()
	r.mu.Unlock()

	writeCtx, cancel := context.WithTimeout(ctx, f.opts.WriteTimeout)
	err := r.write(writeCtx, done, data, etag)
	cancel()
	if err != nil {
		f.fail(r, "write", err)
	}
	if closing {
		f.closeWritten(r, data, err)
	}
	f.countWrite(err)
	if errors.Is(err, ErrConflict) {
		if fn := r.conflictHook(); fn != nil {
			fn(err)
		}
	}
}

// closeWritten ends the write of the final snapshot of a record its owner
// closed with CloseQueued: the record closes, unless the write failed for
// a reason that may heal and the flusher is not stopping, in which case
// the snapshot waits for the next period (collect queues it again).
func (f *Flusher) closeWritten(r *Record, data []byte, err error) {
	f.mu.Lock()
	final := f.mu.finalizing
	f.mu.Unlock()
	if err != nil && !final && !errors.Is(err, ErrConflict) {
		r.mu.Lock()
		if !r.mu.hasData {
			r.mu.data, r.mu.hasData = data, true
		}
		r.mu.Unlock()
		r.dirty.Store(false) // nothing newer than data: the owner is gone
		f.noteDirty(r)
		return
	}
	r.finishClose()
}

// countWrite counts a finished write. Callers count only once the record
// reflects the outcome (new ETag, or dirty again), so that whoever sees a
// counter move also sees the record's new state.
func (f *Flusher) countWrite(err error) {
	if err != nil {
		f.stats.failed.Add(1)
	} else {
		f.stats.succeeded.Add(1)
	}
}

// fail reports a background failure: logged always, and, if it happened
// during the final flush, returned by Stop and not retried. The final
// flush logs its first failures one by one and the rest in Stop's summary.
func (f *Flusher) fail(r *Record, op string, err error) {
	f.mu.Lock()
	final := f.mu.finalizing
	logIt := !final || f.mu.finalFailed < unwrittenSample
	if final {
		f.mu.finalFailed++
		if len(f.mu.finalErrs) < unwrittenSample {
			f.mu.finalErrs = append(f.mu.finalErrs, fmt.Errorf("persistence: %s %s: %w", op, r.key, err))
		}
	}
	f.mu.Unlock()
	if logIt {
		f.logger.Warn("persistence: background "+op+" failed; state stays dirty", "key", r.key.String(), "err", err)
	}
	if final {
		r.mu.Lock()
		r.mu.failedFinal = true
		r.mu.Unlock()
	}
}

// finalFlush snapshots and writes every dirty open record, on the caller's
// goroutine, once the background writer has been joined. A record that
// changes again while its older snapshot is being written is snapshotted
// again; a record whose snapshot or write fails is not retried.
func (f *Flusher) finalFlush(ctx context.Context) error {
	f.mu.Lock()
	f.mu.finalizing = true
	set := make([]*Record, 0, len(f.mu.records))
	for r := range f.mu.records {
		set = append(set, r)
	}
	f.mu.Unlock()
	for _, r := range set {
		if r.closingWithData() {
			f.enqueue(r) // a final snapshot whose write failed before Stop
		}
	}

	for {
		progress := false
		for _, r := range set {
			if r.dirty.Load() && r.idleForFinalFlush() {
				f.request(r)
				progress = true
			}
		}
		// A write drained here may leave its record dirty again (changed
		// after that snapshot), so look again before waiting for a signal.
		if f.drain(ctx, nil) > 0 || progress {
			continue
		}
		if f.settled(set) {
			return nil
		}
		select {
		case <-f.work:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// closingWithData reports whether r is a record closed with CloseQueued
// whose final snapshot waits to be written.
func (r *Record) closingWithData() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.closing && r.mu.hasData
}

// idleForFinalFlush claims r for a final snapshot request (setting
// r.mu.pending) if it is open, has no snapshot on its way and has not
// already failed during Stop.
func (r *Record) idleForFinalFlush() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed || r.mu.closing || r.mu.pending || r.mu.hasData || r.mu.failedFinal {
		return false
	}
	r.mu.pending = true
	return true
}

// settled reports whether no record in set waits for a snapshot turn, has a
// snapshot waiting to be written, or is dirty and still worth a final try.
func (f *Flusher) settled(set []*Record) bool {
	for _, r := range set {
		r.mu.Lock()
		busy := !r.mu.closed && (r.mu.pending || r.mu.hasData || (r.dirty.Load() && !r.mu.failedFinal))
		r.mu.Unlock()
		if busy {
			return false
		}
	}
	return true
}
