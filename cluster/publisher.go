package cluster

import (
	"sync"
	"time"

	"github.com/granary-go/granary/clock"
)

// localState is what this silo announces about itself that changes while it
// runs.
type localState struct {
	Status Status
	Load   int64
}

// publisher hands the local silo's changing metadata to memberlist: a status
// change at once, a load change at most once per interval, so that a silo
// whose activation count moves all the time gossips a bounded rate of
// updates. send runs on the publisher's goroutine, which start starts and
// stop joins; memberlist's UpdateNode blocks until the update is broadcast,
// so it must not run on the caller's.
type publisher struct {
	clock    clock.Clock
	interval time.Duration
	send     func(localState)

	wake chan struct{} // cap 1: a change or the rate-limit timer
	quit chan struct{}
	done chan struct{}

	mu struct {
		sync.Mutex
		want, sent localState
		sentAt     time.Time
	}
}

// newPublisher returns a publisher whose initial state counts as sent.
func newPublisher(c clock.Clock, interval time.Duration, initial localState, send func(localState)) *publisher {
	p := &publisher{
		clock:    c,
		interval: interval,
		send:     send,
		wake:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	p.mu.want, p.mu.sent, p.mu.sentAt = initial, initial, c.Now()
	return p
}

func (p *publisher) start() { go p.run() }

// stop ends the goroutine and waits for it, including a send in progress.
// It must be called once, after start.
func (p *publisher) stop() {
	close(p.quit)
	<-p.done
}

// update changes the wanted state and wakes the goroutine.
func (p *publisher) update(change func(*localState)) {
	p.mu.Lock()
	change(&p.mu.want)
	p.mu.Unlock()
	p.poke()
}

// wanted returns the latest state asked for, published or not.
func (p *publisher) wanted() localState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.want
}

func (p *publisher) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *publisher) run() {
	defer close(p.done)
	var timer clock.Timer // armed while a load change waits for its slot
	disarm := func() {
		if timer != nil {
			timer.Stop()
			timer = nil
		}
	}
	defer disarm()
	for {
		select {
		case <-p.quit:
			return
		case <-p.wake:
		}
		p.mu.Lock()
		want := p.mu.want
		if want == p.mu.sent {
			p.mu.Unlock()
			disarm() // nothing waits: a later change must arm a timer of its own
			continue
		}
		now := p.clock.Now()
		if next := p.mu.sentAt.Add(p.interval); want.Status == p.mu.sent.Status && now.Before(next) {
			if timer == nil {
				timer = p.clock.AfterFunc(next.Sub(now), p.poke)
			}
			p.mu.Unlock()
			continue
		}
		disarm()
		p.mu.sent, p.mu.sentAt = want, now
		p.mu.Unlock()
		p.send(want)
	}
}
