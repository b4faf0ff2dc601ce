package membership

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/directory"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/links"
	"github.com/granary-go/granary/internal/rpc"
)

// loadInterval is how often a silo publishes its activation count for
// placement (the membership rate-limits it further).
const loadInterval = time.Second

// Options are what the wiring needs of its silo.
type Options struct {
	// Self is the silo's name.
	Self string
	// Fence configures the minority fence.
	Fence FenceOptions
	// Links are the silo's links to other silos.
	Links *links.Links
	// Host returns the silo's activation host, nil when it has none.
	Host func() *host.Host
	// Go runs fn on a goroutine the silo owns, joined when it stops, and
	// fails once its stop has begun.
	Go func(fn func(ctx context.Context)) error
	// Stopping reports whether the silo's stop has begun.
	Stopping func() bool
	// Reachability, when set, replaces what the fence watches (for
	// tests): it gets the silo's name and its membership.
	Reachability func(self string, membership Reachability) Reachability
	// Clock and Log are the silo's.
	Clock clock.Clock
	Log   *slog.Logger
}

// Wiring is one silo's place in its cluster. Join sets it up; the view and
// the fence are safe for concurrent use from then on.
type Wiring struct {
	opts    Options
	fence   fenceState
	dir     *directory.Directory // set by Join
	members *cluster.Membership  // set by Join once the membership started

	mu   sync.Mutex
	view cluster.View // the latest membership view, the one the silo acts on
}

// New returns the wiring of a silo that has not joined.
func New(opts Options) *Wiring {
	w := &Wiring{opts: opts}
	base := time.Now()
	w.fence.elapsed = func() time.Duration { return time.Since(base) }
	w.fence.raised = make(chan struct{}, 1)
	return w
}

// Members returns the membership, or nil before Join started it.
func (w *Wiring) Members() *cluster.Membership { return w.members }

// View returns the membership view the silo acts on; the zero view before
// Join.
func (w *Wiring) View() cluster.View {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.view
}

// Address returns the silo-to-silo address of a member of the view.
func (w *Wiring) Address(silo string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m, ok := w.view.Member(silo)
	return m.Address, ok && m.Address != ""
}

// Join joins the membership described by co through its seeds, gives dir
// the view, follows it from then on, starts the fence, and announces the
// silo active. The membership is Members' from the moment it started,
// even when Join fails later, so that the silo can kill it.
func (w *Wiring) Join(ctx context.Context, dir *directory.Directory, co cluster.Options) error {
	w.dir = dir
	members, err := cluster.New(co, cluster.WithLogger(w.opts.Log))
	if err != nil {
		return fmt.Errorf("silo: membership: %w", err)
	}
	if err := members.Start(ctx); err != nil {
		return fmt.Errorf("silo: join: %w", err)
	}
	w.members = members
	view, sub := members.Subscribe()
	w.applyView(view)
	if err := w.opts.Go(func(ctx context.Context) { w.watch(ctx, sub) }); err != nil {
		sub.Close()
		return fmt.Errorf("silo: join: %w", err)
	}
	w.startFence(members)
	if err := members.SetStatus(cluster.StatusActive); err != nil {
		return fmt.Errorf("silo: join: %w", err)
	}
	w.applyView(w.viewWithSelf(cluster.StatusActive))
	peers := make([]string, 0, len(view.Members))
	for _, m := range view.Members {
		if m.ID != w.opts.Self {
			peers = append(peers, m.ID)
		}
	}
	w.opts.Log.Info("joined the cluster", slog.String("cluster", co.ClusterID),
		slog.String("gossip", members.GossipAddress()), slog.String("silo_address", co.Address), slog.Any("peers", peers))
	return nil
}

// viewWithSelf is the membership view with this silo's status as it just
// set it: the silo acts on its own announcement at once, before gossip
// brings it back.
func (w *Wiring) viewWithSelf(status cluster.Status) cluster.View {
	v := w.members.View()
	members := slices.Clone(v.Members)
	for i := range members {
		if members[i].ID == w.opts.Self {
			members[i].Status = status
		}
	}
	v.Members = members
	return v
}

// watch follows the membership: the directory's view, links to silos
// that joined and left, and this silo's published load.
func (w *Wiring) watch(ctx context.Context, sub *cluster.Subscription) {
	defer sub.Close()
	load := time.NewTicker(loadInterval)
	defer load.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-load.C:
			if h := w.opts.Host(); h != nil {
				w.members.SetLoad(int64(h.Stats().Active))
			}
			continue
		case _, ok := <-sub.Ready():
			if !ok {
				return
			}
		}
		events, err := sub.Take()
		if err != nil {
			return
		}
		if len(events) == 0 {
			continue
		}
		for _, ev := range events {
			w.opts.Log.Info("membership", slog.String("event", ev.Kind.String()), slog.String("peer", ev.Member.ID),
				slog.String("status", ev.Member.Status.String()), slog.Uint64("view", ev.Version))
		}
		w.applyView(w.members.View())
	}
}

// applyView moves the silo to a membership view: the directory takes it,
// links to silos no longer in it close, and links to new silos are dialled
// by the silo the tie-break says dials.
func (w *Wiring) applyView(v cluster.View) {
	if w.opts.Stopping() {
		// A leaving silo keeps its own status in the view it gives the
		// directory, whatever gossip says meanwhile.
		for i := range v.Members {
			if v.Members[i].ID == w.opts.Self {
				v.Members[i].Status = cluster.StatusShuttingDown
			}
		}
	}
	w.mu.Lock()
	w.view = v
	w.mu.Unlock()
	w.dir.SetView(v)
	keep := make(map[string]int64, len(v.Members))
	for _, m := range v.Members {
		keep[m.ID] = m.Generation
	}
	w.opts.Links.CloseExcept(keep)
	for _, m := range v.Members {
		if m.ID == w.opts.Self || m.ID > w.opts.Self {
			continue // the silo with the smaller name dials
		}
		if _, err := w.opts.Links.Link(m.ID); err != nil {
			w.opts.Links.LinkLater(m.ID, func(*rpc.Endpoint, error) {})
		}
	}
}

// AnnounceLeaving starts a graceful leave: the silo tells the cluster it
// is shutting down, so that no new activation is placed on it and its part
// of the directory moves to the others, and hands that part over. It does
// nothing for a silo that has not joined.
func (w *Wiring) AnnounceLeaving(ctx context.Context) {
	if w.members == nil {
		return
	}
	if err := w.members.SetStatus(cluster.StatusShuttingDown); err != nil {
		w.opts.Log.Warn("leave: announcing it failed", slog.Any("err", err))
	}
	w.applyView(w.viewWithSelf(cluster.StatusShuttingDown))
	if err := w.dir.Handover(ctx); err != nil {
		w.opts.Log.Warn("leave: handing the directory over failed; the new owners rebuild it", slog.Any("err", err))
	}
}

// Leave ends a graceful leave, once the silo's activations are gone: it
// waits for their unregistrations and leaves the membership. It does
// nothing for a silo that has not joined.
func (w *Wiring) Leave(ctx context.Context) {
	if w.members == nil {
		return
	}
	if err := w.dir.Wait(ctx); err != nil {
		w.opts.Log.Warn("leave: the directory's last requests did not finish", slog.Any("err", err))
	}
	if err := w.members.Stop(ctx); err != nil {
		w.opts.Log.Warn("leave: membership", slog.Any("err", err))
	}
	w.opts.Log.Info("left the cluster")
}

// Kill ends the membership without a goodbye (a no-op after Leave).
func (w *Wiring) Kill() {
	if w.members != nil {
		w.members.Kill()
	}
}
