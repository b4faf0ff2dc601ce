package cluster

import (
	"context"
	"log"
	"log/slog"
	"strings"
)

// memberlistLogger returns a *log.Logger for memberlist's Config.Logger that
// writes every line to l, so that memberlist never prints to stderr.
func memberlistLogger(l *slog.Logger) *log.Logger {
	return log.New(memberlistLog{l}, "", 0)
}

// memberlistLog turns memberlist's "[LEVEL] memberlist: text" lines into
// slog records. memberlist reports at ERR what a membership protocol expects
// while a silo fails (probes and push-pulls to it failing), and granary's
// own events say what matters, so ERR lines become warnings.
type memberlistLog struct{ log *slog.Logger }

func (w memberlistLog) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\r\n")
	level := slog.LevelInfo
	for _, p := range memberlistLevels {
		if rest, ok := strings.CutPrefix(line, p.prefix); ok {
			line, level = rest, p.level
			break
		}
	}
	w.log.Log(context.Background(), level, line, "component", "memberlist")
	return len(p), nil
}

var memberlistLevels = []struct {
	prefix string
	level  slog.Level
}{
	{"[DEBUG] ", slog.LevelDebug},
	{"[INFO] ", slog.LevelInfo},
	{"[WARN] ", slog.LevelWarn},
	{"[ERR] ", slog.LevelWarn},
	{"[ERROR] ", slog.LevelWarn},
}
