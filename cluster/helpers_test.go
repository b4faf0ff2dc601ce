package cluster

import (
	"context"
	"log/slog"
	"sync"
)

// logRecord is what recordingHandler keeps of a log record.
type logRecord struct {
	level   slog.Level
	message string
	attrs   map[string]string
}

// recordingHandler is a slog.Handler that keeps every record, for tests
// that check what was logged.
type recordingHandler struct {
	mu      *sync.Mutex
	records *[]logRecord
	attrs   []slog.Attr
}

func newRecorder() (*slog.Logger, *recordingHandler) {
	h := &recordingHandler{mu: &sync.Mutex{}, records: &[]logRecord{}}
	return slog.New(h), h
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, message: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.records = append(*h.records, rec)
	return nil
}

func (h *recordingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return &c
}

func (h *recordingHandler) WithGroup(string) slog.Handler { return h }

// find returns the records for which match holds.
func (h *recordingHandler) find(match func(logRecord) bool) []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logRecord
	for _, r := range *h.records {
		if match(r) {
			out = append(out, r)
		}
	}
	return out
}
