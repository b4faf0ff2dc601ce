package envoyrls

import (
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/granary-go/granary/clock"
)

// DefaultReloadInterval is how often a Watcher looks at its files unless
// told otherwise.
const DefaultReloadInterval = 5 * time.Second

// Watcher keeps a server's configuration in step with its files: it looks
// at them every interval and loads them when their contents changed. A
// configuration with problems is refused, every problem logged, and the
// one in use stays. Polling the contents, rather than watching events,
// sees every way a file changes: written in place, replaced by a rename,
// a Kubernetes ConfigMap's symlink swap.
type Watcher struct {
	path     string
	server   *Server
	interval time.Duration
	clock    clock.Clock
	log      *slog.Logger

	running sync.WaitGroup // a check that a timer started
	mu      struct {
		sync.Mutex
		timer   clock.Timer
		stopped bool
		seen    [sha256.Size]byte // the contents last loaded or refused
		lastErr error
	}
}

// WatchOption adjusts a Watcher.
type WatchOption func(*Watcher)

// WithClock makes the watcher time its looks with c.
func WithClock(c clock.Clock) WatchOption { return func(w *Watcher) { w.clock = c } }

// WithLogger makes the watcher log reloads and refusals to l.
func WithLogger(l *slog.Logger) WatchOption { return func(w *Watcher) { w.log = l } }

// NewWatcher returns a watcher of the configuration at path (a file or a
// directory, as Load reads) for server, looking every interval (0: only
// when Check is called).
func NewWatcher(path string, server *Server, interval time.Duration, opts ...WatchOption) *Watcher {
	w := &Watcher{path: path, server: server, interval: interval, clock: clock.Real{}, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(w)
	}
	return w
}

// Start loads the configuration, failing with its problems when it has
// some, and then looks at it every interval until Stop.
func (w *Watcher) Start() error {
	sum, err := fingerprint(w.path)
	if err != nil {
		return err
	}
	c, err := Load(w.path)
	if err != nil {
		return err
	}
	w.server.SetConfig(c)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.seen = sum
	w.schedule()
	return nil
}

// schedule arms the next look; w.mu is held.
func (w *Watcher) schedule() {
	if w.interval <= 0 || w.mu.stopped {
		return
	}
	w.running.Add(1)
	w.mu.timer = w.clock.AfterFunc(w.interval, func() {
		defer w.running.Done()
		_, _ = w.Check()
		w.mu.Lock()
		defer w.mu.Unlock()
		w.schedule()
	})
}

// Check looks at the files once and loads them when they changed since
// the last load or refusal. It reports whether a new configuration is in
// use, and the problems of one it refused.
func (w *Watcher) Check() (bool, error) {
	sum, err := fingerprint(w.path)
	if err != nil {
		w.refused(err)
		return false, err
	}
	w.mu.Lock()
	same := sum == w.mu.seen
	w.mu.Unlock()
	if same {
		return false, nil
	}
	c, err := Load(w.path)
	w.mu.Lock()
	w.mu.seen, w.mu.lastErr = sum, err
	w.mu.Unlock()
	if err != nil {
		w.refused(err)
		return false, err
	}
	w.server.SetConfig(c)
	w.log.Info("envoy rate limit configuration reloaded", "path", w.path, "domains", c.Domains())
	return true, nil
}

func (w *Watcher) refused(err error) {
	w.mu.Lock()
	w.mu.lastErr = err
	w.mu.Unlock()
	w.log.Error("envoy rate limit configuration refused; the one in use stays", "path", w.path, "err", err)
}

// LastError returns the problems of the last configuration refused since
// the last one loaded; nil when the files in use are the latest.
func (w *Watcher) LastError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.lastErr
}

// Stop ends the looks and waits for one that is running. It is safe to
// call more than once.
func (w *Watcher) Stop() {
	w.mu.Lock()
	w.mu.stopped = true
	if w.mu.timer != nil && w.mu.timer.Stop() {
		w.running.Done() // the look it armed will not run
	}
	w.mu.timer = nil
	w.mu.Unlock()
	w.running.Wait()
}

// fingerprint hashes the names and contents of the configuration's files.
func fingerprint(path string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	files, err := configFiles(path)
	if err != nil {
		return sum, err
	}
	h := sha256.New()
	for _, f := range files {
		file, err := os.Open(f)
		if err != nil {
			return sum, errors.Join(ErrInvalidConfig, err)
		}
		_, _ = io.WriteString(h, f+"\x00")
		_, err = io.Copy(h, file)
		_ = file.Close()
		if err != nil {
			return sum, errors.Join(ErrInvalidConfig, err)
		}
		_, _ = h.Write([]byte{0})
	}
	h.Sum(sum[:0])
	return sum, nil
}
