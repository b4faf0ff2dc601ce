package cluster

import (
	"context"
	"errors"
	"sync"
)

// ErrSubscriptionClosed is returned by Subscription.Take and Next once the
// subscription was closed, or its Membership stopped, and every event queued
// before has been taken.
var ErrSubscriptionClosed = errors.New("cluster: subscription closed")

// Subscription queues the membership events that follow the View returned
// with it. Events are queued by memberlist's own goroutines without ever
// blocking them, so a slow subscriber cannot stall gossip or failure
// detection. The queue keeps every joined, left and failed event since the
// last Take; an updated event replaces the member's previous queued event
// when that is an update too, so between two departures or joins of a
// member at most one of its updates waits, and a subscriber that stops
// reading holds one update per member plus the churn. Methods are safe for
// concurrent use.
type Subscription struct {
	owner *Membership
	ready chan struct{} // holds a value while events are queued; closed on close
	mu    struct {
		sync.Mutex
		queue  []Event
		closed bool
	}
}

func newSubscription(owner *Membership) *Subscription {
	return &Subscription{owner: owner, ready: make(chan struct{}, 1)}
}

// Ready returns a channel that receives a value when events are queued and
// is closed when the subscription is. Use it in a select, then call Take.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Take returns every queued event, oldest first, or none. Once the
// subscription is closed and drained it returns ErrSubscriptionClosed.
func (s *Subscription) Take() ([]Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.mu.queue) > 0 {
		events := s.mu.queue
		s.mu.queue = nil
		return events, nil
	}
	if s.mu.closed {
		return nil, ErrSubscriptionClosed
	}
	return nil, nil
}

// Next waits for at least one event and returns every queued event, oldest
// first. It returns ctx's error when ctx ends first, and
// ErrSubscriptionClosed once the subscription is closed and drained.
func (s *Subscription) Next(ctx context.Context) ([]Event, error) {
	for {
		events, err := s.Take()
		if len(events) > 0 || err != nil {
			return events, err
		}
		select {
		case <-s.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close stops the subscription; queued events can still be taken. It is
// safe to call more than once.
func (s *Subscription) Close() {
	s.owner.unsubscribe(s)
	s.close()
}

// push queues events without blocking.
func (s *Subscription) push(events []Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return
	}
	for _, e := range events {
		if e.Kind == EventUpdated {
			s.dropQueuedUpdate(e.Member.ID)
		}
		s.mu.queue = append(s.mu.queue, e)
	}
	select {
	case s.ready <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// dropQueuedUpdate removes a queued update of member id, if the last queued
// event about it is one: the newer update supersedes it.
func (s *Subscription) dropQueuedUpdate(id string) {
	for i := len(s.mu.queue) - 1; i >= 0; i-- {
		e := s.mu.queue[i]
		if e.Member.ID != id {
			continue
		}
		if e.Kind == EventUpdated {
			s.mu.queue = append(s.mu.queue[:i], s.mu.queue[i+1:]...)
		}
		return
	}
}

func (s *Subscription) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.closed {
		s.mu.closed = true
		close(s.ready)
	}
}
