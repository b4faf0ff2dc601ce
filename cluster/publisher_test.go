package cluster

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
)

// sent records what a publisher sent.
type sent struct {
	mu     sync.Mutex
	states []localState
}

func (s *sent) send(l localState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states = append(s.states, l)
}

func (s *sent) all() []localState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]localState(nil), s.states...)
}

const waitFor, pollEvery = 10 * time.Second, time.Millisecond

func TestPublisherRateLimitsLoadButNotStatus(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	var out sent
	p := newPublisher(fake, time.Second, localState{Status: StatusJoining}, out.send)
	p.start()
	defer p.stop()

	// A load change within the interval of the last publication (the
	// initial state) waits for a timer.
	p.update(func(l *localState) { l.Load = 1 })
	require.Eventually(t, func() bool { return fake.Pending() == 1 }, waitFor, pollEvery)
	for n := int64(2); n <= 50; n++ {
		p.update(func(l *localState) { l.Load = n })
	}
	assert.Empty(t, out.all())
	assert.Equal(t, 1, fake.Pending(), "one timer however many changes")

	// When it fires, the latest load goes out once.
	fake.Advance(time.Second)
	require.Eventually(t, func() bool { return len(out.all()) == 1 }, waitFor, pollEvery)
	assert.Equal(t, localState{Status: StatusJoining, Load: 50}, out.all()[0])

	// A status change goes out at once, with the load as it is.
	p.update(func(l *localState) { l.Status = StatusActive })
	require.Eventually(t, func() bool { return len(out.all()) == 2 }, waitFor, pollEvery)
	assert.Equal(t, localState{Status: StatusActive, Load: 50}, out.all()[1])

	// A change undone before its slot sends nothing and disarms its timer.
	p.update(func(l *localState) { l.Load = 51 })
	require.Eventually(t, func() bool { return fake.Pending() == 1 }, waitFor, pollEvery)
	p.update(func(l *localState) { l.Load = 50 })
	require.Eventually(t, func() bool { return fake.Pending() == 0 }, waitFor, pollEvery)

	// Once the interval has passed, a load change goes out at once.
	fake.Advance(time.Second)
	p.update(func(l *localState) { l.Load = 7 })
	require.Eventually(t, func() bool { return len(out.all()) == 3 }, waitFor, pollEvery)
	assert.Equal(t, localState{Status: StatusActive, Load: 7}, out.all()[2])
	assert.Equal(t, localState{Status: StatusActive, Load: 7}, p.wanted())
}

func TestPublisherStopDisarmsItsTimer(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	var out sent
	p := newPublisher(fake, time.Second, localState{Status: StatusJoining}, out.send)
	p.start()
	p.update(func(l *localState) { l.Load = 1 })
	require.Eventually(t, func() bool { return fake.Pending() == 1 }, waitFor, pollEvery)
	p.stop()
	assert.Zero(t, fake.Pending())
	assert.Empty(t, out.all())
}
