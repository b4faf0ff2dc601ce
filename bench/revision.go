package bench

import (
	"context"
	"os/exec"
	"runtime/debug"
	"strings"
)

// DetectRevision returns the revision the running binary was built from:
// its build information's VCS revision when it has one (binaries built with
// go build in a checkout), else what `git rev-parse HEAD` says in the
// working directory (go run and test binaries carry no VCS stamp). A
// revision with local changes ends in "-dirty". It returns "unknown" when
// neither answers.
func DetectRevision(ctx context.Context) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		if rev, ok := buildRevision(info.Settings); ok {
			return rev
		}
	}
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	rev := strings.TrimSpace(string(out))
	status, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output()
	if err == nil && len(strings.TrimSpace(string(status))) > 0 {
		rev += "-dirty"
	}
	return rev
}

// buildRevision reads the VCS revision from build settings.
func buildRevision(settings []debug.BuildSetting) (string, bool) {
	var rev string
	var modified bool
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return "", false
	}
	if modified {
		rev += "-dirty"
	}
	return rev, true
}
