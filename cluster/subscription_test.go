package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unstarted returns a Membership that was never started, enough to own
// subscriptions.
func unstarted(t *testing.T) *Membership {
	t.Helper()
	m, err := New(Options{SiloID: "owner", Address: "127.0.0.1:1"})
	require.NoError(t, err)
	return m
}

func event(kind EventKind, id string, load int64, version uint64) Event {
	return Event{Kind: kind, Member: Member{ID: id, Load: load}, Version: version}
}

func TestSubscriptionQueuesWithoutAReader(t *testing.T) {
	s := newSubscription(unstarted(t))
	for i := range 10000 {
		s.push([]Event{event(EventJoined, "a", 0, uint64(2*i+1)), event(EventFailed, "a", 0, uint64(2*i+2))})
	}
	events, err := s.Take()
	require.NoError(t, err)
	assert.Len(t, events, 20000, "joins and failures are never dropped")
	events, err = s.Take()
	assert.NoError(t, err)
	assert.Empty(t, events)
}

func TestSubscriptionKeepsOnlyTheNewestQueuedUpdateOfAMember(t *testing.T) {
	s := newSubscription(unstarted(t))
	s.push([]Event{event(EventJoined, "a", 0, 1), event(EventUpdated, "a", 1, 2)})
	s.push([]Event{event(EventUpdated, "b", 1, 3), event(EventUpdated, "a", 2, 4)})
	s.push([]Event{event(EventUpdated, "a", 3, 5)})
	events, err := s.Take()
	require.NoError(t, err)
	assert.Equal(t, []Event{event(EventJoined, "a", 0, 1), event(EventUpdated, "b", 1, 3), event(EventUpdated, "a", 3, 5)}, events)

	// An update queued before a departure and a rejoin stays: only the last
	// event about a member can be superseded.
	s.push([]Event{event(EventUpdated, "a", 4, 6), event(EventFailed, "a", 4, 7), event(EventJoined, "a", 0, 8), event(EventUpdated, "a", 1, 9)})
	events, _ = s.Take()
	assert.Equal(t, []uint64{6, 7, 8, 9}, versions(events))
	s.push([]Event{event(EventUpdated, "a", 2, 10)})
	events, _ = s.Take()
	assert.Equal(t, []uint64{10}, versions(events), "taken events are not touched again")
}

func versions(events []Event) []uint64 {
	return pluck(events, func(e Event) uint64 { return e.Version })
}

func TestSubscriptionNextWaitsForEventsOrTheContext(t *testing.T) {
	s := newSubscription(unstarted(t))
	got := make(chan []Event, 1)
	go func() {
		events, _ := s.Next(context.Background())
		got <- events
	}()
	s.push([]Event{event(EventJoined, "a", 0, 1)})
	select {
	case events := <-got:
		assert.Equal(t, []uint64{1}, versions(events))
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return the pushed event")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Next(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestAClosedSubscriptionDrainsThenReportsClosed(t *testing.T) {
	m := unstarted(t)
	_, s := m.Subscribe()
	s.push([]Event{event(EventJoined, "a", 0, 1)})
	s.Close()
	s.Close()
	s.push([]Event{event(EventJoined, "b", 0, 2)}) // after Close: dropped

	select {
	case <-s.Ready():
	default:
		t.Fatal("Ready is not closed")
	}
	events, err := s.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []uint64{1}, versions(events))
	_, err = s.Next(context.Background())
	assert.ErrorIs(t, err, ErrSubscriptionClosed)
	_, err = s.Take()
	assert.ErrorIs(t, err, ErrSubscriptionClosed)

	m.mu.Lock()
	assert.Empty(t, m.mu.subs, "Close unsubscribes")
	m.mu.Unlock()
}
