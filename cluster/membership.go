package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/gossipcut"
)

// Errors returned by Membership.
var (
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("cluster: membership already started")
	// ErrStopped is returned by calls after Stop or Kill, and by a Start
	// that Stop or Kill interrupted.
	ErrStopped = errors.New("cluster: membership stopped")
	// ErrJoin is returned by Start when no seed answered before its context
	// ended, which is also what a wrong cluster id or secret looks like.
	ErrJoin = errors.New("cluster: could not join the cluster")
	// ErrInvalidStatus is returned by SetStatus for a value that is not one
	// of the Status constants.
	ErrInvalidStatus = errors.New("cluster: invalid status")
)

// Membership is this silo's place in the cluster: it runs memberlist, keeps
// the local view of the live silos, publishes this silo's metadata and
// delivers membership events. Create it with New, then Start; leave with
// Stop, or die abruptly with Kill. Its methods are safe for concurrent use.
type Membership struct {
	opts  Options
	log   *slog.Logger
	clock clock.Clock
	pub   *publisher
	meta  atomic.Pointer[[]byte] // what NodeMeta hands memberlist
	seeds seedResolver

	probes *probes // health.go
	prober *prober

	quit     chan struct{} // closed by Stop and Kill: abandons a join, ends the rejoin loop
	quitOnce sync.Once
	rejoins  sync.WaitGroup // the rejoin loop and its dials
	downOnce sync.Once
	downErr  error

	// mu is taken inside memberlist's callbacks, which hold memberlist's
	// own lock: never call into memberlist while holding it.
	mu struct {
		sync.Mutex
		started      bool
		startDone    chan struct{} // closed when Start returns
		ml           *memberlist.Memberlist
		gossip       string
		publishing   bool
		stopped      bool // memberlist is shut down: callbacks are ignored
		view         *view
		subs         map[*Subscription]struct{}
		leaveAwaited map[string]struct{} // members yet to confirm our leave notice
		leaveSeen    chan struct{}       // closed when leaveAwaited empties
		rejoin       *rejoinTargets
		dialling     map[string]bool // rejoin dials in flight, by address
		selfSeeds    map[string]bool // seed addresses found to be this silo
	}
}

// New returns a Membership for opts; it does no I/O. It applies
// EnsureDefaults and returns Validate's errors.
func New(opts Options, optFns ...Option) (*Membership, error) {
	d := deps{log: slog.Default(), clock: clock.Real{}, resolver: net.DefaultResolver}
	for _, fn := range optFns {
		fn(&d)
	}
	opts.EnsureDefaults()
	if opts.Generation == 0 {
		opts.Generation = d.clock.Now().UnixNano()
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.Seeds = slices.Clone(opts.Seeds)
	opts.Secret = slices.Clone(opts.Secret)
	m := &Membership{
		opts:  opts,
		log:   d.log.With("silo", opts.SiloID),
		clock: d.clock,
		quit:  make(chan struct{}),
		seeds: seedResolver{seeds: opts.Seeds, resolver: d.resolver},
	}
	m.mu.selfSeeds = map[string]bool{}
	m.mu.view = newView(m.log)
	m.mu.subs = map[*Subscription]struct{}{}
	m.mu.rejoin = newRejoinTargets(nil, opts.Timings.RejoinWindow)
	m.mu.dialling = map[string]bool{}
	initial := localState{Status: StatusJoining}
	m.pub = newPublisher(d.clock, opts.Timings.MetaUpdateInterval, initial, m.publish)
	m.probes, m.prober = newProbes(), m.newProber()
	m.storeMeta(initial)
	return m, nil
}

// Start starts memberlist on Options.BindAddress and joins the cluster
// through Options.Seeds, retrying every Timings.JoinRetryInterval until a
// seed other than this silo answers or ctx ends (ErrJoin): a silo that
// names another seed never forms a cluster alone, unless
// Options.Bootstrap says so. With no seed but itself, the silo starts a
// new cluster. A seed that answers while the silo knows no other member is
// the silo itself under another name, and is skipped from then on. One
// round dials the seeds in turn, each for up to Timings.TCPTimeout, so a
// seed that drops packets can make Start outlast ctx by that much. The
// silo is announced as StatusJoining; call SetStatus when it is ready.
// Once joined, the silo runs the rejoin loop (Timings.RejoinInterval)
// until Stop or Kill. A failed Start leaves the Membership stopped: make a
// new one to try again.
func (m *Membership) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.mu.started {
		m.mu.Unlock()
		return ErrStarted
	}
	m.mu.started = true
	done := make(chan struct{})
	m.mu.startDone = done
	m.mu.Unlock()
	defer close(done)

	select {
	case <-m.quit:
		return ErrStopped
	default:
	}
	m.storeMeta(m.pub.wanted())
	config := m.memberlistConfig()
	if cut := gossipcut.FromContext(ctx); cut != nil {
		// A test's partition seam: it rides in the context so that no
		// exported option carries it.
		t, err := cut.Transport(config.BindAddr, config.BindPort, config.Logger)
		if err != nil {
			m.shutdown(ctx, false)
			return fmt.Errorf("cluster: starting memberlist on %s: %w", m.opts.BindAddress, err)
		}
		config.Transport = t
	}
	ml, err := memberlist.Create(config)
	if err != nil {
		if config.Transport != nil {
			_ = config.Transport.Shutdown() // safe twice, should memberlist have shut it down
		}
		m.shutdown(ctx, false)
		return fmt.Errorf("cluster: starting memberlist on %s: %w", m.opts.BindAddress, err)
	}
	gossip := ml.LocalNode().Address()
	m.mu.Lock()
	m.mu.ml, m.mu.gossip, m.mu.publishing = ml, gossip, true
	m.mu.Unlock()
	m.pub.start()
	m.prober.start(ml)
	m.log.Info("cluster: membership started", "gossip", gossip, "generation", m.opts.Generation, "cluster", m.opts.ClusterID)

	if err := m.join(ctx, ml); err != nil {
		if !errors.Is(err, ErrStopped) { // Stop and Kill shut down themselves
			m.shutdown(ctx, false)
		}
		return err
	}
	m.rejoins.Add(1)
	go m.rejoinLoop(ml)
	return nil
}

// join dials the seeds until one that is not this silo answers. Each
// round resolves the seeds again: a name that resolves to nothing yet is
// a seed that does not answer yet.
func (m *Membership) join(ctx context.Context, ml *memberlist.Memberlist) error {
	for attempt := 1; ; attempt++ {
		seeds, self, res := m.otherSeeds(ctx)
		if attempt == 1 && len(self) > 0 {
			m.log.Info("cluster: seed is this silo; skipping it", "seed", self)
		}
		if len(seeds) == 0 && len(res.unresolved) == 0 {
			m.log.Info("cluster: no seed but this silo: starting a new cluster")
			return nil
		}
		answered, skipped, err := 0, 0, res.err
		for _, s := range seeds {
			n, joinErr := ml.Join([]string{s})
			switch {
			case n == 0:
				err = joinErr
			case ml.NumMembers() == 1:
				// Only this silo answers for itself without bringing
				// another member along: a seed at an address of ours.
				m.log.Info("cluster: seed is this silo; skipping it", "seed", s)
				m.mu.Lock()
				m.mu.selfSeeds[canonicalAddress(s)] = true
				m.mu.Unlock()
				skipped++
			default:
				answered++
			}
		}
		if answered > 0 {
			m.log.Info("cluster: joined", "seeds", seeds, "answered", answered, "attempts", attempt)
			return nil
		}
		if skipped == len(seeds) && len(res.unresolved) == 0 {
			continue // every seed was this silo: the next round starts the cluster
		}
		if m.opts.Bootstrap {
			m.log.Warn("cluster: no seed answered; starting a new cluster, as Bootstrap asks", "seeds", m.opts.Seeds, "err", err)
			return nil
		}
		if attempt == 1 {
			m.log.Info("cluster: waiting for a seed to answer; a silo that names other seeds never starts a cluster alone", "seeds", m.opts.Seeds, "unresolved", res.unresolved, "retry", m.opts.Timings.JoinRetryInterval)
		}
		m.log.Debug("cluster: no seed answered", "seeds", seeds, "unresolved", res.unresolved, "attempt", attempt, "err", err)
		wait := make(chan struct{})
		timer := m.clock.AfterFunc(m.opts.Timings.JoinRetryInterval, func() { close(wait) })
		select {
		case <-wait:
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%w: no seed of %v answered in %d attempts: %w (last: %v)", ErrJoin, m.opts.Seeds, attempt, ctx.Err(), err)
		case <-m.quit:
			timer.Stop()
			return ErrStopped
		}
	}
}

// otherSeeds resolves the seeds, within Timings.TCPTimeout and until Stop
// or Kill, and returns the addresses of the hosts that are not this silo
// (a host with one address of ours is this silo under another name), the
// seeds' addresses of this silo, and the resolution.
func (m *Membership) otherSeeds(ctx context.Context) (others, self []string, res resolvedSeeds) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.Timings.TCPTimeout)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-m.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	res = m.seeds.resolve(ctx)
	cancel()
	<-watched
	m.mu.Lock()
	defer m.mu.Unlock()
	ours := func(a string) bool {
		c := canonicalAddress(a)
		return c == canonicalAddress(m.mu.gossip) || c == canonicalAddress(m.opts.BindAddress) || m.mu.selfSeeds[c]
	}
	for _, host := range res.hosts {
		if slices.ContainsFunc(host, ours) {
			self = append(self, host...)
		} else {
			others = append(others, host...)
		}
	}
	return others, self, res
}

// rejoinLoop dials, every Timings.RejoinInterval, what rejoinTargets says
// is due, each address on a goroutine of its own so that one that drops
// packets (and holds its dial for TCPTimeout) delays no other.
func (m *Membership) rejoinLoop(ml *memberlist.Memberlist) {
	defer m.rejoins.Done()
	for {
		wait := make(chan struct{})
		timer := m.clock.AfterFunc(m.opts.Timings.RejoinInterval, func() { close(wait) })
		select {
		case <-wait:
		case <-m.quit:
			timer.Stop()
			return
		}
		due := m.rejoinDue()
		var dials []string
		m.mu.Lock()
		for _, addr := range due {
			if !m.mu.dialling[addr] {
				m.mu.dialling[addr] = true
				dials = append(dials, addr)
			}
		}
		m.mu.Unlock()
		for _, addr := range dials {
			m.rejoins.Add(1) // the loop's own count keeps the group above zero
			go m.rejoin(ml, addr)
		}
	}
}

// rejoinDue resolves the seeds again and returns the addresses a rejoin
// round dials: a seed that has left DNS (a pod scaled down) is dialled no
// more from the round after.
func (m *Membership) rejoinDue() []string {
	seeds, _, _ := m.otherSeeds(context.Background())
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.rejoin.seeds = seeds
	alive := make([]string, 0, len(m.mu.view.members))
	for _, member := range m.mu.view.members {
		alive = append(alive, member.GossipAddress)
	}
	return m.mu.rejoin.due(m.clock.Now(), alive)
}

// rejoin dials one address; what it learns arrives as view events.
func (m *Membership) rejoin(ml *memberlist.Memberlist, addr string) {
	defer m.rejoins.Done()
	n, err := ml.Join([]string{addr})
	if n > 0 && !m.isLiveAddress(addr) {
		// Across a healed partition the first exchange only tells each
		// side that the other declared it dead, and each refutes with a
		// higher incarnation; the second carries the refutations, which
		// revive the members on both sides at once instead of a round
		// later.
		n, err = ml.Join([]string{addr})
	}
	if n == 0 {
		m.log.Debug("cluster: rejoin dial failed", "address", addr, "err", err)
	}
	m.mu.Lock()
	delete(m.mu.dialling, addr)
	m.mu.Unlock()
}

// isLiveAddress reports whether a member of the view gossips at addr. A
// name counts as live: no member's address can match it.
func (m *Membership) isLiveAddress(addr string) bool {
	if _, err := netip.ParseAddrPort(addr); err != nil {
		return true
	}
	want := canonicalAddress(addr)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, member := range m.mu.view.members {
		if canonicalAddress(member.GossipAddress) == want {
			return true
		}
	}
	return false
}

// Stop leaves the cluster gracefully: it publishes StatusShuttingDown,
// tells every member it is leaving and waits (up to Timings.LeaveTimeout)
// until each confirms, so that they report EventLeft rather than
// EventFailed; then it broadcasts memberlist's leave and shuts memberlist
// down. ctx bounds the waits. Subscriptions are closed. Stop interrupts a
// Start in progress, does nothing before Start, and is safe to call twice.
func (m *Membership) Stop(ctx context.Context) error { return m.halt(ctx, true) }

// Kill shuts memberlist down without a word, as a crash would: the others
// detect the silo as failed after the failure detection time. It is meant
// for tests. Subscriptions are closed. Safe to call twice and after Stop.
func (m *Membership) Kill() { _ = m.halt(context.Background(), false) }

func (m *Membership) halt(ctx context.Context, graceful bool) error {
	m.quitOnce.Do(func() { close(m.quit) })
	m.mu.Lock()
	started := m.mu.startDone
	m.mu.Unlock()
	if started != nil {
		<-started // Start returns soon once quit is closed
	}
	return m.shutdown(ctx, graceful)
}

// shutdown runs once, by whichever of Start, Stop and Kill gets there first.
func (m *Membership) shutdown(ctx context.Context, graceful bool) error {
	m.downOnce.Do(func() {
		m.quitOnce.Do(func() { close(m.quit) })
		m.mu.Lock()
		ml, publishing := m.mu.ml, m.mu.publishing
		m.mu.Unlock()
		if publishing {
			m.pub.stop()
			m.prober.stop()
		}
		if ml != nil {
			if graceful {
				m.downErr = m.leave(ctx, ml)
			}
			// quit ended the loop's waits; a dial in flight ends within
			// TCPTimeout.
			m.rejoins.Wait()
			if err := ml.Shutdown(); err != nil {
				m.downErr = errors.Join(m.downErr, fmt.Errorf("cluster: shutting memberlist down: %w", err))
			}
		}
		m.mu.Lock()
		m.mu.stopped = true
		subs := m.mu.subs
		m.mu.subs = map[*Subscription]struct{}{}
		m.mu.Unlock()
		for s := range subs {
			s.close()
		}
		if ml != nil {
			m.log.Info("cluster: membership stopped", "graceful", graceful)
		}
	})
	return m.downErr
}

// leave is the graceful part of Stop.
func (m *Membership) leave(ctx context.Context, ml *memberlist.Memberlist) error {
	// The publisher's goroutine has ended: record the status for Local and
	// publish it from here.
	m.pub.update(func(l *localState) { l.Status = StatusShuttingDown })
	m.publish(m.pub.wanted())

	m.announceLeave(ctx, ml)

	timeout := m.opts.Timings.LeaveTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(deadline))
	}
	if timeout <= 0 {
		return fmt.Errorf("cluster: no time left to broadcast the leave: %w", ctx.Err())
	}
	if err := ml.Leave(timeout); err != nil {
		return fmt.Errorf("cluster: broadcasting the leave: %w", err)
	}
	return nil
}

// announceLeave sends a leave notice to every member of the view over TCP
// and waits until each has confirmed, left, or could not be reached. A
// member that recorded the notice reports our departure as EventLeft; one
// that did not can only report EventFailed, which is the safe reading for a
// silo that may not have handed its directory range over.
func (m *Membership) announceLeave(ctx context.Context, ml *memberlist.Memberlist) {
	self := m.opts.SiloID
	m.mu.Lock()
	m.mu.view.markLeaving(self, m.opts.Generation)
	m.mu.leaveAwaited = map[string]struct{}{}
	var targets []memberlist.Node
	for id, member := range m.mu.view.members {
		if id == self {
			continue
		}
		m.mu.leaveAwaited[id] = struct{}{}
		host, port := splitIPPort(member.GossipAddress)
		// Built from the view, never from ml.Members(), whose nodes
		// memberlist keeps mutating.
		targets = append(targets, memberlist.Node{Name: id, Addr: net.ParseIP(host), Port: uint16(port)})
	}
	seen := make(chan struct{})
	m.mu.leaveSeen = seen
	if len(targets) == 0 {
		close(seen)
		m.mu.leaveSeen = nil
	}
	m.mu.Unlock()

	notice := encodeLeave(leaveMessage{Kind: msgLeaving, ID: self, Generation: m.opts.Generation})
	var wg sync.WaitGroup
	for _, n := range targets {
		wg.Go(func() {
			if err := ml.SendReliable(&n, notice); err != nil {
				m.log.Debug("cluster: could not send the leave notice", "member", n.Name, "err", err)
				m.leaveConfirmed(n.Name)
			}
		})
	}

	wait := make(chan struct{})
	timer := m.clock.AfterFunc(m.opts.Timings.LeaveTimeout, func() { close(wait) })
	select {
	case <-seen:
	case <-ctx.Done():
	case <-wait:
	}
	timer.Stop()
	wg.Wait()

	m.mu.Lock()
	if missing := len(m.mu.leaveAwaited); missing > 0 {
		m.log.Warn("cluster: leaving without every member's confirmation; they will report a failure", "missing", missing)
	}
	m.mu.leaveAwaited, m.mu.leaveSeen = nil, nil
	m.mu.Unlock()
}

// leaveConfirmed stops waiting for member id's confirmation.
func (m *Membership) leaveConfirmed(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leaveConfirmedLocked(id)
}

func (m *Membership) leaveConfirmedLocked(id string) {
	if m.mu.leaveAwaited == nil {
		return
	}
	delete(m.mu.leaveAwaited, id)
	if len(m.mu.leaveAwaited) == 0 && m.mu.leaveSeen != nil {
		close(m.mu.leaveSeen)
		m.mu.leaveSeen = nil
	}
}

// SetStatus announces the silo's status to the cluster at once (without the
// rate limit of load updates). It returns ErrStopped after Stop or Kill.
func (m *Membership) SetStatus(s Status) error {
	if !s.valid() {
		return fmt.Errorf("%w: %d", ErrInvalidStatus, uint8(s))
	}
	if m.isStopped() {
		return ErrStopped
	}
	m.pub.update(func(l *localState) { l.Status = s })
	return nil
}

// SetLoad sets the load figure (activation count) the silo publishes for
// placement. Publications are rate-limited to one per
// Timings.MetaUpdateInterval; the latest value set wins. Negative values
// count as zero. It never blocks.
func (m *Membership) SetLoad(n int64) {
	m.pub.update(func(l *localState) { l.Load = max(n, 0) })
}

func (m *Membership) isStopped() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.stopped
}

// Local returns this silo as it announces itself, with the latest status
// and load set, whether or not they have been published yet.
func (m *Membership) Local() Member {
	state := m.pub.wanted()
	return Member{
		ID:            m.opts.SiloID,
		Generation:    m.opts.Generation,
		Address:       m.opts.Address,
		Gateway:       m.opts.Gateway,
		Status:        state.Status,
		Load:          state.Load,
		GossipAddress: m.GossipAddress(),
	}
}

// GossipAddress returns the address memberlist listens on, with the port
// chosen when BindAddress asked for port 0; "" before Start. Other silos
// list it in their Seeds.
func (m *Membership) GossipAddress() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.gossip
}

// View returns a snapshot of the local view.
func (m *Membership) View() View {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.view.snapshot()
}

// Subscribe returns the current view and a Subscription that receives every
// event after it. Close the subscription when done; Stop and Kill close it.
func (m *Membership) Subscribe() (View, *Subscription) {
	s := newSubscription(m)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.stopped {
		s.close()
	} else {
		m.mu.subs[s] = struct{}{}
	}
	return m.mu.view.snapshot(), s
}

func (m *Membership) unsubscribe(s *Subscription) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.mu.subs, s)
}

// publish hands state to memberlist; it runs on the publisher's goroutine,
// and once more from Stop after that goroutine ended.
func (m *Membership) publish(state localState) {
	m.storeMeta(state)
	m.mu.Lock()
	ml := m.mu.ml
	m.mu.Unlock()
	// UpdateNode waits until the update has been broadcast once; the
	// update stays queued for gossip if the wait times out.
	if err := ml.UpdateNode(5 * m.opts.Timings.GossipInterval); err != nil {
		m.log.Debug("cluster: metadata update not yet broadcast", "status", state.Status, "load", state.Load, "err", err)
	}
}

func (m *Membership) storeMeta(state localState) {
	b := encodeMeta(nodeMeta{
		Generation: m.opts.Generation,
		Address:    m.opts.Address,
		Gateway:    m.opts.Gateway,
		Status:     state.Status,
		Load:       state.Load,
	})
	m.meta.Store(&b)
}

// apply runs a change of the view under the lock and hands its events to
// the subscribers, without blocking; it returns them for logging.
func (m *Membership) apply(change func(v *view) []Event) {
	m.mu.Lock()
	if m.mu.stopped {
		m.mu.Unlock()
		return
	}
	events := change(m.mu.view)
	type back struct {
		member Member
		down   time.Duration
	}
	var backs []back
	for _, e := range events {
		if e.Kind == EventLeft || e.Kind == EventFailed {
			m.leaveConfirmedLocked(e.Member.ID) // it will not confirm anything now
		}
		switch e.Kind {
		case EventFailed:
			m.mu.rejoin.memberFailed(e.Member.ID, e.Member.GossipAddress, m.clock.Now())
		case EventJoined:
			if f, ok := m.mu.rejoin.memberAlive(e.Member.ID); ok {
				backs = append(backs, back{e.Member, m.clock.Now().Sub(f.since)})
			}
		}
	}
	if len(events) > 0 {
		for s := range m.mu.subs {
			s.push(events)
		}
	}
	m.mu.Unlock()
	for _, e := range events {
		level := slog.LevelInfo
		if e.Kind == EventUpdated {
			level = slog.LevelDebug
		}
		m.log.Log(context.Background(), level, "cluster: member "+e.Kind.String(),
			"member", e.Member.ID, "generation", e.Member.Generation, "status", e.Member.Status,
			"load", e.Member.Load, "version", e.Version)
	}
	for _, b := range backs {
		m.log.Info("cluster: rejoined a member seen failed", "member", b.member.ID,
			"generation", b.member.Generation, "failed_for", b.down.Round(time.Millisecond))
	}
}

// handleMessage handles a membership message from another silo.
func (m *Membership) handleMessage(b []byte) {
	if isProbe(b) {
		m.handleProbe(b)
		return
	}
	msg, err := decodeLeave(b)
	if err != nil {
		m.log.Warn("cluster: dropping a membership message", "err", err)
		return
	}
	self := m.opts.SiloID
	switch msg.Kind {
	case msgLeavingSeen:
		if msg.ID == self && msg.Generation == m.opts.Generation {
			m.leaveConfirmed(msg.Acker)
		}
	case msgLeaving:
		if msg.ID == self {
			return
		}
		m.mu.Lock()
		recorded := !m.mu.stopped && m.mu.view.markLeaving(msg.ID, msg.Generation)
		leaver, _ := m.mu.view.member(msg.ID)
		ml := m.mu.ml
		m.mu.Unlock()
		if !recorded || ml == nil {
			return // a silo this view does not show cannot be misreported
		}
		m.log.Debug("cluster: member announced its leave", "member", msg.ID, "generation", msg.Generation)
		ack := encodeLeave(leaveMessage{Kind: msgLeavingSeen, ID: msg.ID, Generation: msg.Generation, Acker: self})
		// One UDP packet, sent from memberlist's receiving goroutine: it
		// does not block, and a lost one only makes the leaver wait longer.
		if err := ml.SendToAddress(memberlist.Address{Addr: leaver.GossipAddress, Name: msg.ID}, ack); err != nil {
			m.log.Debug("cluster: could not confirm a leave notice", "member", msg.ID, "err", err)
		}
	}
}

func (m *Membership) memberlistConfig() *memberlist.Config {
	c := memberlist.DefaultLANConfig()
	c.Name = m.opts.SiloID
	host, port := splitIPPort(m.opts.BindAddress)
	c.BindAddr, c.BindPort = host, port
	c.AdvertiseAddr, c.AdvertisePort = "", port // memberlist sets the port it bound for port 0
	if m.opts.AdvertiseAddress != "" {
		c.AdvertiseAddr, c.AdvertisePort = splitIPPort(m.opts.AdvertiseAddress)
	}
	c.Label = labelPrefix + m.opts.ClusterID
	if len(m.opts.Secret) > 0 {
		c.SecretKey = gossipKey(m.opts.Secret, m.opts.ClusterID)
	}
	t := m.opts.Timings
	c.ProbeInterval, c.ProbeTimeout = t.ProbeInterval, t.ProbeTimeout
	c.IndirectChecks = t.IndirectChecks
	c.SuspicionMult, c.SuspicionMaxTimeoutMult = t.SuspicionMult, t.SuspicionMaxTimeoutMult
	c.AwarenessMaxMultiplier = t.AwarenessMaxMultiplier
	c.GossipInterval, c.GossipNodes, c.GossipToTheDeadTime = t.GossipInterval, t.GossipNodes, t.GossipToTheDeadTime
	c.RetransmitMult = t.RetransmitMult
	c.PushPullInterval = t.PushPullInterval
	c.TCPTimeout = t.TCPTimeout
	c.DeadNodeReclaimTime = t.DeadNodeReclaimTime
	c.Logger = memberlistLogger(m.log)
	d := (*delegate)(m)
	c.Delegate, c.Events = d, d
	return c
}

// splitIPPort splits an address Validate accepted.
func splitIPPort(addr string) (string, int) {
	host, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	return host, n
}

// delegate is Membership as memberlist's Delegate and EventDelegate. Every
// method runs on a memberlist goroutine, the event methods under
// memberlist's lock, so none may block or call back into memberlist.
type delegate Membership

var (
	_ memberlist.Delegate      = (*delegate)(nil)
	_ memberlist.EventDelegate = (*delegate)(nil)
)

func (d *delegate) NodeMeta(limit int) []byte {
	b := *(*Membership)(d).meta.Load()
	if len(b) > limit {
		return nil // Validate keeps it within memberlist's limit
	}
	return b
}

func (d *delegate) NotifyMsg(b []byte)                         { (*Membership)(d).handleMessage(b) }
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

func (d *delegate) NotifyJoin(n *memberlist.Node)   { d.alive(n) }
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.alive(n) }
func (d *delegate) NotifyLeave(n *memberlist.Node) {
	(*Membership)(d).apply(func(v *view) []Event { return v.gone(n.Name) })
}

func (d *delegate) alive(n *memberlist.Node) {
	m := (*Membership)(d)
	addr, now := n.Address(), m.clock.Now()
	m.apply(func(v *view) []Event { return v.alive(n.Name, addr, n.Meta, now) })
}
