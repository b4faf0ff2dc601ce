package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/silo"
)

// Path is where the page is mounted; the snapshot is SnapshotPath.
const (
	Path         = "/dashboard/"
	SnapshotPath = Path + "snapshot.json"
)

// Defaults of Options.
const (
	DefaultMinInterval = time.Second
	DefaultMaxKeys     = 256
	DefaultHottest     = 10
	DefaultCallTimeout = 2 * time.Second
)

// ErrInvalidOptions is wrapped by every problem Options.Validate reports.
var ErrInvalidOptions = errors.New("dashboard: invalid options")

//go:embed assets
var assets embed.FS

// Options are the dashboard's settings; zero fields take the defaults.
type Options struct {
	// ShowKeys adds the hottest limiter keys to the snapshot: for the
	// admin port only, since keys name the callers.
	ShowKeys bool
	// MinInterval is the shortest time between two snapshots; requests in
	// between get the last one. Default DefaultMinInterval.
	MinInterval time.Duration
	// MaxKeys bounds the limiter grains asked for their statistics per
	// snapshot. Default DefaultMaxKeys.
	MaxKeys int
	// Hottest is how many keys the snapshot lists. Default DefaultHottest.
	Hottest int
	// CallTimeout bounds each statistics or configuration call. Default
	// DefaultCallTimeout.
	CallTimeout time.Duration
}

// EnsureDefaults replaces every zero field with its default.
func (o *Options) EnsureDefaults() {
	if o.MinInterval == 0 {
		o.MinInterval = DefaultMinInterval
	}
	if o.MaxKeys == 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	if o.Hottest == 0 {
		o.Hottest = DefaultHottest
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = DefaultCallTimeout
	}
}

// Validate reports every problem with o, or nil.
func (o Options) Validate() error {
	var errs []error
	if o.MinInterval < 0 {
		errs = append(errs, fmt.Errorf("%w: MinInterval %v is negative", ErrInvalidOptions, o.MinInterval))
	}
	if o.MaxKeys < 0 || o.Hottest < 0 || o.Hottest > o.MaxKeys {
		errs = append(errs, fmt.Errorf("%w: want 0 <= Hottest (%d) <= MaxKeys (%d)", ErrInvalidOptions, o.Hottest, o.MaxKeys))
	}
	if o.CallTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%w: CallTimeout %v must be positive", ErrInvalidOptions, o.CallTimeout))
	}
	return errors.Join(errs...)
}

// Dashboard serves the page and its snapshots for one silo. It is safe
// for concurrent use.
type Dashboard struct {
	silo      *silo.Silo
	gatherer  prometheus.Gatherer
	opts      Options
	now       func() time.Time
	mu        sync.Mutex // held while a snapshot is built: one at a time
	last      []byte     // the last snapshot, encoded
	lastBuilt time.Time
}

// New returns a dashboard of s, reading call counts and latencies from
// gatherer (the registry of the silo's OpenTelemetry exporter; nil: none
// shown). It does no I/O.
func New(s *silo.Silo, gatherer prometheus.Gatherer, opts Options) (*Dashboard, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("%w: no silo", ErrInvalidOptions)
	}
	return &Dashboard{silo: s, gatherer: gatherer, opts: opts, now: time.Now}, nil
}

// Register routes GET Path (the page and its assets) and GET SnapshotPath
// on mux.
func (d *Dashboard) Register(mux *http.ServeMux) {
	static, _ := fs.Sub(assets, "assets") // the directory is embedded
	files := http.StripPrefix(Path, http.FileServerFS(static))
	mux.HandleFunc("GET "+Path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /dashboard", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Path, http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET "+SnapshotPath, d.serveSnapshot)
}

func (d *Dashboard) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	body, err := d.encoded(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// encoded returns the last snapshot if it is recent, else a new one.
func (d *Dashboard) encoded(ctx context.Context) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last != nil && d.now().Sub(d.lastBuilt) < d.opts.MinInterval {
		return d.last, nil
	}
	snap := d.Snapshot(ctx)
	body, err := json.Marshal(snap)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	d.last, d.lastBuilt = append(body, '\n'), d.now()
	return d.last, nil
}

// Snapshot is what the page shows, as the JSON of SnapshotPath.
type Snapshot struct {
	// Self is this silo's name; Time when the snapshot was built.
	Self string    `json:"self"`
	Time time.Time `json:"time"`
	// Version is the membership view's version; Members as /cluster.
	Version uint64   `json:"version"`
	Members []Member `json:"members"`
	// Activations are this silo's, by grain type, sorted by type.
	Activations []TypeCount `json:"activations"`
	// Calls are this silo's grain calls, by type and method, from its
	// instruments; empty without a gatherer.
	Calls []MethodCalls `json:"calls"`
	// Limiters are the totals of this silo's limiter grains, absent when
	// the silo has none registered.
	Limiters *LimiterTotals `json:"limiters,omitempty"`
	// Keys are the hottest limiter keys of this silo, on the admin port
	// only.
	Keys *KeyTable `json:"keys,omitempty"`
}

// TypeCount is a number of activations of a grain type.
type TypeCount struct {
	Type  string `json:"type"`
	Count int    `json:"count"`
}

// LimiterTotals are ratelimit.SiloStats: what the silo's limiter grains
// answered to acquisitions since it started.
type LimiterTotals struct {
	Granted   uint64 `json:"granted"`
	Rejected  uint64 `json:"rejected"`
	Queued    uint64 `json:"queued"`
	Expired   uint64 `json:"expired"`
	Cancelled uint64 `json:"cancelled"`
	Waiting   int64  `json:"waiting"`
}

// Snapshot builds a snapshot now, whatever MinInterval says; the
// statistics calls end with ctx.
func (d *Dashboard) Snapshot(ctx context.Context) Snapshot {
	v := d.silo.ClusterView()
	snap := Snapshot{Self: v.Self, Time: d.now().UTC(), Version: v.Version, Members: MembersOf(v)}
	active := d.activeGrains()
	snap.Activations = activationsByType(active)
	if d.gatherer != nil {
		snap.Calls = callsOf(d.gatherer)
	}
	if st, ok := ratelimit.SiloStats(d.silo); ok {
		snap.Limiters = &LimiterTotals{Granted: st.Granted, Rejected: st.Rejected, Queued: st.Queued,
			Expired: st.Expired, Cancelled: st.Cancelled, Waiting: st.Waiting}
	}
	if d.opts.ShowKeys {
		snap.Keys = d.hottestKeys(ctx, active)
	}
	return snap
}

// Member is one silo of the cluster as this silo sees it: /cluster's
// member, which the dashboard shows.
type Member struct {
	Name           string `json:"name"`
	SiloAddress    string `json:"silo_address,omitempty"`
	GatewayAddress string `json:"gateway_address,omitempty"`
	GossipAddress  string `json:"gossip_address,omitempty"`
	// Generation is a decimal string: Unix nanoseconds are more than a
	// JSON number holds exactly in JavaScript.
	Generation string `json:"generation"`
	Status     string `json:"status"`
	State      string `json:"state"`
	Since      string `json:"since"`
	Load       int64  `json:"load"`
}

// MembersOf lists the members of v, sorted by name as v is.
func MembersOf(v silo.ClusterView) []Member {
	out := make([]Member, 0, len(v.Members))
	for _, m := range v.Members {
		out = append(out, Member{
			Name: m.ID, SiloAddress: m.Address, GatewayAddress: m.Gateway, GossipAddress: m.GossipAddress,
			Generation: strconv.FormatInt(m.Generation, 10),
			Status:     m.Status.String(), State: m.State.String(),
			Since: m.Since.UTC().Format(time.RFC3339Nano), Load: m.Load,
		})
	}
	return out
}
