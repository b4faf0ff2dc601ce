// Package testcluster starts a cluster of silos in one process, on
// loopback, for tests and benchmarks: the way httptest starts a server.
//
//	c := testcluster.New(t, testcluster.Options{
//		Silos:    3,
//		Register: func(s *silo.Silo) error { return counter.RegisterCounterGrain(s, counter.New) },
//	})
//	ref := counter.NewCounterRef(c.Client(), "visits")
//	reply, err := ref.Add(ctx, &counter.AddRequest{Delta: 1}, c.PlaceOn(1)) // a new activation goes to silo 1
//	silo, _, err := c.Locate(ctx, ref.GrainID())                            // "silo-1"
//
// New starts the silos (two by default) with fast gossip timings and
// ephemeral ports, waits until every silo sees every other as active,
// connects a client to the gateways, and stops everything when the test
// ends. The silos share one memory store, so a grain that moves from silo
// to silo finds its state, as it would in Redis. Kill stops a silo as a
// crash would (its links and gossip die without a goodbye, and what it had
// not written is lost), Stop stops one gracefully, and Add starts another.
package testcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/gossipcut"
	"github.com/granary-go/granary/internal/silohooks"
	"github.com/granary-go/granary/internal/silohost"
	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

// Defaults of Options.
const (
	DefaultSilos   = 2
	DefaultTimeout = 30 * time.Second
)

// Options configure a test cluster. The zero value starts two silos that
// are both gateways, with no grain types registered.
type Options struct {
	// Silos is how many silos start. Default 2.
	Silos int
	// OnlyFirstGateway makes silo 0 the only gateway; the others take no
	// clients, and the client connects to silo 0 alone.
	OnlyFirstGateway bool
	// Register registers the grain types on each silo before it starts.
	Register func(s *silo.Silo) error
	// Configure adjusts each silo's options before it starts (after the
	// kit set the names, addresses and timings); i is the silo's index.
	Configure func(i int, o *silo.Options)
	// SiloOptions are given to every silo (filters, a clock).
	SiloOptions []silo.Option
	// Store is the store the silos share. Default: a memory store.
	Store persistence.Store
	// Logger receives the silos' logs. Default: discarded.
	Logger *slog.Logger
	// Timings tune gossip and failure detection. Default: DefaultTimings.
	Timings cluster.Timings
	// Timeout bounds starting, joining and stopping. Default 30 s.
	Timeout time.Duration
}

// Cluster is a running test cluster.
type Cluster struct {
	t     TB
	opts  Options
	store persistence.Store
	cut   *gossipcut.Cut // every silo gossips through it: see Partition

	mu struct {
		sync.Mutex
		silos  []*member      // every silo started, in order; nil once stopped or killed
		gossip map[int]string // each silo's gossip address, kept after it stops
		next   int
		client *client.Client
		// killed are the silos killed so far. A kill stops the host for at
		// most a second, as a crash would not wait; under load its
		// activations may still be deactivating then, and the host's
		// workers run on until close finishes the stop.
		killed []*member
	}
}

// member is one silo of the cluster and its gate to the shared store.
type member struct {
	silo  *silo.Silo
	store *killableStore
}

// TB is what the kit needs of a test: *testing.T and *testing.B are TBs,
// and a program (a benchmark harness) can supply its own.
type TB interface {
	Helper()                           // marks the caller as a helper
	Errorf(format string, args ...any) // reports a failure and goes on
	Fatalf(format string, args ...any) // reports a failure and stops
	Cleanup(fn func())                 // runs fn when the test ends
}

// New starts a cluster and stops it when the test ends.
func New(t TB, opts Options) *Cluster {
	t.Helper()
	if opts.Silos <= 0 {
		opts.Silos = DefaultSilos
	}
	if opts.Store == nil {
		opts.Store = persistence.NewMemoryStore()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Timings == (cluster.Timings{}) {
		opts.Timings = DefaultTimings()
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	c := &Cluster{t: t, opts: opts, store: opts.Store, cut: gossipcut.New()}
	c.mu.gossip = map[int]string{}
	t.Cleanup(c.close)
	for range opts.Silos {
		c.Add()
	}
	c.WaitForMembership()
	return c
}

// DefaultTimings is the test cluster's failure detection:
// cluster.FastTimings for gossip and joins, with probes, suspicions and
// stream timeouts long enough to outlast the scheduling stalls of a loaded
// machine. FastTimings declares a silo dead after 0.2-0.6 s without an
// ack; under the race detector on two busy cores a live silo stalls that
// long, is declared dead by mistake, and comes back: the views flap, and
// the duplicates a false death makes (docs/cluster.md) appear in tests
// that check what holds without one. Here a silo must miss acks for 1-4 s
// (the suspicion's bounds) before it is dead, and a killed silo is
// declared dead within about 5 s.
func DefaultTimings() cluster.Timings {
	t := cluster.FastTimings()
	t.ProbeInterval = 200 * time.Millisecond
	t.ProbeTimeout = 100 * time.Millisecond
	t.SuspicionMult = 5
	t.SuspicionMaxTimeoutMult = 4
	t.TCPTimeout = 2 * time.Second
	return t
}

// Secret is the cluster secret every silo of a Cluster proves to the
// others (a silo of a cluster needs a credential); Options.Configure may
// replace it.
var Secret = []byte("the test cluster's secret, 32 b!")

// Name returns the name of silo i: "silo-<i>".
func Name(i int) string { return fmt.Sprintf("silo-%d", i) }

// Add starts one more silo, joined through the silos running, and waits
// until every silo sees it. It returns the new silo's index.
func (c *Cluster) Add() int {
	c.t.Helper()
	c.mu.Lock()
	i := c.mu.next
	c.mu.next++
	var seeds []string
	for _, m := range c.mu.silos {
		if m != nil {
			if v, err := m.silo.Members(); err == nil {
				if self, ok := v.Member(m.silo.Name()); ok {
					seeds = append(seeds, self.GossipAddress)
				}
			}
		}
	}
	c.mu.Unlock()

	opts := silo.Options{
		Name:           Name(i),
		GatewayAddress: "127.0.0.1:0",
		DisableGateway: c.opts.OnlyFirstGateway && i > 0,
		Cluster: silo.ClusterOptions{
			Enabled: true, SiloAddress: "127.0.0.1:0", GossipAddress: "127.0.0.1:0",
			Seeds: seeds, Timings: c.opts.Timings, HandoffWait: time.Second,
		},
		Security: silo.Security{Secret: Secret},
	}
	if c.opts.Configure != nil {
		c.opts.Configure(i, &opts)
	}
	store := &killableStore{inner: c.store}
	s, err := silo.New(opts, append([]silo.Option{silo.WithLogger(c.opts.Logger), silo.WithStore(store)}, c.opts.SiloOptions...)...)
	if err != nil {
		c.t.Fatalf("testcluster: silo %d: %v", i, err)
	}
	if c.opts.Register != nil {
		if err := c.opts.Register(s); err != nil {
			c.t.Fatalf("testcluster: silo %d: register: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(gossipcut.NewContext(context.Background(), c.cut), c.opts.Timeout)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		c.t.Fatalf("testcluster: silo %d: start: %v", i, err)
	}
	gossip := ""
	if v, err := s.Members(); err == nil {
		if self, ok := v.Member(s.Name()); ok {
			gossip = self.GossipAddress
		}
	}
	c.mu.Lock()
	c.mu.silos = append(c.mu.silos, &member{silo: s, store: store})
	c.mu.gossip[i] = gossip
	c.mu.Unlock()
	c.WaitForMembership()
	return i
}

// Silo returns silo i, or nil when it was stopped or killed.
func (c *Cluster) Silo(i int) *silo.Silo {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.mu.silos) || c.mu.silos[i] == nil {
		return nil
	}
	return c.mu.silos[i].silo
}

// Live returns the indexes of the silos running.
func (c *Cluster) Live() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i, m := range c.mu.silos {
		if m != nil {
			out = append(out, i)
		}
	}
	return out
}

// Gateways returns the gateway addresses of the silos running.
func (c *Cluster) Gateways() []string {
	var out []string
	for _, i := range c.Live() {
		if s := c.Silo(i); s != nil && s.GatewayAddr() != nil {
			out = append(out, s.GatewayAddr().String())
		}
	}
	return out
}

// Client returns a client connected to the cluster's gateways, made on
// first use and closed when the test ends.
func (c *Cluster) Client() *client.Client {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.client == nil {
		c.mu.client = c.newClientLocked(client.Options{})
	}
	return c.mu.client
}

// NewClient returns another client of the cluster's gateways (opts.Gateways
// empty) or of the ones opts names, closed when the test ends.
func (c *Cluster) NewClient(opts client.Options, o ...client.Option) *client.Client {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.newClientLocked(opts, o...)
}

func (c *Cluster) newClientLocked(opts client.Options, o ...client.Option) *client.Client {
	if len(opts.Gateways) == 0 {
		for _, m := range c.mu.silos {
			if m != nil && m.silo.GatewayAddr() != nil {
				opts.Gateways = append(opts.Gateways, m.silo.GatewayAddr().String())
			}
		}
	}
	cl, err := client.New(opts, append([]client.Option{client.WithLogger(c.opts.Logger)}, o...)...)
	if err != nil {
		c.t.Fatalf("testcluster: client: %v", err)
	}
	c.t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// PlaceOn is a call option that places a new activation of the called
// grain on silo i; it does nothing to a grain already active.
func (c *Cluster) PlaceOn(i int) proxy.CallOption { return proxy.WithPlacementHint(Name(i)) }

// Locate returns the name of the silo that holds the grain's activation,
// asking a running silo's directory; found is false when it has none.
func (c *Cluster) Locate(ctx context.Context, id actor.GrainID) (silo string, found bool, err error) {
	for _, i := range c.Live() {
		if s := c.Silo(i); s != nil {
			return s.Locate(ctx, id)
		}
	}
	return "", false, errors.New("testcluster: no silo is running")
}

// Activations counts the activations of the grain on the running silos:
// 1 when the cluster keeps its invariant.
func (c *Cluster) Activations(id actor.GrainID) int {
	n := 0
	for _, i := range c.Live() {
		if s := c.Silo(i); s != nil && silohost.Host(s) != nil && silohost.Host(s).IsActive(id) {
			n++
		}
	}
	return n
}

// Stop stops silo i gracefully: its grains' state is flushed, its part of
// the directory handed over, and it leaves the membership.
func (c *Cluster) Stop(i int) error {
	m := c.take(i)
	if m == nil {
		return fmt.Errorf("testcluster: silo %d is not running", i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	return m.silo.Stop(ctx)
}

// Kill stops silo i as a crash would: its links and gossip die without a
// goodbye, the others learn of it from failure detection, and from then on
// it writes nothing to the shared store (what it had not written is lost).
// It returns the grains the silo hosted when it died: those whose
// activation held or sought its registration as the kill began, and those
// whose state the silo loaded, or tried to write, from then on. A list of
// its activations taken before the kill misses the grains activated while
// the kill was under way, which may have acknowledged calls the kill then
// lost, and those deactivating, whose last write the kill refused.
func (c *Cluster) Kill(i int) []actor.GrainID {
	m := c.take(i)
	if m == nil {
		c.t.Fatalf("testcluster: silo %d is not running", i)
		return nil
	}
	c.mu.Lock()
	c.mu.killed = append(c.mu.killed, m)
	c.mu.Unlock()
	m.store.record()
	var hosted []actor.GrainID
	if h := silohost.Host(m.silo); h != nil {
		hosted = h.Registered()
	}
	m.store.kill()
	silohooks.Kill(m.silo)
	for _, id := range m.store.recorded() {
		if !slices.Contains(hosted, id) {
			hosted = append(hosted, id)
		}
	}
	return hosted
}

func (c *Cluster) take(i int) *member {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.mu.silos) {
		return nil
	}
	m := c.mu.silos[i]
	c.mu.silos[i] = nil
	return m
}

// WaitForMembership waits until every running silo sees exactly the
// running silos, all active, and acts on that view: its directory has
// taken it, holds no range for a handoff or a rebuild, and keeps no lost
// silo's grains for its DeathGrace.
func (c *Cluster) WaitForMembership() {
	c.t.Helper()
	deadline := time.Now().Add(c.opts.Timeout)
	for {
		if c.converged() {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("testcluster: membership did not converge in %v", c.opts.Timeout)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition: memberlist has no "converged" event
	}
}

func (c *Cluster) converged() bool {
	c.mu.Lock()
	var running []*silo.Silo
	var names []string
	for _, m := range c.mu.silos {
		if m != nil {
			running = append(running, m.silo)
			names = append(names, m.silo.Name())
		}
	}
	c.mu.Unlock()
	slices.Sort(names)
	for _, s := range running {
		// The view the silo acts on, not only the one gossip brought: the
		// silo applies a view on a goroutine of its own, and a directory
		// still on an older one would gain ranges, and hold them, after
		// the cluster looked settled.
		var seen []string
		for _, m := range s.ClusterView().Members {
			if m.Status != cluster.StatusActive || m.State != cluster.StatusActive {
				return false
			}
			seen = append(seen, m.ID)
		}
		if !slices.Equal(seen, names) {
			return false
		}
		if d := s.Stats().Directory; d.Held != 0 || d.Mourning != 0 {
			return false // a range still waits for its handoff or rebuild, or a lost silo's grains for its grace
		}
	}
	return true
}

// close stops every silo still running.
func (c *Cluster) close() {
	c.mu.Lock()
	cl := c.mu.client
	c.mu.client = nil
	silos, killed := c.mu.silos, c.mu.killed
	c.mu.silos, c.mu.killed = nil, nil
	c.mu.Unlock()
	if cl != nil {
		_ = cl.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, m := range silos {
		if m != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := m.silo.Stop(ctx); err != nil {
					c.t.Errorf("testcluster: stop %s: %v", m.silo.Name(), err)
				}
			}()
		}
	}
	for _, m := range killed {
		if h := silohost.Host(m.silo); h != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A no-op when the kill's own stop finished.
				if err := h.Stop(ctx); err != nil {
					c.t.Errorf("testcluster: finish the stop of killed %s: %v", m.silo.Name(), err)
				}
			}()
		}
	}
	wg.Wait()
}

// ErrKilled is what a killed silo's store answers: the silo is dead, and
// writes nothing more.
var ErrKilled = errors.New("testcluster: the silo was killed")

// killableStore is a silo's way to the shared store, cut when the silo is
// killed. Each operation holds the read side of mu while it runs, and kill
// takes the write side: once kill returns, no write the silo began before
// it can still land, as none can from a process that has died. Without
// that, a write that passed the check just before the kill could land
// after the grain's next activation loaded its state, and that
// activation's own flush would then fail on the changed ETag.
type killableStore struct {
	inner  persistence.Store
	mu     sync.RWMutex
	killed bool
	// recording, once set, holds the grains whose state the silo read or
	// tried to write from then on, refused or not.
	recording atomic.Pointer[sync.Map] // actor.GrainID -> struct{}
}

func (s *killableStore) kill() {
	s.mu.Lock()
	s.killed = true
	s.mu.Unlock()
}

// record starts recording the grains whose state the silo reads or tries
// to write.
func (s *killableStore) record() { s.recording.Store(new(sync.Map)) }

// recorded returns the grains recorded since record.
func (s *killableStore) recorded() []actor.GrainID {
	var out []actor.GrainID
	if m := s.recording.Load(); m != nil {
		m.Range(func(k, _ any) bool {
			out = append(out, k.(actor.GrainID))
			return true
		})
	}
	return out
}

func (s *killableStore) touch(key persistence.Key) {
	if m := s.recording.Load(); m != nil {
		m.Store(actor.GrainID{Type: key.GrainType, Key: key.GrainKey}, struct{}{})
	}
}

func (s *killableStore) Read(ctx context.Context, key persistence.Key) ([]byte, string, error) {
	s.touch(key)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.killed {
		return nil, "", ErrKilled
	}
	return s.inner.Read(ctx, key)
}

func (s *killableStore) Write(ctx context.Context, key persistence.Key, data []byte, etag string) (string, error) {
	s.touch(key)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.killed {
		return "", ErrKilled
	}
	return s.inner.Write(ctx, key, data, etag)
}

func (s *killableStore) Delete(ctx context.Context, key persistence.Key, etag string) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.killed {
		return ErrKilled
	}
	return s.inner.Delete(ctx, key, etag)
}
