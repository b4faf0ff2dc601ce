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

	"github.com/granary-go/granary/internal/dashboard/dashboardpb"
	"github.com/granary-go/granary/internal/silohost"
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
	DefaultPeerTimeout = time.Second
)

// ErrInvalidOptions is wrapped by every problem Options.Validate reports.
var ErrInvalidOptions = errors.New("dashboard: invalid options")

//go:embed assets
var assets embed.FS

// Options are the dashboard's settings; zero fields take the defaults.
type Options struct {
	// MinInterval is the shortest time between two snapshots of one page,
	// and between two builds of the silo's own part that its pages and
	// the other silos' pages ask for; requests in between get the last
	// one. Default DefaultMinInterval.
	MinInterval time.Duration
	// MaxKeys bounds the limiter grains asked for their statistics per
	// build of the silo's part. Default DefaultMaxKeys.
	MaxKeys int
	// Hottest is how many keys the snapshot lists, and each silo's part.
	// Default DefaultHottest.
	Hottest int
	// CallTimeout bounds each statistics or configuration call. Default
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// PeerTimeout bounds the wait for another silo's part: a silo that has
	// not answered by then is shown as not answering. Default
	// DefaultPeerTimeout.
	PeerTimeout time.Duration
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
	if o.PeerTimeout == 0 {
		o.PeerTimeout = DefaultPeerTimeout
	}
}

// Validate reports every problem with o, or nil.
func (o Options) Validate() error {
	var errs []error
	if o.MinInterval < 0 {
		errs = append(errs, fmt.Errorf("%w: MinInterval %v is negative", ErrInvalidOptions, o.MinInterval))
	}
	if o.MaxKeys < 0 || o.Hottest < 0 || o.Hottest > o.MaxKeys || o.Hottest > maxHottest {
		errs = append(errs, fmt.Errorf("%w: want 0 <= Hottest (%d) <= MaxKeys (%d), Hottest <= %d", ErrInvalidOptions, o.Hottest, o.MaxKeys, maxHottest))
	}
	if o.CallTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%w: CallTimeout %v must be positive", ErrInvalidOptions, o.CallTimeout))
	}
	if o.PeerTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%w: PeerTimeout %v must be positive", ErrInvalidOptions, o.PeerTimeout))
	}
	return errors.Join(errs...)
}

// Dashboard serves the pages of one silo, which show the whole cluster:
// it builds the silo's own part, answers the other silos' requests for it
// over the links between silos, and gathers theirs. It is safe for
// concurrent use.
type Dashboard struct {
	silo     *silo.Silo
	gatherer prometheus.Gatherer
	opts     Options
	now      func() time.Time
	// view is the silo's view of its cluster, and ask returns another
	// silo's part over the links (seams for tests).
	view  func() silo.ClusterView
	build func(ctx context.Context, keys bool) *dashboardpb.SnapshotReply // the silo's part; buildPart
	ask   func(ctx context.Context, peer string, keys bool) (*dashboardpb.SnapshotReply, error)

	parts [2]shared[*dashboardpb.SnapshotReply] // the silo's own part, without and with keys
	pages [2]shared[[]byte]                     // the encoded snapshots of the public and admin pages

	serving struct {
		sync.Mutex
		closed   bool
		inFlight int
		wg       sync.WaitGroup
	}
}

// New returns the dashboard of s, reading call counts and latencies from
// gatherer (the registry of the silo's OpenTelemetry exporter; nil: none
// shown). It must be called before s starts: it adds the service that
// answers the other silos' requests for this silo's part. It does no I/O.
// Close ends it.
func New(s *silo.Silo, gatherer prometheus.Gatherer, opts Options) (*Dashboard, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("%w: no silo", ErrInvalidOptions)
	}
	d := &Dashboard{silo: s, gatherer: gatherer, opts: opts, now: time.Now}
	d.view, d.build, d.ask = s.ClusterView, d.buildPart, d.askPeer
	if err := silohost.ServeSystem(s, dashboardpb.StatsGrainType, d.serve); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	return d, nil
}

// Close refuses the other silos' requests from now on and waits for those
// being answered (a few seconds at most: each build of the part for
// another silo has a budget). Safe to call twice.
func (d *Dashboard) Close() {
	d.serving.Lock()
	d.serving.closed = true
	d.serving.Unlock()
	d.serving.wg.Wait()
}

// Register routes GET Path (the page and its assets) and GET SnapshotPath
// on mux. showKeys adds the hottest limiter keys: for the admin port
// only, since keys name the callers.
func (d *Dashboard) Register(mux *http.ServeMux, showKeys bool) {
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
	mux.HandleFunc("GET "+SnapshotPath, func(w http.ResponseWriter, r *http.Request) {
		body, err := d.encoded(r.Context(), showKeys)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})
}

// encoded returns the page's last snapshot if it is recent, else a new
// one.
func (d *Dashboard) encoded(ctx context.Context, showKeys bool) ([]byte, error) {
	return d.pages[index(showKeys)].get(ctx, d.now, d.opts.MinInterval, func(ctx context.Context) []byte {
		body, err := json.Marshal(d.Snapshot(ctx, showKeys))
		if err != nil { // the peers' numbers are checked finite: cannot happen
			body, _ = json.Marshal(map[string]string{"error": err.Error()})
		}
		return append(body, '\n')
	})
}

func index(keys bool) int {
	if keys {
		return 1
	}
	return 0
}

// shared is a value built at most once per interval, by one builder at a
// time: whoever asks meanwhile waits for that build, within their ctx.
type shared[T any] struct {
	mu       sync.Mutex
	value    T
	ok       bool
	built    time.Time
	building chan struct{} // closed when the build under way ends
}

// get returns the value if it was built less than interval ago, else
// builds it with build. A value whose build saw ctx end is not kept.
func (s *shared[T]) get(ctx context.Context, now func() time.Time, interval time.Duration, build func(context.Context) T) (T, error) {
	for {
		s.mu.Lock()
		if s.ok && now().Sub(s.built) < interval {
			v := s.value
			s.mu.Unlock()
			return v, nil
		}
		if wait := s.building; wait != nil {
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				var zero T
				return zero, fmt.Errorf("dashboard: %w", ctx.Err())
			}
		}
		done := make(chan struct{})
		s.building = done
		s.mu.Unlock()
		return s.build(ctx, now, build, done), nil
	}
}

func (s *shared[T]) build(ctx context.Context, now func() time.Time, build func(context.Context) T, done chan struct{}) T {
	defer func() {
		s.mu.Lock()
		s.building = nil
		s.mu.Unlock()
		close(done)
	}()
	v := build(ctx)
	if ctx.Err() == nil {
		s.mu.Lock()
		s.value, s.ok, s.built = v, true, now()
		s.mu.Unlock()
	}
	return v
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
