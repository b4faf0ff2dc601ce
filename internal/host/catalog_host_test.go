package host

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
)

// Two grain types with the same keys share the catalog's entries; under
// concurrent calls, deliveries in batches and deactivations, every request
// still reaches its own type's grain: each grain's state, kept across its
// activations by the store, ends at exactly the number of adds it was sent.
func TestCatalogTwoTypesUnderOneKeyUnderLoad(t *testing.T) {
	const otherType = "test.Other"
	// A fixture for its clock, store and counters; its own one-type host
	// stays idle.
	h := newFixture(t, HostOptions{}).startHost(HostOptions{}, testType, otherType)

	one, err := proto.Marshal(wrapperspb.Int64(1))
	require.NoError(t, err)
	types := []string{testType, otherType}
	keys := []string{"k0", "k1", "k2"}
	call := func(id actor.GrainID, method uint32, inline bool) (int64, error) {
		rc := make(chanReplier, 1)
		req := &Request{Target: id, MethodID: method, Payload: one, Reply: rc}
		if inline {
			if run := h.DeliverInline([]*Request{req}); run != nil {
				run()
			}
		} else {
			h.Deliver(req)
		}
		select {
		case r := <-rc:
			if r.err != nil {
				return 0, r.err
			}
			return r.reply.(*wrapperspb.Int64Value).Value, nil
		case <-time.After(10 * time.Second): // a lost request; not a timing assertion
			return 0, fmt.Errorf("%v: no answer", id)
		}
	}

	const workers, perWorker = 6, 200
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	sent := make(map[actor.GrainID]int64)
	var sentMu sync.Mutex
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				id := actor.GrainID{Type: types[(w+i)%2], Key: keys[(w*7+i)%3]}
				method := uint32(mAdd)
				if i%50 == 49 {
					method = mLeave // deactivate; the next call reactivates from the store
				}
				if _, err := call(id, method, i%2 == 0); err != nil {
					errs <- err
					return
				}
				if method == mLeave {
					continue
				}
				sentMu.Lock()
				sent[id]++
				sentMu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	for _, typ := range types {
		for _, key := range keys {
			id := actor.GrainID{Type: typ, Key: key}
			got, err := call(id, mGet, false)
			require.NoError(t, err)
			require.Equal(t, sent[id], got, "%v", id)
		}
	}
	require.Equal(t, 6, h.Stats().Active, fmt.Sprint(h.Active()))
}
