package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/granary-go/granary/clock"
)

// Logger writes log lines at most as fast as its token bucket allows. It is
// safe for concurrent use.
type Logger struct {
	log   *slog.Logger
	clock clock.Clock

	mu struct {
		sync.Mutex
		bucket     *rate.Limiter
		suppressed uint64 // dropped since the last line written
		total      uint64 // dropped since New
	}
}

// New returns a Logger that writes to log a burst of lines and then one line
// per interval. A nil log means slog.Default(), a nil clock the real one;
// burst below 1 counts as 1, and an interval of zero or less lets every line
// through.
func New(log *slog.Logger, c clock.Clock, burst int, interval time.Duration) *Logger {
	if log == nil {
		log = slog.Default()
	}
	if c == nil {
		c = clock.Real{}
	}
	limit := rate.Inf
	if interval > 0 {
		limit = rate.Every(interval)
	}
	l := &Logger{log: log, clock: c}
	l.mu.bucket = rate.NewLimiter(limit, max(burst, 1))
	return l
}

// Log writes one line unless the bucket is empty, and reports whether it did.
// A line written after some were dropped carries their number as the
// attribute "suppressed".
func (l *Logger) Log(level slog.Level, msg string, attrs ...slog.Attr) bool {
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return false // a disabled level spends no tokens and counts nothing
	}
	l.mu.Lock()
	if !l.mu.bucket.AllowN(l.clock.Now(), 1) {
		l.mu.suppressed++
		l.mu.total++
		l.mu.Unlock()
		return false
	}
	suppressed := l.mu.suppressed
	l.mu.suppressed = 0
	l.mu.Unlock()
	if suppressed > 0 {
		attrs = append(attrs, slog.Uint64("suppressed", suppressed))
	}
	l.log.LogAttrs(ctx, level, msg, attrs...)
	return true
}

// Suppressed returns how many lines the Logger has dropped since New.
func (l *Logger) Suppressed() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.total
}
