package testcluster_test

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
)

// logOnFailure returns a logger for the silos of a test that keeps their
// last lines in memory and prints them when the test fails: a churn test's
// failure is rare, and the silos' own account of it (views, rebuilds,
// handoffs) is what tells its cause.
func logOnFailure(t *testing.T, lines int) *slog.Logger {
	t.Helper()
	k := &keptLines{max: lines}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		t.Logf("the silos' last %d log lines:", len(k.lines))
		for _, l := range k.lines {
			t.Log(l)
		}
	})
	return slog.New(slog.NewTextHandler(k, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// keptLines is an io.Writer that keeps the last max lines written to it.
type keptLines struct {
	max int
	mu  sync.Mutex
	buf bytes.Buffer
	// lines is a window of the last max lines, oldest first.
	lines []string
}

func (k *keptLines) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.buf.Write(p)
	for {
		i := bytes.IndexByte(k.buf.Bytes(), '\n')
		if i < 0 {
			break
		}
		k.lines = append(k.lines, string(k.buf.Next(i + 1)[:i]))
		if len(k.lines) > k.max {
			k.lines = k.lines[len(k.lines)-k.max:]
		}
	}
	return len(p), nil
}
