package cluster

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/granary-go/granary/clock"
)

// ProbeMisses is how many probe rounds in a row a member must leave
// unanswered before Reachability reports it unreachable: one lost packet
// is not a cut.
const ProbeMisses = 2

// Probe messages, after the leave messages of meta.go.
const (
	// msgProbe: "<id> asks whether you hear it, round <seq>".
	msgProbe = 3
	// msgProbeAck: "<id> heard your round <seq>".
	msgProbeAck = 4
	// msgProbeDead: "<id> heard your round <seq>, and its view lost you:
	// it saw you fail <age> ago".
	msgProbeDead = 5
)

// Reachability is whether this silo reaches a member of its view now.
type Reachability struct {
	// ID is the member's silo id.
	ID string
	// Reachable is true when the member answered one of this silo's last
	// ProbeMisses probe rounds (or joined the view since), and for this
	// silo itself.
	Reachable bool
	// Unanswered counts this silo's probes the member has not answered
	// since its last answer, as of the latest round.
	Unanswered int
	// SaysDead is true while the member's latest answer said that its
	// view lost this silo (DeathVerdicts): the probe reached it, but it
	// does not count as answered.
	SaysDead bool
	// Acked is the latest of this silo's probe rounds the member answered
	// since it joined the view, zero if none. A member that gave a death
	// verdict has taken this silo back once it answers a round later than
	// the verdict's: its view shows the silo again.
	Acked uint64
}

// Reachability reports, for every member of the view, this silo included,
// whether this silo reaches it now, sorted by id. memberlist keeps whether
// it suspects a member to itself, so the membership probes every member of
// the view once per Timings.ProbeInterval with a packet of its own, through
// memberlist's transport (its label and encryption), and a member that
// leaves ProbeMisses rounds unanswered (rounds whose probe of this silo
// itself came back) is unreachable: within about
// (ProbeMisses+1) probe intervals of a cut, well before memberlist
// declares it dead (docs/cluster.md gives the timing). A member only
// answers probes from silos its own view shows, so a silo that the others
// declared dead finds them unreachable until it has joined again.
func (m *Membership) Reachability() []Reachability {
	m.mu.Lock()
	ids := make([]string, 0, len(m.mu.view.members))
	for id := range m.mu.view.members {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	slices.Sort(ids)
	out := make([]Reachability, len(ids))
	for i, id := range ids {
		out[i] = m.probes.reachability(id, id == m.opts.SiloID)
	}
	return out
}

// ReachabilityChanged returns a channel that receives (coalesced) when a
// member's reachability changes, so that a watcher need not poll faster
// than the probes.
func (m *Membership) ReachabilityChanged() <-chan struct{} { return m.probes.changed }

// verdictBuffer is how many death verdicts DeathVerdicts holds for a
// watcher that has not taken them yet.
const verdictBuffer = 64

// A DeathVerdict is a member's answer to this silo's probe saying that
// the member's view lost this silo: it saw the silo fail.
type DeathVerdict struct {
	// By is the member's silo id.
	By string
	// Round is the probe round the member answered.
	Round uint64
	// Age is at most how long ago, as of At, the member's view lost this
	// silo: the age the member gave, plus the time since this silo sent
	// the probe it answered. What the member does with a failed silo's
	// work once a grace has passed, such as placing its grains anew, it
	// may be doing since Age minus the grace.
	Age time.Duration
	// At is when the answer was read, on the membership's clock (the
	// real one in a silo).
	At time.Time
}

// DeathVerdicts returns a channel that receives a verdict for each member
// of this silo's view that answers its probe by saying that its own view
// lost this silo, having answered the probe before: the member saw this
// silo fail while it ran (too starved to answer in time, its answers lost,
// or told by another silo that saw it fail, as a healed cut's far side
// tells the near side). A member that said nothing for ProbeMisses rounds
// first (a cut, which each side sees) gives no verdict, and nor does one
// that says it again before answering a probe. A verdict that finds the
// channel full waits for the member's next such answer; the channel is
// never closed.
func (m *Membership) DeathVerdicts() <-chan DeathVerdict { return m.probes.verdicts }

// probes is the bookkeeping of the probe rounds, safe for concurrent use.
// Rounds are numbered; each member remembers the last round it was probed
// in and the latest round it answered.
//
// The silo probes itself too, through the same packets and the same
// receiving queue: a member counts as missing only the rounds this silo's
// own probe came back from. A silo too loaded to read its packets in time
// then does not take its own backlog for a cut, while a real cut, which
// spares a silo's own address, is counted as it happens.
type probes struct {
	changed  chan struct{}     // cap 1
	verdicts chan DeathVerdict // cap verdictBuffer

	mu struct {
		sync.Mutex
		round        uint64
		selfAnswered uint64 // the latest round this silo's probe of itself came back from
		members      map[string]*probed
		sentAt       [sentMemory]time.Time // when the latest rounds were sent, by round modulo sentMemory
	}
}

// sentMemory is how many of the latest rounds' send times the probes
// keep: more rounds than a member that counts as reachable can have left
// unanswered (selfLagLimit+ProbeMisses), so that a verdict's round is
// always among them. Should it not be, the verdict's age is unknown, and
// counts as older than any grace.
const sentMemory = 16

// unknownAge is the age of a death verdict whose round's send time was
// forgotten.
const unknownAge = time.Duration(math.MaxInt64)

// selfLagLimit is how many rounds this silo's probe of itself may lag
// before the rounds count without it: a path to itself that never answers
// must not keep the silo from finding the others unreachable.
const selfLagLimit = 4 * ProbeMisses

type probed struct {
	sent, answered uint64 // rounds
	unanswered     uint64 // as judged at the latest round
	reachable      bool
	saysDead       bool   // its latest answer said its view lost this silo
	deadRound      uint64 // the round it said so in
	owed           bool   // its verdict found the channel full: the next such answer gives it
	lastAck        uint64 // the latest round it answered, zero if none
}

func newProbes() *probes {
	p := &probes{changed: make(chan struct{}, 1), verdicts: make(chan DeathVerdict, verdictBuffer)}
	p.mu.members = map[string]*probed{}
	// Rounds start at a random number, so that a host that sends packets
	// to the gossip port without seeing the probes cannot forge an answer
	// to one: without a gossip secret, that is all that tells the answers
	// apart. Far below the top, they never wrap.
	p.mu.round = rand.Uint64N(1 << 62)
	p.mu.selfAnswered = p.mu.round // as a silo at round zero starts: no lag yet
	return p
}

// round starts a probe round of the given members (this silo left out),
// sent at now: it judges each by the rounds it left unanswered, forgets
// members that left the view, and returns the round's number.
func (p *probes) round(members []string, now time.Time) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	last := p.mu.round // the latest round whose answers may have come
	p.mu.round++
	r := p.mu.round
	p.mu.sentAt[r%sentMemory] = now
	ref := p.mu.selfAnswered
	if last-ref > selfLagLimit {
		ref = last
	}
	changed := false
	keep := make(map[string]struct{}, len(members))
	for _, id := range members {
		keep[id] = struct{}{}
		st, ok := p.mu.members[id]
		if !ok {
			// New in the view: memberlist just heard from it.
			st = &probed{sent: last, answered: last, reachable: true}
			p.mu.members[id] = st
		}
		st.unanswered = 0
		if ref > st.answered {
			st.unanswered = ref - st.answered
		}
		reachable := st.unanswered < ProbeMisses
		changed = changed || reachable != st.reachable
		st.reachable, st.sent = reachable, r
	}
	for id := range p.mu.members {
		if _, ok := keep[id]; !ok {
			delete(p.mu.members, id)
		}
	}
	if changed {
		p.notify()
	}
	return r
}

// answered records that member id answered round r: it is reachable.
func (p *probes) answered(id string, r uint64, self bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if self {
		if r <= p.mu.round {
			p.mu.selfAnswered = max(p.mu.selfAnswered, r)
		}
		return
	}
	st, ok := p.mu.members[id]
	if !ok || r > st.sent || r <= st.answered {
		return // a member no longer probed, a round never sent, or news already had
	}
	first := st.lastAck == 0
	st.answered, st.lastAck = r, r
	if st.saysDead && r <= st.deadRound {
		return // an older round's answer, late: the member has lost this silo since
	}
	if !st.reachable || st.saysDead || first {
		// first: a member back in the view answers for the first time,
		// which may take back a verdict it gave before it left.
		st.reachable, st.saysDead, st.owed = true, false, false
		p.notify()
	}
}

// saidDead records that member id answered round r, at now, saying that
// its view lost this silo age ago. The probe reached it, but it is not an
// answer: a member that lost this silo stops counting as reachable after
// ProbeMisses such rounds. It is a verdict when the member was reachable
// until then.
func (p *probes) saidDead(id string, r uint64, age time.Duration, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.mu.members[id]
	if !ok || r > st.sent || r <= st.answered || (st.saysDead && !st.owed) {
		return // a member no longer probed, a round never sent or answered since, or a verdict had
	}
	wasDead := st.saysDead
	st.saysDead, st.deadRound = true, r // an owed verdict's round too, which a late ack must not pass
	if !wasDead {
		p.notify()
		if !st.reachable || st.lastAck == 0 {
			// Silent before, a cut, which each side sees and the fences
			// and the directory's merge resolve; or never heard, a member
			// that has not caught up with this silo's join.
			return
		}
	}
	// The member lost this silo age before it answered, and it answered
	// after the probe was sent: the probe's age bounds the answer's
	// delay, however long the packet took or waited to be read.
	v := DeathVerdict{By: id, Round: r, Age: unknownAge, At: now}
	if p.mu.round-r < sentMemory {
		if since := now.Sub(p.mu.sentAt[r%sentMemory]); since >= 0 && age <= unknownAge-since {
			v.Age = age + since
		}
	}
	select {
	case p.verdicts <- v:
		st.owed = false
	default:
		st.owed = true // kept for the member's next such answer, as a lost packet would be
	}
}

func (p *probes) reachability(id string, self bool) Reachability {
	if self {
		return Reachability{ID: id, Reachable: true}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.mu.members[id]
	if !ok {
		// In the view but not probed yet: memberlist just heard from it.
		return Reachability{ID: id, Reachable: true}
	}
	return Reachability{ID: id, Reachable: st.reachable, Unanswered: int(st.unanswered), SaysDead: st.saysDead, Acked: st.lastAck}
}

func (p *probes) notify() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// prober sends a probe round every Timings.ProbeInterval, on a goroutine
// that start starts and stop joins.
type prober struct {
	m     *Membership
	clock clock.Clock
	every time.Duration
	quit  chan struct{}
	done  chan struct{}
}

func (m *Membership) newProber() *prober {
	return &prober{m: m, clock: m.clock, every: m.opts.Timings.ProbeInterval, quit: make(chan struct{}), done: make(chan struct{})}
}

func (p *prober) start(ml *memberlist.Memberlist) { go p.run(ml) }

// stop ends the goroutine and waits for it. It must be called once, after
// start.
func (p *prober) stop() {
	close(p.quit)
	<-p.done
}

func (p *prober) run(ml *memberlist.Memberlist) {
	defer close(p.done)
	tick := make(chan struct{}, 1)
	for {
		p.probeAll(ml)
		timer := p.clock.AfterFunc(p.every, func() { tick <- struct{}{} })
		select {
		case <-p.quit:
			timer.Stop()
			return
		case <-tick:
		}
	}
}

// probeAll sends one round of probes to the members of the view.
func (p *prober) probeAll(ml *memberlist.Memberlist) {
	m := p.m
	self := m.opts.SiloID
	m.mu.Lock()
	targets := make([]memberlist.Address, 0, len(m.mu.view.members)+1)
	targets = append(targets, memberlist.Address{Addr: m.mu.gossip, Name: self})
	ids := make([]string, 0, len(m.mu.view.members))
	for id, member := range m.mu.view.members {
		if id != self {
			targets = append(targets, memberlist.Address{Addr: member.GossipAddress, Name: id})
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	r := m.probes.round(ids, p.clock.Now())
	msg := encodeProbe(probeMessage{Kind: msgProbe, ID: self, Round: r})
	for _, to := range targets {
		// One UDP packet each: a lost one is what the probes are for.
		if err := ml.SendToAddress(to, msg); err != nil {
			m.log.Debug("cluster: could not send a probe", "member", to.Name, "err", err)
		}
	}
}

// handleProbe answers a probe from a member of the view, or records an
// answer to one of this silo's.
func (m *Membership) handleProbe(b []byte) {
	msg, err := decodeProbe(b)
	if err != nil {
		m.log.Warn("cluster: dropping a probe message", "err", err)
		return
	}
	switch msg.Kind {
	case msgProbeAck:
		m.probes.answered(msg.ID, msg.Round, msg.ID == m.opts.SiloID)
	case msgProbeDead:
		if msg.ID != m.opts.SiloID {
			m.probes.saidDead(msg.ID, msg.Round, msg.Age, m.clock.Now())
		}
	case msgProbe:
		kind := byte(msgProbeAck)
		var age time.Duration
		m.mu.Lock()
		from, known := m.mu.view.member(msg.ID)
		if f, failed := m.mu.rejoin.failed[msg.ID]; !known && failed {
			// A silo this view saw fail is told so, and since when, at
			// the address it failed with (never one the probe names), so
			// that it learns it may no longer hold what it held.
			from, known, kind = Member{GossipAddress: f.address}, true, msgProbeDead
			age = max(m.clock.Now().Sub(f.since), 0)
		}
		ml, stopped := m.mu.ml, m.mu.stopped
		if msg.ID == m.opts.SiloID {
			from, known, kind = Member{GossipAddress: m.mu.gossip}, true, msgProbeAck
		}
		m.mu.Unlock()
		if !known || stopped || ml == nil {
			return // a silo this view does not show is not told it is heard
		}
		ack := encodeProbe(probeMessage{Kind: kind, ID: m.opts.SiloID, Round: msg.Round, Age: age})
		// Sent from memberlist's receiving goroutine: one UDP packet, which
		// does not block.
		if err := ml.SendToAddress(memberlist.Address{Addr: from.GossipAddress, Name: msg.ID}, ack); err != nil {
			m.log.Debug("cluster: could not answer a probe", "member", msg.ID, "err", err)
		}
	}
}

// probeMessage is a msgProbe, a msgProbeAck or a msgProbeDead.
type probeMessage struct {
	Kind  byte
	ID    string // the sender
	Round uint64
	Age   time.Duration // a msgProbeDead's: how long ago the sender saw the silo fail
}

func isProbe(b []byte) bool {
	return len(b) > 0 && (b[0] == msgProbe || b[0] == msgProbeAck || b[0] == msgProbeDead)
}

func encodeProbe(m probeMessage) []byte {
	b := make([]byte, 0, 2+2*binary.MaxVarintLen64+len(m.ID))
	b = append(b, m.Kind)
	b = binary.AppendUvarint(b, m.Round)
	b = appendString(b, m.ID)
	if m.Kind == msgProbeDead {
		b = binary.AppendUvarint(b, uint64(m.Age))
	}
	return b
}

func decodeProbe(b []byte) (probeMessage, error) {
	var m probeMessage
	if !isProbe(b) {
		return m, fmt.Errorf("%w: not a probe", errBadMeta)
	}
	m.Kind = b[0]
	r := reader{b: b[1:]}
	m.Round = r.uvarint("round")
	m.ID = r.string("silo id", MaxSiloIDLength)
	if m.Kind == msgProbeDead {
		m.Age = time.Duration(r.int64("age"))
	}
	if r.err != nil {
		return probeMessage{}, r.err
	}
	if len(r.b) != 0 {
		return probeMessage{}, fmt.Errorf("%w: %d trailing bytes", errBadMeta, len(r.b))
	}
	if err := checkSiloID(m.ID); err != nil {
		return probeMessage{}, fmt.Errorf("%w: %w", errBadMeta, err)
	}
	return m, nil
}

// String describes a reachability for logs: "id" or "id (unreachable, 3
// unanswered)".
func (r Reachability) String() string {
	if r.Reachable {
		return r.ID
	}
	return fmt.Sprintf("%s (unreachable, %d unanswered)", r.ID, r.Unanswered)
}
