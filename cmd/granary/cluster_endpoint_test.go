package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/redistest"
	"github.com/granary-go/granary/silo"
)

// stubView is a cluster view the test sets.
type stubView struct{ v silo.ClusterView }

func (s *stubView) ClusterView() silo.ClusterView { return s.v }

func viewOf(active, joining int) silo.ClusterView {
	v := silo.ClusterView{Self: "m0", Version: 9}
	for i := range active + joining {
		st := cluster.StatusActive
		if i >= active {
			st = cluster.StatusJoining
		}
		v.Members = append(v.Members, silo.MemberView{Member: cluster.Member{ID: "m" + strconv.Itoa(i), Status: st}, State: st})
	}
	return v
}

func decodeCluster(t *testing.T, body string) clusterAnswer {
	t.Helper()
	var got clusterAnswer
	require.NoError(t, json.Unmarshal([]byte(body), &got), body)
	return got
}

// A silo alone answers /cluster with itself: its name, gateway,
// generation, status and since when; other methods than GET are refused.
func TestClusterOfASiloAloneIsItself(t *testing.T) {
	s, err := silo.New(silo.Options{Name: "alone", GatewayAddress: "127.0.0.1:0"}, silo.WithLogger(quietLog))
	require.NoError(t, err)
	before := time.Now()
	require.NoError(t, s.Start(context.Background()))
	defer func() { require.NoError(t, s.Stop(context.Background())) }()
	mux := newMux("/api/", http.NotFoundHandler(), &readiness{silo: s}, http.NotFoundHandler())
	handleCluster(mux, s)

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/cluster", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	got := decodeCluster(t, rec.Body.String())
	assert.Equal(t, "alone", got.Self)
	assert.Zero(t, got.Version)
	require.Len(t, got.Members, 1)
	self := got.Members[0]
	assert.Equal(t, "alone", self.Name)
	assert.Equal(t, s.GatewayAddr().String(), self.GatewayAddress)
	assert.Empty(t, self.SiloAddress)
	assert.Equal(t, "active", self.Status)
	assert.Equal(t, "active", self.State)
	since, err := time.Parse(time.RFC3339, self.Since)
	require.NoError(t, err, "since is RFC 3339")
	assert.False(t, since.Before(before.Truncate(time.Second)), "since the start: %s", self.Since)
	gen, err := strconv.ParseInt(self.Generation, 10, 64)
	require.NoError(t, err)
	assert.Positive(t, gen)

	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(method, "/cluster", nil))
		assert.Equal(t, http.StatusMethodNotAllowed, rec.Code, method)
	}
}

// Every member of the view is in the answer, each field where
// docs/operations.md says.
func TestClusterAnswerListsEveryMember(t *testing.T) {
	since := time.Date(2030, 1, 2, 3, 4, 5, 600_000_000, time.FixedZone("east", 3600))
	view := &stubView{silo.ClusterView{Self: "a", Version: 12, Members: []silo.MemberView{
		{Member: cluster.Member{ID: "a", Generation: 1796156221764169887, Address: "10.0.0.1:11111", Gateway: "10.0.0.1:30000",
			GossipAddress: "10.0.0.1:7946", Status: cluster.StatusActive, Load: 3, Since: since}, State: cluster.StatusShuttingDown},
		{Member: cluster.Member{ID: "b", Generation: 7, Address: "10.0.0.2:11111", GossipAddress: "10.0.0.2:7946",
			Status: cluster.StatusJoining, Since: since}, State: cluster.StatusJoining},
	}}}
	mux := http.NewServeMux()
	handleCluster(mux, view)
	code, body := get(t, mux, "/cluster")
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"self": "a", "version": 12, "members": [
		{"name": "a", "silo_address": "10.0.0.1:11111", "gateway_address": "10.0.0.1:30000", "gossip_address": "10.0.0.1:7946",
		 "generation": "1796156221764169887", "status": "active", "state": "shutting-down", "since": "2030-01-02T02:04:05.6Z", "load": 3},
		{"name": "b", "silo_address": "10.0.0.2:11111", "gossip_address": "10.0.0.2:7946",
		 "generation": "7", "status": "joining", "state": "joining", "since": "2030-01-02T02:04:05.6Z", "load": 0}
	]}`, body)
}

// With -expect-silos, /readyz is not ready while the silo sees fewer
// active silos, and says how many it sees; the silo's own reason comes
// first.
func TestReadyzWaitsForTheExpectedSilos(t *testing.T) {
	stub, view := &stubSilo{}, &stubView{viewOf(2, 1)}
	mux := newMux("/api/", http.NotFoundHandler(), &readiness{silo: stub, expected: expectedSilos{n: 3, view: view}}, http.NotFoundHandler())

	code, body := get(t, mux, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "not ready: sees 2 of 3 expected silos\n", body, "a joining silo does not count")

	view.v = viewOf(3, 0)
	code, body = get(t, mux, "/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ready\n", body)

	view.v = viewOf(4, 0)
	code, _ = get(t, mux, "/readyz")
	assert.Equal(t, http.StatusOK, code, "more than expected is fine")

	stub.err = silo.ErrStopping
	_, body = get(t, mux, "/readyz")
	assert.Equal(t, "not ready: silo: stopping\n", body)

	stub.err = nil
	view.v = viewOf(1, 0)
	none := newMux("/api/", http.NotFoundHandler(), &readiness{silo: stub, expected: expectedSilos{view: view}}, http.NotFoundHandler())
	code, _ = get(t, none, "/readyz")
	assert.Equal(t, http.StatusOK, code, "no minimum by default")
}

// -expect-silos comes from the flag, the environment or the config file,
// and is checked.
func TestExpectSilosSetting(t *testing.T) {
	expect := func(args ...string) int {
		t.Helper()
		cfg, err := parseConfig(append(clusterFlags(t), args...), devNull(t))
		require.NoError(t, err)
		return cfg.flags.expectSilos
	}
	assert.Equal(t, 0, expect(), "no minimum by default")
	assert.Equal(t, 3, expect("-expect-silos", "3"))
	path := writeFile(t, "granary.yaml", "silo: {expect-silos: 5}\n")
	assert.Equal(t, 5, expect("-config", path), "the file's key")
	t.Setenv("GRANARY_EXPECT_SILOS", "4")
	assert.Equal(t, 4, expect("-config", path), "the environment over the file")
	assert.Equal(t, 2, expect("-config", path, "-expect-silos", "2"), "the command line over both")

	_, err := parseConfig(append(clusterFlags(t), "-expect-silos", "-1"), devNull(t))
	assert.ErrorContains(t, err, "-expect-silos must not be negative")
	_, err = parseConfig([]string{"-expect-silos", "2"}, devNull(t))
	assert.ErrorContains(t, err, "-expect-silos 2 needs -silo-address")
	t.Setenv("GRANARY_EXPECT_SILOS", "many")
	_, err = parseConfig(clusterFlags(t), devNull(t))
	assert.ErrorContains(t, err, `$GRANARY_EXPECT_SILOS "many"`)
}

// runUntilServing runs the binary's run with args until the silo serves,
// stops it, and returns what it logged.
func runUntilServing(t *testing.T, args ...string) string {
	t.Helper()
	logFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	defer logFile.Close()
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	defer outR.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-gateway", "127.0.0.1:0"}, args...), outW, logFile)
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	require.True(t, lines.Scan(), "the silo serves")
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("silo did not stop")
	}
	_, _ = io.Copy(io.Discard, outR)
	logs, err := os.ReadFile(logFile.Name())
	require.NoError(t, err)
	return string(logs)
}

// memoryStoreWarnings counts the start's warnings about the memory store.
func memoryStoreWarnings(logs string) int {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "memory store") {
			n++
		}
	}
	return n
}

// clusterFlags are the flags of a silo of a cluster: its address and the
// silos' credential, which a silo of a cluster needs.
func clusterFlags(t *testing.T) []string {
	t.Helper()
	return []string{"-silo-address", "127.0.0.1:0", "-secret-file", writeFile(t, "cluster.secret", "the cluster's secret of 32 bytes")}
}

// inCluster returns the flags of a silo that starts a cluster of its own
// on loopback.
func inCluster(t *testing.T) []string {
	return append(clusterFlags(t), "-gossip", "127.0.0.1:0", "-timings", "fast")
}

// A silo of a cluster on the memory store warns once, at start, that
// state and limits reset when a silo dies or a grain moves; a silo alone
// does not.
func TestTheMemoryStoreInAClusterWarnsOnce(t *testing.T) {
	logs := runUntilServing(t, inCluster(t)...)
	require.Equal(t, 1, memoryStoreWarnings(logs), logs)
	assert.Contains(t, logs, "reset when a silo dies or a grain moves")
	assert.Contains(t, logs, "-store redis://")

	logs = runUntilServing(t)
	assert.Zero(t, memoryStoreWarnings(logs), "a silo alone loses nothing to a move:\n%s", logs)
}

// A silo of a cluster on Redis does not warn about the memory store.
func TestASiloOfAClusterOnRedisDoesNotWarn(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	logs := runUntilServing(t, append(inCluster(t), "-store", srv.URL(3))...)
	assert.Zero(t, memoryStoreWarnings(logs), "Redis keeps the state:\n%s", logs)
	assert.Contains(t, logs, "level=INFO", "the log was read")
}

// Two silo processes of the built binary with -expect-silos 2: the first
// is not ready, and says why, until the second has joined; then each
// /cluster lists both, and /metrics counts them.
func TestSiloProcessesShowTheirClusterAndWaitForTheExpectedSilos(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs two processes")
	}
	bin := buildBinary(t)
	web := &http.Transport{}
	t.Cleanup(web.CloseIdleConnections)
	httpClient := &http.Client{Transport: web, Timeout: 5 * time.Second}
	fetch := func(port, path string) (int, string) {
		resp, err := httpClient.Get("http://" + port + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, err.Error()
		}
		return resp.StatusCode, string(body)
	}

	portA, portB := freeAddr(t), freeAddr(t)
	a, seed := startProcess(t, bin, "a", "", "-http", portA, "-expect-silos", "2")
	var body string
	require.Eventually(t, func() bool {
		_, body = fetch(portA, "/readyz")
		return body == "not ready: sees 1 of 2 expected silos\n"
	}, 30*time.Second, 20*time.Millisecond, "a serves but waits for b: %q", body)

	b, _ := startProcess(t, bin, "b", seed, "-http", portB, "-expect-silos", "2")
	for _, port := range []string{portA, portB} {
		require.Eventually(t, func() bool {
			code, _ := fetch(port, "/readyz")
			return code == http.StatusOK
		}, 30*time.Second, 20*time.Millisecond, "ready on %s", port)
	}
	for _, port := range []string{portA, portB} {
		code, body := fetch(port, "/cluster")
		require.Equal(t, http.StatusOK, code, body)
		got := decodeCluster(t, body)
		require.Len(t, got.Members, 2, body)
		for i, p := range []*process{a, b} {
			m := got.Members[i]
			assert.Equal(t, p.name, m.Name, body)
			assert.Equal(t, p.gateway, m.GatewayAddress, body)
			assert.Equal(t, "active", m.State, body)
			assert.NotEmpty(t, m.SiloAddress, body)
			assert.NotEmpty(t, m.GossipAddress, body)
		}
		assert.Positive(t, got.Version)
		_, metrics := fetch(port, "/metrics")
		assert.Regexp(t, `(?m)^granary_cluster_members\{silo="`+got.Self+`",state="active"\} 2$`, metrics)
		assert.Regexp(t, `(?m)^granary_cluster_members\{silo="`+got.Self+`",state="joining"\} 0$`, metrics)
	}

	require.NoError(t, b.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-b.exited, "b exits cleanly")
	require.Eventually(t, func() bool {
		_, body = fetch(portA, "/readyz")
		return body == "not ready: sees 1 of 2 expected silos\n"
	}, 30*time.Second, 20*time.Millisecond, "a sees b gone: %q", body)
}
