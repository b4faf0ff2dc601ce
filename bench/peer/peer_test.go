package peer_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/bench"
	"github.com/granary-go/granary/bench/peer"
)

// quick are the options of the peers' tests: every scenario and overload,
// few operations.
func quick() bench.Options {
	o := bench.Options{Operations: 64, Repetitions: 2, WarmupPerHolder: 2, Revision: "test"}
	o.EnsureDefaults()
	return o
}

// measure runs the harness on s and checks its report.
func measure(t *testing.T, s bench.System, placed bool) *bench.Report {
	t.Helper()
	o := quick()
	rep := bench.Run(t.Context(), o, []bench.System{s}, nil, io.Discard)
	require.Empty(t, rep.Failures)
	require.Empty(t, rep.Notes)
	doc, err := json.Marshal(rep)
	require.NoError(t, err)
	want := bench.Expectation{Repetitions: o.Repetitions, Operations: o.Operations}
	if placed {
		want.Placement = []string{s.Name()}
	}
	require.NoError(t, bench.Check(doc, want))
	assert.Len(t, rep.Results, len(s.Cases(o.Matrix()))*o.Repetitions)
	return rep
}

func TestEchoAnswersEveryCall(t *testing.T) {
	e := peer.NewEcho()
	rep := measure(t, e, false)
	assert.Equal(t, bench.NoAlgorithm, rep.Results[0].Algorithm)
	assert.Len(t, e.Cases(quick().Matrix()), 3, "no context, no abandoned scenario")
	require.NoError(t, e.Stop(t.Context()), "Stop twice")
}

func TestXRateGrantsEveryAcquisition(t *testing.T) {
	measure(t, peer.XRate{}, false)
}

func TestProtoActorGrainsAnswerFromTheSecondMember(t *testing.T) {
	p := peer.NewProtoActor()
	if raceDetector {
		require.ErrorIs(t, p.Start(t.Context()), bench.ErrUnavailable)
		t.Skip("protoactor-go's remoting races under the race detector")
	}
	rep := measure(t, p, true)
	for _, r := range rep.Results {
		assert.True(t, r.PlacementVerified, "every grain checked on member 1")
	}
	require.NoError(t, p.Stop(t.Context()), "Stop twice")
}

func TestRedisRateAgainstALocalServer(t *testing.T) {
	if _, err := exec.LookPath(peer.DefaultRedisServer); err != nil {
		t.Skip("no redis-server installed (apt-get install redis-server)")
	}
	r := peer.NewRedisRate("")
	rep := measure(t, r, false)
	assert.Len(t, r.Cases(quick().Matrix()), 6, "both overloads: Allow takes a context")
	assert.Equal(t, bench.GCRA, rep.Results[0].Algorithm)
	require.NoError(t, r.Stop(t.Context()), "Stop twice")
}

func TestRedisRateWithoutAServerIsUnavailable(t *testing.T) {
	r := peer.NewRedisRate("no-such-redis-server")
	assert.ErrorIs(t, r.Start(t.Context()), bench.ErrUnavailable)
	assert.NoError(t, r.Stop(t.Context()))
}

func TestGubernatorRunsItsBinaryAndReadsItsReport(t *testing.T) {
	t.Setenv(fakeGubernator, "1")
	self, err := os.Executable()
	require.NoError(t, err)
	o := quick()
	o.Scenarios = []bench.Scenario{bench.HotKey}
	g := peer.NewGubernator(self, "")
	rep, err := g.Measure(t.Context(), o, io.Discard)
	require.NoError(t, err)
	require.NoError(t, g.Close(t.Context()))
	_, err = os.Stat(self)
	require.NoError(t, err, "Close removes only a binary it built")
	require.Len(t, rep.Results, o.Repetitions, "hot-key, the peer's one overload")
	for _, r := range rep.Results {
		assert.Equal(t, "gubernator", r.System)
		assert.Equal(t, bench.HotKey, r.Scenario)
		assert.Equal(t, o.Operations, r.Operations, "the options reach the process")
		assert.Equal(t, "test", r.Revision, "so does the revision")
	}
}

func TestGubernatorBuildsItsBinaryOnceAndCloseRemovesIt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the gubernator module")
	}
	t.Setenv("GOPROXY", "off") // from the module cache only: no network in tests
	module := peer.FindGubernatorModule(".")
	require.NotEmpty(t, module)
	if _, err := exec.Command("go", "-C", module, "list", "-m", "github.com/gubernator-io/gubernator/v2").Output(); err != nil {
		t.Skip("the gubernator module's dependencies are not in the module cache")
	}
	g := peer.NewGubernator("", module)
	o := quick()
	o.Scenarios, o.Overloads = []bench.Scenario{bench.Abandoned}, []bool{false} // a scenario gubernator has not: no cases
	var progress bytes.Buffer
	for range 2 {
		rep, err := g.Measure(t.Context(), o, &progress)
		require.NoError(t, err)
		assert.Empty(t, rep.Results)
	}
	assert.Equal(t, 1, strings.Count(progress.String(), "building the gubernator peer"))
	require.NoError(t, g.Close(t.Context()))
	require.NoError(t, g.Close(t.Context()), "Close twice")
}

func TestGubernatorWithNeitherBinaryNorModuleIsUnavailable(t *testing.T) {
	_, err := peer.NewGubernator("", "").Measure(t.Context(), quick(), io.Discard)
	assert.ErrorIs(t, err, bench.ErrUnavailable)
}

func TestGubernatorBinaryThatFailsIsAnError(t *testing.T) {
	_, err := peer.NewGubernator("false", "").Measure(t.Context(), quick(), io.Discard)
	require.Error(t, err)
	assert.NotErrorIs(t, err, bench.ErrUnavailable)
}

func TestFindGubernatorModuleLooksUpFromADirectory(t *testing.T) {
	root := t.TempDir()
	module := filepath.Join(root, "bench", "gubernator")
	require.NoError(t, os.MkdirAll(module, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(module, "go.mod"), []byte("module x\n"), 0o644))
	deep := filepath.Join(root, "a", "b")
	require.NoError(t, os.MkdirAll(deep, 0o755))
	assert.Equal(t, module, peer.FindGubernatorModule(deep))
	assert.Equal(t, "", peer.FindGubernatorModule(t.TempDir()))
}

func TestRedisRateWhoseServerExitsFailsAtOnce(t *testing.T) {
	r := peer.NewRedisRate("false") // a "server" that exits at once
	err := r.Start(t.Context())
	require.Error(t, err)
	assert.NotErrorIs(t, err, bench.ErrUnavailable)
	assert.Contains(t, err.Error(), "redis-server exited")
	assert.NoError(t, r.Stop(t.Context()))
}
