package host

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Work scheduled once the dispatcher has closed (a stopped host's flusher
// still asking its activations for snapshots) starts no worker: a worker
// started then would be counted after close began to wait for them all,
// and outlive the host.
func TestADispatcherStartsNoWorkerOnceClosed(t *testing.T) {
	d := newWorkerDispatcher()
	var ran atomic.Int32
	d.Schedule(func() { ran.Add(1) })
	d.close()
	assert.EqualValues(t, 1, ran.Load(), "work scheduled before close runs")
	d.Schedule(func() { ran.Add(1) })
	assert.EqualValues(t, 1, ran.Load(), "work scheduled after close does not")
}

// Schedules racing a close: under -race, a worker's wg.Add racing close's
// wg.Wait is reported; every schedule either ran before close returned or
// never runs.
func TestADispatcherClosesWhileWorkIsScheduled(t *testing.T) {
	d := newWorkerDispatcher()
	var ran atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				d.Schedule(func() { ran.Add(1) })
			}
		}()
	}
	d.close()
	after := ran.Load()
	wg.Wait()
	assert.Equal(t, after, ran.Load(), "nothing runs once close has returned")
}
