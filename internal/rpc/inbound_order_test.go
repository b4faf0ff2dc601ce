package rpc

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/delivery"
)

// mailboxInbound is a model of the activation host for the runner: each
// grain has a mailbox that runs one request at a time, in the order
// posted. A post to an idle mailbox makes it runnable: DeliverInline
// returns its processing for the caller to run, and Deliver runs it on a
// goroutine of its own, as the host's dispatcher does.
type mailboxInbound struct {
	mu    sync.Mutex
	boxes map[actor.GrainID]*modelMailbox
	// turn runs each request's turn, with the request's grain and call
	// id; it must be safe for concurrent use.
	turn func(grain actor.GrainID, id uint64)
	wg   sync.WaitGroup // the ordinary way's goroutines
}

type modelMailbox struct {
	queue     []*delivery.Request
	scheduled bool
}

func newMailboxInbound(turn func(actor.GrainID, uint64)) *mailboxInbound {
	return &mailboxInbound{boxes: make(map[actor.GrainID]*modelMailbox), turn: turn}
}

// post queues reqs, which call one grain, and reports whether the mailbox
// was idle.
func (m *mailboxInbound) post(reqs ...*delivery.Request) (*modelMailbox, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.boxes[reqs[0].Target]
	if b == nil {
		b = &modelMailbox{}
		m.boxes[reqs[0].Target] = b
	}
	b.queue = append(b.queue, reqs...)
	idle := !b.scheduled
	b.scheduled = true
	return b, idle
}

func (m *mailboxInbound) run(b *modelMailbox) {
	for {
		m.mu.Lock()
		if len(b.queue) == 0 {
			b.scheduled = false
			m.mu.Unlock()
			return
		}
		req := b.queue[0]
		b.queue = b.queue[1:]
		m.mu.Unlock()
		m.turn(req.Target, req.CallID)
	}
}

func (m *mailboxInbound) Deliver(req *delivery.Request) {
	if b, idle := m.post(req); idle {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.run(b)
		}()
	}
}

func (m *mailboxInbound) DeliverInline(reqs []*delivery.Request) func() {
	if b, idle := m.post(reqs...); idle {
		return func() { m.run(b) }
	}
	return nil
}

// Requests for a few grains, read in a random order and with turns of
// random length, some of them yielding: each grain's turns run in the
// order its requests came and one at a time, whether a worker of the
// runner runs them or, past its bound, the ordinary way does. A model
// mailbox stands in for the host, so that the test sees every turn.
func TestRunnerKeepsEachGrainsOrderAndOneTurnAtATime(t *testing.T) {
	for _, maxWorkers := range []int{1, 2, 3, maxTurnWorkers} {
		t.Run(fmt.Sprint("workers-", maxWorkers), func(t *testing.T) {
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 2))
			const grains, requests = 8, 3000
			ids := make([]actor.GrainID, grains)
			for i := range ids {
				ids[i] = actor.GrainID{Type: "t", Key: fmt.Sprint("g", i)}
			}
			work := make([]int, requests) // how long each turn spins
			for i := range work {
				if rng.IntN(8) == 0 {
					work[i] = rng.IntN(20000)
				}
			}
			var (
				mu      sync.Mutex
				ran     = make(map[actor.GrainID][]uint64)
				inTurn  [grains]atomic.Int32
				overlap atomic.Int32 // turns of one grain that ran at once
				count   atomic.Int32
				sink    atomic.Int64
			)
			in := newMailboxInbound(func(g actor.GrainID, id uint64) {
				k := int(g.Key[1] - '0')
				if inTurn[k].Add(1) != 1 {
					overlap.Add(1)
				}
				x := int64(0)
				for i := range work[id] {
					x += int64(i ^ int(id))
				}
				sink.Add(x)
				if work[id]%3 == 1 {
					runtime.Gosched()
				}
				mu.Lock()
				ran[g] = append(ran[g], id)
				mu.Unlock()
				inTurn[k].Add(-1)
				count.Add(1)
			})
			r := newInboundRunner(in)
			r.maxWorkers = maxWorkers
			sent := make(map[actor.GrainID][]uint64)
			for id := range uint64(requests) {
				g := ids[rng.IntN(grains)]
				if rng.IntN(3) == 0 { // runs of one grain, delivered as one batch
					g = ids[0]
				}
				sent[g] = append(sent[g], id)
				r.deliver(&delivery.Request{Target: g, CallID: id})
				if rng.IntN(50) == 0 {
					runtime.Gosched()
				}
			}
			require.Eventually(t, func() bool { return count.Load() == requests }, 30*time.Second, time.Millisecond)
			r.close()
			in.wg.Wait()
			assert.Zero(t, overlap.Load(), "turns of one grain ran at once")
			mu.Lock()
			defer mu.Unlock()
			for _, g := range ids {
				assert.Equal(t, sent[g], ran[g], "%s's turns in order", g)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			assert.Zero(t, r.mu.workers)
		})
	}
}
