package cluster

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func reachableOf(p *probes, id string) bool { return p.reachability(id, false).Reachable }

func signalled(p *probes) bool {
	select {
	case <-p.changed:
		return true
	default:
		return false
	}
}

// sentAt is when the unit tests' probe rounds are sent.
var sentAt = time.Unix(1_000_000, 0)

// roundAnswered runs a probe round of b and c that this silo's own probe
// comes back from, with the answers of the members listed.
func roundAnswered(p *probes, answering ...string) uint64 {
	r := p.round([]string{"b", "c"}, sentAt)
	p.answered("a", r, true)
	for _, id := range answering {
		p.answered(id, r, false)
	}
	return r
}

func TestProbesCountTheRoundsAMemberLeftUnanswered(t *testing.T) {
	p := newProbes()
	roundAnswered(p, "b")
	assert.True(t, reachableOf(p, "c"), "a member new in the view is reachable")
	assert.True(t, signalled(p), "b's first answer")
	r2 := roundAnswered(p, "b")
	assert.True(t, reachableOf(p, "c"), "one unanswered round is a lost packet, not a cut")
	assert.False(t, signalled(p))

	roundAnswered(p, "b")
	assert.True(t, reachableOf(p, "b"))
	assert.False(t, reachableOf(p, "c"), "ProbeMisses rounds unanswered")
	assert.Equal(t, ProbeMisses, p.reachability("c", false).Unanswered)
	assert.True(t, signalled(p), "the change is signalled")

	p.answered("c", r2, false) // a late answer still proves the member is there
	assert.True(t, reachableOf(p, "c"))
	assert.True(t, signalled(p), "the change back is signalled")

	p.answered("c", r2+99, false)
	roundAnswered(p, "b")
	roundAnswered(p, "b")
	assert.False(t, reachableOf(p, "c"), "an answer to a round never sent counts for nothing")

	p.round([]string{"b"}, sentAt)
	assert.True(t, reachableOf(p, "c"), "a member no longer probed is forgotten")
	assert.True(t, p.reachability("a", true).Reachable, "a silo always reaches itself")
}

func verdict(p *probes) string {
	select {
	case d := <-p.verdicts:
		return d.By
	default:
		return ""
	}
}

// saidDeadNow is saidDead at the time the rounds are sent, of a death
// just seen.
func saidDeadNow(p *probes, id string, r uint64) { p.saidDead(id, r, 0, sentAt) }

func TestAMemberThatAnsweredAndNowSaysItLostThisSiloIsAVerdict(t *testing.T) {
	p := newProbes()
	r := roundAnswered(p)
	saidDeadNow(p, "b", r)
	assert.Empty(t, verdict(p), "b never answered a probe: it has not caught up with this silo's join")
	assert.True(t, p.reachability("b", false).SaysDead)

	r = roundAnswered(p, "b", "c")
	assert.False(t, p.reachability("b", false).SaysDead, "an answer takes it back")
	r = roundAnswered(p)
	saidDeadNow(p, "b", r)
	assert.Equal(t, "b", verdict(p), "b answered before and says it lost this silo")
	assert.True(t, signalled(p))
	saidDeadNow(p, "b", r)
	r = roundAnswered(p)
	saidDeadNow(p, "b", r)
	assert.Empty(t, verdict(p), "one verdict until b answers again")
	saidDeadNow(p, "b", r+1)
	assert.Empty(t, verdict(p), "a round never sent counts for nothing")
	p.answered("b", r-1, false)
	assert.True(t, p.reachability("b", false).SaysDead, "a late answer to an older round does not take it back")
	roundAnswered(p, "b")
	assert.False(t, p.reachability("b", false).SaysDead)

	// c answered, then fell silent for ProbeMisses rounds: a cut, which
	// each side sees, gives no verdict once it heals.
	for range ProbeMisses + 1 {
		r = roundAnswered(p, "b")
	}
	require.False(t, reachableOf(p, "c"))
	saidDeadNow(p, "c", r)
	assert.Empty(t, verdict(p), "silent before: a cut")
	assert.True(t, p.reachability("c", false).SaysDead)
	assert.False(t, reachableOf(p, "c"), "saying it lost this silo is not an answer")
}

// A verdict's age is at most how long ago the member lost this silo: the
// age it gave, plus the time since the probe it answered went out, however
// late its answer is read.
func TestADeathVerdictsAgeCountsFromTheProbeItAnswers(t *testing.T) {
	p := newProbes()
	roundAnswered(p, "b", "c")
	r := p.round([]string{"b", "c"}, sentAt)
	read := sentAt.Add(30 * time.Millisecond)
	p.saidDead("b", r, 100*time.Millisecond, read)
	assert.Equal(t, DeathVerdict{By: "b", Round: r, Age: 130 * time.Millisecond, At: read}, takeVerdict(t, p))

	// A clock that went back, or an age that overflows with the wait, is
	// an age unknown: older than any grace.
	p.saidDead("c", r, 0, sentAt.Add(-time.Millisecond))
	assert.Equal(t, unknownAge, takeVerdict(t, p).Age)
	roundAnswered(p, "b", "c")
	r = p.round([]string{"b", "c"}, sentAt)
	p.saidDead("b", r, unknownAge, read)
	assert.Equal(t, unknownAge, takeVerdict(t, p).Age)
}

func takeVerdict(t *testing.T, p *probes) DeathVerdict {
	t.Helper()
	select {
	case v := <-p.verdicts:
		return v
	default:
		t.Fatal("no verdict")
		return DeathVerdict{}
	}
}

// A verdict that finds the channel full is not lost: the member's next
// dead answer gives it.
func TestADeathVerdictThatFindsTheChannelFullComesWithTheNextAnswer(t *testing.T) {
	p := newProbes()
	roundAnswered(p, "b", "c")
	for range verdictBuffer {
		p.verdicts <- DeathVerdict{By: "x"}
	}
	r := p.round([]string{"b", "c"}, sentAt)
	saidDeadNow(p, "b", r)
	for range verdictBuffer {
		<-p.verdicts
	}
	assert.Empty(t, verdict(p), "dropped")
	skipped := p.round([]string{"b", "c"}, sentAt)
	r = p.round([]string{"b", "c"}, sentAt)
	saidDeadNow(p, "b", r)
	assert.Equal(t, "b", verdict(p), "given with the next answer")
	p.answered("b", skipped, false)
	assert.True(t, p.reachability("b", false).SaysDead, "a late answer to a round before the verdict's takes nothing back")
	r = p.round([]string{"b", "c"}, sentAt)
	saidDeadNow(p, "b", r)
	assert.Empty(t, verdict(p), "once")
}

// A member's first answer since it came into the view is signalled: it
// may take back a verdict it gave before it left, which the fence waits
// to hear.
func TestAMembersFirstAnswerIsSignalled(t *testing.T) {
	p := newProbes()
	r := roundAnswered(p)
	signalled(p)
	p.answered("b", r, false)
	assert.True(t, signalled(p))
	assert.Equal(t, r, p.reachability("b", false).Acked)
	r = roundAnswered(p, "c")
	signalled(p)
	p.answered("b", r, false)
	assert.False(t, signalled(p), "nothing new")
}

// A silo starting has no lag of its own probes yet: members are judged by
// the rounds its probe of itself came back from, from the first.
func TestAStartingSiloDoesNotTakeItsOwnBacklogForACut(t *testing.T) {
	p := newProbes()
	for range ProbeMisses + 1 {
		p.round([]string{"b"}, sentAt) // nothing comes back, not even this silo's own probe
	}
	assert.True(t, reachableOf(p, "b"))
}

// Rounds start at a random number: a host that cannot see the probes
// cannot guess a round to answer.
func TestProbeRoundsStartAtARandomNumber(t *testing.T) {
	a, b := newProbes(), newProbes()
	ra, rb := a.round(nil, sentAt), b.round(nil, sentAt)
	assert.NotEqual(t, ra, rb, "two silos' first rounds")
	assert.Less(t, ra, uint64(1)<<63, "far from wrapping")
}

func TestProbesDoNotTakeTheSilosOwnBacklogForACut(t *testing.T) {
	p := newProbes()
	roundAnswered(p, "b", "c")
	for range selfLagLimit {
		p.round([]string{"b", "c"}, sentAt) // nothing comes back, not even this silo's own probe
		assert.True(t, reachableOf(p, "b"))
		assert.True(t, reachableOf(p, "c"))
	}
	for range ProbeMisses {
		p.round([]string{"b", "c"}, sentAt)
	}
	assert.False(t, reachableOf(p, "b"), "a path to itself that never answers does not hide a cut for ever")
	assert.False(t, reachableOf(p, "c"))
}

func TestProbeMessagesRoundTrip(t *testing.T) {
	for _, m := range []probeMessage{
		{Kind: msgProbe, ID: "silo-a", Round: 1},
		{Kind: msgProbeAck, ID: "silo-b", Round: 1 << 40},
		{Kind: msgProbeDead, ID: "silo-c", Round: 1 << 61, Age: 3 * time.Second},
	} {
		got, err := decodeProbe(encodeProbe(m))
		require.NoError(t, err)
		assert.Equal(t, m, got)
	}
}

func TestProbeMessageDecoderRejectsWhatItCannotTrust(t *testing.T) {
	good := encodeProbe(probeMessage{Kind: msgProbe, ID: "silo-a", Round: 3})
	for name, b := range map[string][]byte{
		"empty":                         nil,
		"a leave notice":                encodeLeave(leaveMessage{Kind: msgLeaving, ID: "silo-a", Generation: 1}),
		"truncated":                     good[:len(good)-1],
		"trailing bytes":                append(append([]byte(nil), good...), 0),
		"a bad silo id":                 encodeProbe(probeMessage{Kind: msgProbe, ID: "silo a", Round: 3}),
		"a dead answer without its age": append([]byte{msgProbeDead}, encodeProbe(probeMessage{Kind: msgProbeAck, ID: "silo-a", Round: 3})[1:]...),
		"an age past int64": binary.AppendUvarint(
			[]byte{msgProbeDead, 3, 6, 's', 'i', 'l', 'o', '-', 'a'}, math.MaxUint64),
	} {
		_, err := decodeProbe(b)
		assert.ErrorIs(t, err, errBadMeta, name)
	}
}

func FuzzDecodeProbe(f *testing.F) {
	f.Add(encodeProbe(probeMessage{Kind: msgProbe, ID: "silo-a", Round: 7}))
	f.Add(encodeProbe(probeMessage{Kind: msgProbeAck, ID: "silo-b", Round: 0}))
	f.Add(encodeProbe(probeMessage{Kind: msgProbeDead, ID: "silo-c", Round: 9, Age: 3 * time.Second}))
	f.Add([]byte{msgProbe})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeProbe(b)
		if err != nil {
			return
		}
		if checkSiloID(m.ID) != nil {
			t.Fatalf("accepted silo id %q", m.ID)
		}
		again, err := decodeProbe(encodeProbe(m))
		if err != nil || again != m {
			t.Fatalf("round trip of %+v: %+v, %v", m, again, err)
		}
	})
}

// slowDeathTimings are the fast timings with a failure detector that takes
// many probe intervals to declare a silo dead, so that a test can watch
// the probes find a killed silo unreachable while it is still in the view.
func slowDeathTimings() Timings {
	t := FastTimings()
	t.SuspicionMult = 60
	return t
}

func TestAKilledSiloIsUnreachableBeforeItIsDeclaredDead(t *testing.T) {
	var ms []*Membership
	for i := range 3 {
		opts := siloOptions(fmt.Sprintf("silo-%d", i))
		opts.Timings = slowDeathTimings()
		if i > 0 {
			opts.Seeds = []string{ms[0].GossipAddress()}
		}
		ms = append(ms, startSilo(t, opts))
	}
	waitForViews(t, ms, ms...)
	reach := func(m *Membership, id string) Reachability {
		for _, r := range m.Reachability() {
			if r.ID == id {
				return r
			}
		}
		return Reachability{ID: id}
	}
	for _, m := range ms {
		require.Len(t, m.Reachability(), 3)
		for _, other := range ms {
			require.Eventually(t, func() bool { return reach(m, other.Local().ID).Reachable }, waitFor, 5*time.Millisecond,
				"%s reaches %s", m.Local().ID, other.Local().ID)
		}
	}

	ms[2].Kill()
	for _, m := range ms[:2] {
		require.Eventually(t, func() bool {
			r := reach(m, "silo-2")
			return !r.Reachable && r.Unanswered >= ProbeMisses
		}, waitFor, 5*time.Millisecond, "%s never found silo-2 unreachable", m.Local().ID)
		_, inView := m.View().Member("silo-2")
		assert.True(t, inView, "%s: silo-2 is still in the view, suspected at most", m.Local().ID)
		other := ms[1-indexOf(ms, m)].Local().ID
		assert.True(t, reach(m, other).Reachable, "the survivors still reach each other: %v", m.Reachability())
	}
}

func indexOf(ms []*Membership, m *Membership) int {
	for i, x := range ms {
		if x == m {
			return i
		}
	}
	return -1
}
