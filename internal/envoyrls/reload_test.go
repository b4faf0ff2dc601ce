package envoyrls_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/envoyrls"
)

// TestReloadFollowsTheFileAndKeepsTheLastGoodConfig: the watcher loads a
// changed file at its next look; a file with problems is refused, the
// configuration in use stays, and a fixed file is loaded again.
func TestReloadFollowsTheFileAndKeepsTheLastGoodConfig(t *testing.T) {
	r := startRLS(t, envoyrls.Options{})
	path := filepath.Join(t.TempDir(), "rules.yaml")
	write := func(body string) { require.NoError(t, os.WriteFile(path, []byte(body), 0o600)) }
	write("domain: web\ndescriptors: [{key: path, rate_limit: {unit: hour, requests_per_unit: 5}}]\n")

	watchClock := clock.NewFake(epoch)
	w := envoyrls.NewWatcher(path, r.server, time.Second, envoyrls.WithClock(watchClock))
	require.NoError(t, w.Start())
	defer w.Stop()
	req := ds(d("path", "/a"))
	step{domain: "web", descriptors: req, overall: ok, statuses: []status{within(5, hour, 4)}}.check(t, r)

	// A rename over the file, as editors and ConfigMaps replace files.
	next := path + ".new"
	require.NoError(t, os.WriteFile(next, []byte("domain: web\ndescriptors: [{key: path, rate_limit: {unit: hour, requests_per_unit: 2}}]\n"), 0o600))
	require.NoError(t, os.Rename(next, path))
	step{domain: "web", descriptors: req, overall: ok, statuses: []status{within(5, hour, 3)}}.check(t, r) // not looked at yet
	before := r.server.Config()
	watchClock.Advance(time.Second)
	require.NotSame(t, before, r.server.Config())
	// The grain takes the new options: its quota starts afresh.
	step{domain: "web", descriptors: req, overall: ok, statuses: []status{within(2, hour, 1)}}.check(t, r)

	write("domain: web\ndescriptors: [{key: path, rate_limit: {unit: hour, requests_per_unit: 2, algorithm: nope}}]\n")
	inUse := r.server.Config()
	watchClock.Advance(time.Second)
	require.ErrorContains(t, w.LastError(), `algorithm "nope"`)
	require.Same(t, inUse, r.server.Config())
	step{domain: "web", descriptors: req, overall: ok, statuses: []status{within(2, hour, 0)}}.check(t, r)

	// Looking again at the same bad file changes nothing and logs nothing new.
	changed, err := w.Check()
	require.False(t, changed)
	require.NoError(t, err)

	write("domain: web\n")
	watchClock.Advance(time.Second)
	require.NoError(t, w.LastError())
	step{domain: "web", descriptors: req, overall: ok, statuses: []status{noLimit}}.check(t, r)

	w.Stop()
	w.Stop()
	require.Zero(t, watchClock.Pending(), "a stopped watcher arms no look")
}

// TestStartRefusesABadFile: the first load is Start's, and a file with
// problems fails it, so that the binary does not start on it.
func TestStartRefusesABadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	require.NoError(t, os.WriteFile(path, []byte("descriptors: []\n"), 0o600))
	s := envoyrls.NewServer(nil, envoyrls.Options{})
	w := envoyrls.NewWatcher(path, s, time.Second, envoyrls.WithClock(clock.NewFake(epoch)))
	require.ErrorContains(t, w.Start(), "the domain is empty")
	require.Nil(t, s.Config())
}
