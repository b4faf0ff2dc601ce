package directory

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/directory/directorypb"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/ring"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/proxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeHost is a silo's activation host as the directory sees it.
type fakeHost struct {
	mu          sync.Mutex
	active      map[actor.GrainID]bool
	activating  map[actor.GrainID]bool // won their registration, not yet serving
	deactivated []actor.GrainID
}

func (h *fakeHost) Registered() []actor.GrainID {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []actor.GrainID
	for id := range h.active {
		ids = append(ids, id)
	}
	for id := range h.activating {
		ids = append(ids, id)
	}
	return ids
}

func (h *fakeHost) Deactivate(id actor.GrainID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.deactivated = append(h.deactivated, id)
	ok := h.active[id] || h.activating[id]
	delete(h.active, id)
	delete(h.activating, id)
	return ok
}

func (h *fakeHost) activate(id actor.GrainID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.activating, id)
	h.active[id] = true
}

// fakeCluster is silos whose directories reach each other in process,
// through the call path silos use among themselves minus the network.
type fakeCluster struct {
	t     *testing.T
	mu    sync.Mutex
	silos map[string]*fakeSilo
	order []string
	down  map[string]bool // silos whose partitions do not answer
	// refused counts the requests each down silo did not answer.
	refused map[string]int
	clock   clock.Clock // the directories' clock; nil means the real one
	// gates hold the requests of a method (by name, as "Unregister") until
	// the test closes the channel.
	gates map[string]chan struct{}
	// callTimeout is the directories' Options.CallTimeout; zero means 2 s.
	callTimeout time.Duration
	// deathGrace is the directories' Options.DeathGrace.
	deathGrace time.Duration
	// downMethod names, per silo, a method its partition refuses as if down.
	downMethod map[string]string
	// heldDeactivations hold the deactivations of grains (by key) until
	// the test closes the channel.
	heldDeactivations map[string]chan struct{}
	// served counts the requests each silo's partition was sent, by
	// method name.
	served map[string]map[string]int
}

type fakeSilo struct {
	id   string
	gen  int64
	dir  *Directory
	host *fakeHost
}

// serveOf delivers a silo's directory requests to its partition.
type serveOf struct {
	c  *fakeCluster
	to string
}

func (s serveOf) Deliver(req *host.Request) {
	s.c.mu.Lock()
	target, down := s.c.silos[s.to], s.c.down[s.to]
	if m := directorypb.DirectoryService.Method(req.MethodID); m != nil && s.c.downMethod[s.to] == m.Desc.Name {
		down = true
	}
	if down {
		s.c.refused[s.to]++
	}
	var gate chan struct{}
	if m := directorypb.DirectoryService.Method(req.MethodID); m != nil {
		if s.c.served == nil {
			s.c.served = make(map[string]map[string]int)
		}
		if s.c.served[s.to] == nil {
			s.c.served[s.to] = make(map[string]int)
		}
		s.c.served[s.to][string(m.Desc.Name)]++
		gate = s.c.gates[m.Desc.Name]
		if in := (&directorypb.DeactivateRequest{}); m.Desc.Name == "Deactivate" && proto.Unmarshal(req.Payload, in) == nil {
			if held := s.c.heldDeactivations[in.GetGrain().GetKey()]; held != nil {
				gate = held
			}
		}
	}
	s.c.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if target == nil || down {
		req.Reply.Reply(req, nil, fmt.Errorf("%w: %s is down", proxy.ErrUnavailable, s.to))
		req.Release()
		return
	}
	target.dir.Serve(req)
}

type peersOf struct{ c *fakeCluster }

func (p peersOf) Caller(silo string) (proxy.Caller, error) {
	l := rpc.NewLocalCaller(serveOf{p.c, silo}, func() time.Duration { return time.Second }, nil, 0)
	return l, nil
}

func newFakeCluster(t *testing.T, ids ...string) *fakeCluster {
	c := &fakeCluster{t: t, silos: make(map[string]*fakeSilo), down: make(map[string]bool), refused: make(map[string]int),
		gates: make(map[string]chan struct{})}
	for _, id := range ids {
		c.add(id, 1)
	}
	c.setView()
	return c
}

func (c *fakeCluster) add(id string, gen int64) *fakeSilo {
	s := &fakeSilo{id: id, gen: gen, host: &fakeHost{active: make(map[actor.GrainID]bool), activating: make(map[actor.GrainID]bool)}}
	callTimeout := 2 * time.Second
	if c.callTimeout > 0 {
		callTimeout = c.callTimeout
	}
	s.dir = New(Options{Self: ring.Silo{ID: id, Generation: gen}, CallTimeout: callTimeout, HandoffWait: 200 * time.Millisecond,
		DeathGrace: c.deathGrace},
		peersOf{c}, s.host, c.clock, quiet)
	c.t.Cleanup(s.dir.Close)
	c.mu.Lock()
	c.silos[id] = s
	c.order = append(c.order, id)
	c.mu.Unlock()
	return s
}

var viewVersion uint64

// view is the membership view of the silos in c, all active but those
// listed as joining.
func (c *fakeCluster) view(joining ...string) cluster.View {
	statuses := make(map[string]cluster.Status)
	for _, id := range joining {
		statuses[id] = cluster.StatusJoining
	}
	return c.viewWith(statuses)
}

// viewWith is the view of the silos in c, active unless statuses says
// otherwise.
func (c *fakeCluster) viewWith(statuses map[string]cluster.Status) cluster.View {
	c.mu.Lock()
	defer c.mu.Unlock()
	viewVersion++
	v := cluster.View{Version: viewVersion}
	for _, id := range c.order {
		s := c.silos[id]
		st := cluster.StatusActive
		if o, ok := statuses[id]; ok {
			st = o
		}
		v.Members = append(v.Members, cluster.Member{ID: id, Generation: s.gen, Status: st})
	}
	sort.Slice(v.Members, func(i, j int) bool { return v.Members[i].ID < v.Members[j].ID })
	return v
}

// servedCount is how many requests of method silo's partition was sent.
func (c *fakeCluster) servedCount(silo, method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.served[silo][method]
}

// setView gives every silo the same view.
func (c *fakeCluster) setView(joining ...string) {
	v := c.view(joining...)
	for _, s := range c.all() {
		s.dir.SetView(v)
	}
}

func (c *fakeCluster) all() []*fakeSilo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*fakeSilo, 0, len(c.order))
	for _, id := range c.order {
		out = append(out, c.silos[id])
	}
	return out
}

// kill removes a silo as a crash does: its partition and activations are
// gone, and the others learn it from the view.
func (c *fakeCluster) kill(id string) {
	c.mu.Lock()
	s := c.silos[id]
	delete(c.silos, id)
	c.order = slices.DeleteFunc(c.order, func(o string) bool { return o == id })
	c.mu.Unlock()
	s.dir.Close()
	c.setView()
}

// killUnseenBy is kill, but the silos listed do not take the view without
// it: starved, they neither hear of the death nor answer (a test makes
// them down), and do nothing about it until they see a later view.
func (c *fakeCluster) killUnseenBy(id string, unseen ...string) {
	c.mu.Lock()
	s := c.silos[id]
	delete(c.silos, id)
	c.order = slices.DeleteFunc(c.order, func(o string) bool { return o == id })
	c.mu.Unlock()
	s.dir.Close()
	v := c.view()
	for _, o := range c.all() {
		if !slices.Contains(unseen, o.id) {
			o.dir.SetView(v)
		}
	}
}

func register(t *testing.T, s *fakeSilo, id actor.GrainID) string {
	t.Helper()
	w := registerOnly(t, s, id)
	if w == "" {
		s.host.activate(id)
	}
	return w
}

// registerOnly registers s's activation of id and leaves it activating
// when it wins: it holds the registration, and does not serve yet.
func registerOnly(t *testing.T, s *fakeSilo, id actor.GrainID) string {
	t.Helper()
	done := make(chan string, 1)
	s.dir.Register(id, func(winner string, err error) {
		require.NoError(t, err)
		done <- winner
	})
	select {
	case w := <-done:
		if w == "" {
			s.host.mu.Lock()
			s.host.activating[id] = true
			s.host.mu.Unlock()
		}
		return w
	case <-time.After(10 * time.Second):
		t.Fatal("Register did not answer")
		return ""
	}
}

func locate(t *testing.T, s *fakeSilo, id actor.GrainID, hint string) string {
	t.Helper()
	silo, _ := locatePlaced(t, s, id, hint)
	return silo
}

// locatePlaced is locate that also says whether the silo was placement's
// choice for a grain without an activation.
func locatePlaced(t *testing.T, s *fakeSilo, id actor.GrainID, hint string) (string, bool) {
	t.Helper()
	type answer struct {
		silo   string
		placed bool
	}
	done := make(chan answer, 1)
	s.dir.Locate(id, hint, func(silo string, placed bool, err error) {
		require.NoError(t, err)
		done <- answer{silo, placed}
	})
	select {
	case a := <-done:
		return a.silo, a.placed
	case <-time.After(10 * time.Second):
		t.Fatal("Locate did not answer")
		return "", false
	}
}

func grain(i int) actor.GrainID { return actor.GrainID{Type: "test.G", Key: fmt.Sprint("k", i)} }

// grainsOwnedBy returns n grains whose hash the given silo owns in a ring of
// ids.
func grainsOwnedBy(owner string, n int, ids ...string) []actor.GrainID {
	var silos []ring.Silo
	for _, id := range ids {
		silos = append(silos, ring.Silo{ID: id, Generation: 1})
	}
	r := ring.New(silos, 0)
	var out []actor.GrainID
	for i := 0; len(out) < n; i++ {
		if o, _ := r.OwnerOf(grain(i)); o.ID == owner {
			out = append(out, grain(i))
		}
	}
	return out
}

func TestTheFirstRegistrationWinsWhereverItComesFrom(t *testing.T) {
	c := newFakeCluster(t, "a", "b", "c")
	silos := c.all()
	for i := range 50 {
		id := grain(i)
		first := silos[i%3]
		assert.Empty(t, register(t, first, id), "the first registration of %s wins", id)
		for _, other := range silos {
			if other != first {
				assert.Equal(t, first.id, register(t, other, id), "a later one learns the winner")
				assert.Equal(t, first.id, locate(t, other, id, ""), "and so does a lookup")
			}
		}
	}
	total := 0
	for _, s := range silos {
		total += s.dir.Stats().Partition
	}
	assert.Equal(t, 50, total, "each grain has one entry, at its owner")
}

func TestAGrainWithoutAnActivationIsPlacedAndHintsWin(t *testing.T) {
	c := newFakeCluster(t, "a", "b", "c")
	a := c.all()[0]
	assert.Equal(t, "c", locate(t, a, grain(1), "c"), "a hint for a live silo wins")
	silo := locate(t, a, grain(2), "nobody")
	assert.Contains(t, []string{"a", "b", "c"}, silo, "a hint for no live silo falls back to the strategy")
	assert.Zero(t, a.dir.Stats().Partition+c.all()[1].dir.Stats().Partition+c.all()[2].dir.Stats().Partition,
		"looking up registers nothing")
}

// Locate says when the silo it answers is a placement for a grain without
// an activation, whichever silo owns the grain's entry, and not once the
// grain is registered: the router charges a new activation on another
// silo to the connection that asked.
func TestLocateSaysWhenItPlacedTheGrain(t *testing.T) {
	c := newFakeCluster(t, "a", "b", "c")
	silos := c.all()
	for i := range 12 {
		id := grain(i)
		asker := silos[i%3]
		silo, placed := locatePlaced(t, asker, id, "c")
		assert.Equal(t, "c", silo)
		assert.True(t, placed, "%s has no activation: placed", id)
		require.Empty(t, register(t, silos[2], id))
		silo, placed = locatePlaced(t, asker, id, "")
		assert.Equal(t, "c", silo)
		assert.False(t, placed, "%s is registered: found, not placed", id)
	}
}

// When a silo dies, owners drop the entries that point at it: its grains
// are placed afresh; grains elsewhere keep their entries.
func TestEntriesOfADeadSiloAreDropped(t *testing.T) {
	c := newFakeCluster(t, "a", "b", "c")
	a, b := c.all()[0], c.all()[1]
	onB, onA := grain(1), grain(2)
	require.Empty(t, register(t, b, onB))
	require.Empty(t, register(t, a, onA))
	c.kill("b")
	require.Eventually(t, func() bool { return a.dir.Stats().Held == 0 && c.all()[1].dir.Stats().Held == 0 }, 10*time.Second, time.Millisecond)
	assert.Empty(t, register(t, a, onB), "b's grain is free to activate again")
	assert.Equal(t, "a", locate(t, c.all()[1], onA, ""), "a's grain kept its entry")
}

// A silo that gains a range from a silo that died rebuilds it from what the
// live silos host, holding requests for it until it has.
func TestARangeOfADeadOwnerIsRebuiltFromWhatSilosHost(t *testing.T) {
	c := newFakeCluster(t, "a", "b", "c")
	owned := grainsOwnedBy("b", 20, "a", "b", "c")
	a, b, cc := c.all()[0], c.all()[1], c.all()[2]
	for i, id := range owned {
		host := []*fakeSilo{a, cc}[i%2]
		require.Empty(t, register(t, host, id))
	}
	require.Equal(t, 20, b.dir.Stats().Partition)
	c.kill("b")
	for i, id := range owned {
		want := []string{"a", "c"}[i%2]
		for _, s := range []*fakeSilo{a, cc} {
			assert.Equal(t, want, locate(t, s, id, ""), "%s's entry was rebuilt", id)
		}
	}
	assert.Positive(t, a.dir.Stats().Rebuilds+cc.dir.Stats().Rebuilds)
	assert.Zero(t, a.dir.Stats().Conflicts+cc.dir.Stats().Conflicts)
	assert.Empty(t, a.host.deactivated, "nothing that lived on a live silo was deactivated")
	assert.Empty(t, cc.host.deactivated)
}

// An activation that won its registration and is still activating (loading
// its state, in OnActivate) when the grain's owner dies is part of the
// range's rebuild: a later registration elsewhere loses to it. A rebuild
// that asked only for what serves missed it, and a second activation
// served beside it once it finished activating.
func TestARebuildKeepsAnActivationThatWonAndStillActivates(t *testing.T) {
	c := newFakeCluster(t, "a", "b", "c")
	a, cc := c.all()[0], c.all()[2]
	id := grainsOwnedBy("b", 1, "a", "b", "c")[0]
	require.Empty(t, registerOnly(t, a, id), "a's activation wins at b, and starts activating")
	c.kill("b")
	assert.Equal(t, "a", register(t, cc, id), "the rebuilt entry holds a's activation: c's loses")
	assert.Equal(t, "a", locate(t, cc, id, ""), "and lookups find a's")
	a.host.activate(id)
	assert.Equal(t, "a", locate(t, a, id, ""))
	assert.Empty(t, a.host.deactivated, "a's activation, the first, is not told to go")
}

// A live silo that does not answer the rebuild of a dead owner's range
// (loaded, or its link down) is asked again once the range is released:
// a grain of it activated again meanwhile is a duplicate, and the later
// answer resolves it, as after a false death. Asked once, the rebuild
// never learnt of the silent silo's activation, and both served.
func TestARebuildAsksASilentSiloAgainAndResolvesTheDuplicate(t *testing.T) {
	c := newFakeCluster(t, "a", "b", "c")
	a, cc := c.all()[0], c.all()[2]
	// A grain b owns, and a owns without b: its rebuild at a needs c's
	// answer.
	without := ring.New([]ring.Silo{{ID: "a", Generation: 1}, {ID: "c", Generation: 1}}, 0)
	var id actor.GrainID
	for _, g := range grainsOwnedBy("b", 20, "a", "b", "c") {
		if o, _ := without.OwnerOf(g); o.ID == "a" {
			id = g
			break
		}
	}
	require.NotEmpty(t, id.Key)
	require.Empty(t, register(t, cc, id), "c's activation wins at b")
	c.mu.Lock()
	c.down["c"] = true
	c.mu.Unlock()
	c.killUnseenBy("b", "c")
	require.Eventually(t, func() bool { return a.dir.Stats().Held == 0 && cc.dir.Stats().Held == 0 }, 10*time.Second, time.Millisecond,
		"the rebuild ends without c's answer")
	require.Empty(t, register(t, a, id), "with c's entry unknown, a activates the grain again: a duplicate")
	c.mu.Lock()
	c.down["c"] = false
	c.mu.Unlock()
	require.Eventually(t, func() bool {
		a.host.mu.Lock()
		defer a.host.mu.Unlock()
		cc.host.mu.Lock()
		defer cc.host.mu.Unlock()
		return len(a.host.deactivated)+len(cc.host.deactivated) == 1
	}, 10*time.Second, time.Millisecond, "one of the two is told to deactivate")
	assert.EqualValues(t, 1, a.dir.Stats().Conflicts)
}

// A silo that leaves gracefully hands its range over first: the new
// owners need no rebuild, and no activation elsewhere is touched.
func TestAGracefulLeaveHandsTheRangeOver(t *testing.T) {
	c := newFakeCluster(t, "a", "b", "c")
	owned := grainsOwnedBy("b", 20, "a", "b", "c")
	a, b, cc := c.all()[0], c.all()[1], c.all()[2]
	for i, id := range owned {
		require.Empty(t, register(t, []*fakeSilo{a, cc}[i%2], id))
	}
	require.NoError(t, b.dir.Handover(context.Background()))
	assert.Zero(t, b.dir.Stats().Partition, "the leaving silo keeps nothing")
	leaving := c.viewWith(map[string]cluster.Status{"b": cluster.StatusShuttingDown})
	for _, s := range c.all() {
		s.dir.SetView(leaving) // b announces it is shutting down
	}
	assert.Zero(t, a.dir.Stats().Held+cc.dir.Stats().Held, "the ranges arrived before the view said so: nothing waits")
	c.kill("b") // then it goes
	for i, id := range owned {
		assert.Equal(t, []string{"a", "c"}[i%2], locate(t, a, id, ""))
	}
	assert.Zero(t, a.dir.Stats().Rebuilds+cc.dir.Stats().Rebuilds, "the handoff made a rebuild unnecessary")
	assert.Empty(t, a.host.deactivated)
	assert.Empty(t, cc.host.deactivated)
}

// A silo that joins takes its ranges from their live owners, which hand
// the entries over; requests for those ranges wait for the handoff instead
// of finding nothing and placing a duplicate.
func TestAJoiningSiloTakesItsRangeFromTheLiveOwners(t *testing.T) {
	c := newFakeCluster(t, "a", "b")
	d := c.add("d", 1)
	c.setView("d") // d is in the view, not yet active: it owns nothing
	owned := grainsOwnedBy("d", 20, "a", "b", "d")
	a, b := c.all()[0], c.all()[1]
	for i, id := range owned {
		require.Empty(t, register(t, []*fakeSilo{a, b}[i%2], id))
	}
	// d becomes active; d learns it first, the others a little later.
	v := c.view()
	d.dir.SetView(v)
	located := make(chan string, len(owned))
	for _, id := range owned {
		d.dir.Locate(id, "", func(silo string, _ bool, err error) {
			assert.NoError(t, err)
			located <- silo
		})
	}
	assert.Positive(t, d.dir.Stats().Held, "d holds the ranges it gained from live silos")
	a.dir.SetView(v)
	b.dir.SetView(v)
	for i := range owned {
		_ = i
		silo := <-located
		assert.Contains(t, []string{"a", "b"}, silo, "the lookups waited for the entries")
	}
	for i, id := range owned {
		assert.Equal(t, []string{"a", "b"}[i%2], locate(t, d, id, ""))
	}
	assert.Equal(t, 20, d.dir.Stats().Partition)
	assert.Zero(t, d.dir.Stats().Rebuilds)
}

// During a disagreement two activations may register with two owners;
// when the entries meet, the one registered first stays and the other is
// told to deactivate.
func TestDuplicatesFoundWhileMergingLoseToTheFirst(t *testing.T) {
	c := newFakeCluster(t, "a", "b")
	a, b := c.all()[0], c.all()[1]
	id := grainsOwnedBy("a", 1, "a", "b")[0]
	require.Empty(t, register(t, a, id))
	// b, by a view of its own, registers a second activation in its own
	// partition, as a silo that has not yet seen a join might.
	b.dir.mu.Lock()
	b.dir.mu.partition[id] = Activation{Silo: "b", Generation: 1}
	b.dir.mu.Unlock()
	b.host.activate(id)
	require.NoError(t, b.dir.Handover(context.Background()))
	require.Eventually(t, func() bool {
		b.host.mu.Lock()
		defer b.host.mu.Unlock()
		return slices.Contains(b.host.deactivated, id)
	}, 10*time.Second, time.Millisecond, "b's duplicate is deactivated")
	assert.Equal(t, "a", locate(t, b, id, ""))
	assert.EqualValues(t, 1, a.dir.Stats().Conflicts)
}

// A live silo that does not hand over a range in time (its view is slow)
// gets it rebuilt by the new owner, from what the silos host.
func TestAnOverdueHandoffIsReplacedByARebuild(t *testing.T) {
	c := newFakeCluster(t, "a")
	d := c.add("d", 1)
	c.setView("d")
	owned := grainsOwnedBy("d", 5, "a", "d")
	a := c.all()[0]
	for _, id := range owned {
		require.Empty(t, register(t, a, id))
	}
	d.dir.SetView(c.view()) // a never learns of the change, so never hands over
	for _, id := range owned {
		assert.Equal(t, "a", locate(t, d, id, ""), "rebuilt once HandoffWait passed")
	}
	assert.Positive(t, d.dir.Stats().Rebuilds)
}

// A silo declared dead by mistake comes back with its activations still
// running; meanwhile one of its grains was activated on another silo.
// When it is back in the view, the owner takes back what it hosts, and
// the duplicate loses to the entry already there.
func TestASiloThatComesBackFromAFalseDeathHasItsDuplicatesResolved(t *testing.T) {
	c := newFakeCluster(t, "a", "b", "c")
	a, b, cc := c.all()[0], c.all()[1], c.all()[2]
	id := grainsOwnedBy("a", 1, "a", "b", "c")[0] // owned by a, hosted on b
	require.Empty(t, register(t, b, id))

	// The others think b died; b, alive, never hears of it.
	noB := without(c.view(), nil, "b")
	a.dir.SetView(noB)
	cc.dir.SetView(noB)
	require.Empty(t, register(t, cc, id), "with b's entry dropped, c activates the grain again: a duplicate")

	// b is back, under the same generation.
	back := c.view()
	a.dir.SetView(back)
	cc.dir.SetView(back)
	require.Eventually(t, func() bool {
		b.host.mu.Lock()
		defer b.host.mu.Unlock()
		return slices.Contains(b.host.deactivated, id)
	}, 10*time.Second, time.Millisecond, "b's activation, the duplicate now, is told to deactivate")
	assert.Equal(t, "c", locate(t, b, id, ""))
	assert.EqualValues(t, 1, a.dir.Stats().Conflicts)
}

// The same when the silo that comes back does not answer at first (loaded,
// or its link still to be dialled): the owner asks again until it does.
// Asked once, the owner gave up, and the duplicate stayed for good.
func TestASiloBackFromAFalseDeathThatAnswersLateHasItsDuplicatesResolved(t *testing.T) {
	c := newFakeCluster(t, "a", "b", "c")
	a, b, cc := c.all()[0], c.all()[1], c.all()[2]
	id := grainsOwnedBy("a", 1, "a", "b", "c")[0] // owned by a, hosted on b
	require.Empty(t, register(t, b, id))
	noB := without(c.view(), nil, "b")
	a.dir.SetView(noB)
	cc.dir.SetView(noB)
	require.Empty(t, register(t, cc, id), "with b's entry dropped, c activates the grain again: a duplicate")

	c.mu.Lock()
	c.down["b"] = true
	c.mu.Unlock()
	back := c.view()
	a.dir.SetView(back)
	cc.dir.SetView(back)
	require.Eventually(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.refused["b"] >= 2 }, 10*time.Second, time.Millisecond,
		"a asks b what it hosts, and b does not answer")
	c.mu.Lock()
	c.down["b"] = false
	c.mu.Unlock()
	require.Eventually(t, func() bool {
		b.host.mu.Lock()
		defer b.host.mu.Unlock()
		return slices.Contains(b.host.deactivated, id)
	}, 10*time.Second, time.Millisecond, "b's duplicate is told to deactivate once b answers")
	assert.EqualValues(t, 1, a.dir.Stats().Conflicts)
}

// A registration from a silo the owner's view does not have yet holds for
// the grace a view needs to catch up: the silo may have joined a moment
// ago. A silo still unseen after that died before the owner saw it, and
// its entries are dropped; one the view has by then keeps them.
func TestASiloNotYetSeenIsAliveForItsGraceOnly(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	c := &fakeCluster{t: t, silos: make(map[string]*fakeSilo), down: make(map[string]bool), refused: make(map[string]int), clock: fake}
	a, b := c.add("a", 1), c.add("b", 1)
	c.setView()
	// x and y join; only they know it yet.
	x, y := c.add("x", 7), c.add("y", 7)
	v := c.view()
	x.dir.SetView(v)
	y.dir.SetView(v)
	grains := grainsOwnedBy("a", 2, "a", "b", "x", "y") // owned by a, with or without x and y
	ofX, ofY := grains[0], grains[1]
	require.Empty(t, register(t, x, ofX), "x's first registration wins")
	require.Empty(t, register(t, y, ofY))
	assert.Equal(t, "x", register(t, b, ofX), "within the grace, x's entry holds against a later one")

	// y shows up in a's view; x never does: it died before a saw it.
	withY := v
	withY.Members = slices.DeleteFunc(slices.Clone(v.Members), func(m cluster.Member) bool { return m.ID == "x" })
	a.dir.SetView(withY)
	b.dir.SetView(withY)
	fake.Advance(a.dir.opts.UnseenGrace + time.Millisecond)
	assert.Empty(t, register(t, b, ofX), "past the grace, x's entry is dead and b's activation wins")
	assert.Equal(t, "y", register(t, b, ofY), "y, seen in time, keeps its entry")
	assert.Equal(t, "b", locate(t, a, ofX, ""))
}

// A silo seen only after its grace had its entries taken for dead, and one
// of its grains was activated again on another silo meanwhile. Once the
// owner sees it, the owner asks it what it hosts, as after a false death,
// and its activation, the later entry now, is told to deactivate. Before,
// the owner forgot it had ever met the silo, and both activations served.
func TestASiloSeenAfterItsGraceHasItsDuplicatesResolved(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	c := &fakeCluster{t: t, silos: make(map[string]*fakeSilo), down: make(map[string]bool), refused: make(map[string]int), clock: fake}
	a, b := c.add("a", 1), c.add("b", 1)
	c.setView()
	x := c.add("x", 7) // x joins; only x knows it yet
	v := c.view()
	x.dir.SetView(v)
	id := grainsOwnedBy("a", 1, "a", "b", "x")[0] // owned by a, with or without x
	require.Empty(t, register(t, x, id), "x's registration wins at a")
	require.Equal(t, "x", register(t, b, id), "within the grace, x's entry holds against a later one")
	fake.Advance(a.dir.opts.UnseenGrace + time.Millisecond)
	require.Empty(t, register(t, b, id), "past the grace, x's entry is dead and b's activation wins: a duplicate")

	a.dir.SetView(v) // a sees x at last
	b.dir.SetView(v)
	require.Eventually(t, func() bool {
		x.host.mu.Lock()
		defer x.host.mu.Unlock()
		return slices.Contains(x.host.deactivated, id)
	}, 10*time.Second, time.Millisecond, "x's activation, the later entry, is told to deactivate")
	assert.Equal(t, "b", locate(t, x, id, ""))
	assert.EqualValues(t, 1, a.dir.Stats().Conflicts)
}
