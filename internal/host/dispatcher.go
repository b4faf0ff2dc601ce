package host

import (
	"sync"
	"sync/atomic"
)

// maxIdleWorkers bounds the parked workers of a dispatcher; a worker that
// finds this many already idle exits instead of parking.
const maxIdleWorkers = 256

// mailboxThroughput is how many messages a mailbox processes before it
// yields the worker to other runnable goroutines.
const mailboxThroughput = 300

// workerDispatcher runs mailbox processing on long-lived worker goroutines
// instead of a new goroutine per wake-up, which is what protoactor's default
// dispatcher does. A fresh goroutine starts on a small stack that the turn's
// call chain outgrows at once, so every wake paid for a stack copy (about a
// fifth of a request turn on a hot key); a parked worker keeps its grown
// stack. Schedule hands the work to a parked worker when one is waiting and
// starts a new worker otherwise, so a grain that blocks its turn never
// starves other activations.
type workerDispatcher struct {
	work chan func()
	stop chan struct{}
	idle atomic.Int32
	wg   sync.WaitGroup
	// mu orders starting a worker against close: no worker starts once
	// close has begun, so that wg.Add never races wg.Wait. Only the slow
	// path, which starts a goroutine anyway, takes it.
	mu     sync.Mutex
	closed bool
}

func newWorkerDispatcher() *workerDispatcher {
	return &workerDispatcher{work: make(chan func()), stop: make(chan struct{})}
}

// Schedule implements protoactor's Dispatcher.
func (d *workerDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn:
	default:
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.closed {
			// The host has stopped: its activations take no more work
			// (a silo killed in a test still has its flusher asking).
			return
		}
		d.wg.Add(1)
		go d.worker(fn)
	}
}

// Throughput implements protoactor's Dispatcher.
func (d *workerDispatcher) Throughput() int { return mailboxThroughput }

func (d *workerDispatcher) worker(fn func()) {
	defer d.wg.Done()
	for {
		fn()
		if d.idle.Add(1) > maxIdleWorkers {
			d.idle.Add(-1)
			return
		}
		select {
		case fn = <-d.work:
			d.idle.Add(-1)
		case <-d.stop:
			d.idle.Add(-1)
			return
		}
	}
}

// close stops parked workers and waits for every worker to finish.
func (d *workerDispatcher) close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	close(d.stop)
	d.wg.Wait()
}
