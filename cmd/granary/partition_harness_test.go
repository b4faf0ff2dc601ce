package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/examples/counter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/internal/netns"
	"github.com/granary-go/granary/persistence"
)

// The partition tests run silo processes of the built binary, each in a
// network namespace of its own (package netns), and clients in the test's
// namespace that call through every silo's gateway and HTTP port while a
// silo is cut off, healed, and cut again. What follows is their harness: the
// processes, what each silo sees of the cluster, and the clients' ledgers.

// Every silo listens on the same ports of its own address.
const (
	nsSiloPort    = "11111"
	nsGossipPort  = "7946"
	nsGatewayPort = "30000"
	nsHTTPPort    = "8080"
)

// nsSilo is one silo process in its own namespace.
type nsSilo struct {
	name    string
	node    *netns.Node
	gateway string
	http    string
	cmd     *exec.Cmd
	exited  chan struct{}

	mu struct {
		sync.Mutex
		conflicts int      // state write conflicts logged
		stderr    []string // the last lines, for a failure
	}
}

// startNSSilo starts a silo named name in node's namespace, seeded with
// every silo's gossip address (its own included), and kills it in cleanup.
func startNSSilo(t *testing.T, n *netns.Network, bin string, node *netns.Node, seeds []string, extra ...string) *nsSilo {
	t.Helper()
	host := node.Addr.String()
	s := &nsSilo{
		name:    node.Name,
		node:    node,
		gateway: net.JoinHostPort(host, nsGatewayPort),
		http:    net.JoinHostPort(host, nsHTTPPort),
		exited:  make(chan struct{}),
	}
	args := []string{
		"-name", node.Name,
		"-silo-address", net.JoinHostPort(host, nsSiloPort),
		"-gossip", net.JoinHostPort(host, nsGossipPort),
		"-gateway", s.gateway,
		"-http", s.http,
		"-seeds", strings.Join(seeds, ","),
		"-secret-file", writeFile(t, "cluster.secret", "the cluster's secret of 32 bytes"),
	}
	s.cmd = n.Command(node, bin, append(args, extra...)...)
	stderr, err := s.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, s.cmd.Start())
	go func() {
		defer close(s.exited)
		lines := bufio.NewScanner(stderr)
		for lines.Scan() {
			s.logged(lines.Text())
		}
		_ = s.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.exited
		if t.Failed() {
			s.mu.Lock()
			t.Logf("silo %s, last lines of its log:\n%s", s.name, strings.Join(s.mu.stderr, "\n"))
			s.mu.Unlock()
		}
	})
	return s
}

// stop stops the silo gracefully (SIGTERM: it flushes its grains' state)
// and waits for it to exit.
func (s *nsSilo) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("silo %s did not stop within 30 s", s.name)
	}
}

// logged takes one line of the silo's log.
func (s *nsSilo) logged(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.stderr = append(s.mu.stderr, line)
	if len(s.mu.stderr) > 40 {
		s.mu.stderr = s.mu.stderr[1:]
	}
	if strings.Contains(line, "grain state write conflicted") {
		s.mu.conflicts++
	}
}

// view is the silos this silo sees active, itself included, sorted, as
// its /cluster says; nil when it does not answer.
func (s *nsSilo) view(web *http.Client) []string {
	resp, err := web.Get("http://" + s.http + "/cluster")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var answer struct {
		Members []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"members"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&answer) != nil {
		return nil
	}
	var out []string
	for _, m := range answer.Members {
		if m.State == "active" {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return out
}

func (s *nsSilo) conflicts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.conflicts
}

// oneView reports whether every silo sees exactly the silos named.
func oneView(web *http.Client, silos []*nsSilo) bool {
	want := make([]string, 0, len(silos))
	for _, s := range silos {
		want = append(want, s.name)
	}
	slices.Sort(want)
	for _, s := range silos {
		if !slices.Equal(s.view(web), want) {
			return false
		}
	}
	return true
}

// views describes what each silo sees, for logs and failures.
func views(web *http.Client, silos []*nsSilo) string {
	var parts []string
	for _, s := range silos {
		parts = append(parts, fmt.Sprintf("%s sees %v", s.name, s.view(web)))
	}
	return strings.Join(parts, "; ")
}

// ready asks the silo's /readyz; any failure to answer is not ready.
func (s *nsSilo) ready(web *http.Client) bool {
	resp, err := web.Get("http://" + s.http + "/readyz")
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// counterLedger is what the counter clients saw: per key, every value an
// acknowledged Add returned, and the count of Adds sent and acknowledged.
type counterLedger struct {
	mu struct {
		sync.Mutex
		acked  map[string]int64
		sent   map[string]int64
		values map[string]map[int64]int // key -> value -> acknowledgements
		errors map[string]int           // by error kind
	}
}

func newCounterLedger() *counterLedger {
	l := &counterLedger{}
	l.mu.acked = make(map[string]int64)
	l.mu.sent = make(map[string]int64)
	l.mu.values = make(map[string]map[int64]int)
	l.mu.errors = make(map[string]int)
	return l
}

func (l *counterLedger) record(key string, value int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.sent[key]++
	if err != nil {
		l.mu.errors[errorKind(err)]++
		return
	}
	l.mu.acked[key]++
	if l.mu.values[key] == nil {
		l.mu.values[key] = make(map[int64]int)
	}
	l.mu.values[key][value]++
}

// repeated counts the acknowledgements that returned a value another
// acknowledgement of the same key had returned: each is a second copy of
// the counter (two activations at once, or one that reloaded after its
// acknowledged changes were lost).
func (l *counterLedger) repeated() (acks, keys int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, vs := range l.mu.values {
		n := 0
		for _, count := range vs {
			n += count - 1
		}
		if n > 0 {
			acks += n
			keys++
		}
	}
	return acks, keys
}

// errorKind names an error for the ledgers' tallies.
func errorKind(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	}
	msg := err.Error()
	if i := strings.Index(msg, ":"); i > 0 && i < 40 {
		return msg[:i]
	}
	return msg
}

// counterClients call Add on keys through one gateway until stopped.
func runCounterClient(ctx context.Context, cl *client.Client, keys []string, ledger *counterLedger, worker int) {
	for i := worker; ctx.Err() == nil; i++ {
		key := keys[i%len(keys)]
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		reply, err := counter.NewCounterRef(cl, key).Add(callCtx, &counter.AddRequest{Delta: 1})
		cancel()
		if ctx.Err() != nil && err != nil {
			return // the test stopped it: the call is neither acknowledged nor counted
		}
		ledger.record(key, reply.GetValue(), err)
		if err != nil {
			pause(ctx, 20*time.Millisecond) // a caller's back-off
		} else {
			pause(ctx, time.Millisecond) // leave the 2 cores some air
		}
	}
}

// limiterLedger counts, per key, the permits granted and the acquisitions
// refused or failed.
type limiterLedger struct {
	mu struct {
		sync.Mutex
		granted  map[string]int
		rejected map[string]int
		failed   map[string]int
	}
}

func newLimiterLedger() *limiterLedger {
	l := &limiterLedger{}
	l.mu.granted = make(map[string]int)
	l.mu.rejected = make(map[string]int)
	l.mu.failed = make(map[string]int)
	return l
}

func (l *limiterLedger) granted(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.granted[key]
}

// storedPermits reads the available permits of a limiter grain's state as
// store holds it, and whether it holds any.
func storedPermits(store persistence.Store, grainType, key string) (int64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	data, _, err := store.Read(ctx, persistence.Key{GrainType: grainType, GrainKey: key, Name: "state"})
	if err != nil || data == nil {
		return 0, false
	}
	var st pb.LimiterState
	if err := st.MergeGranaryWire(data); err != nil {
		return 0, false
	}
	return st.AvailablePermits, true
}

// acquireHTTP acquires one permit of key under the named configuration
// through a silo's HTTP port.
func acquireHTTP(ctx context.Context, web *http.Client, httpAddr, key, config string) (bool, error) {
	body := fmt.Sprintf(`{"algorithm":"ALGORITHM_FIXED_WINDOW","key":%q,"config":%q}`, key, config)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+httpAddr+apiPath+"Acquire", strings.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := web.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, err
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("status %d: %s", resp.StatusCode, raw)
	}
	var lease struct {
		Acquired bool `json:"acquired"`
	}
	if err := json.Unmarshal(raw, &lease); err != nil {
		return false, err
	}
	return lease.Acquired, nil
}

// runLimiterClient acquires permits of the current key (keyOf, which the
// scenario changes) through one silo's HTTP port until stopped.
func runLimiterClient(ctx context.Context, web *http.Client, httpAddr, config string, keyOf func() string, ledger *limiterLedger) {
	for ctx.Err() == nil {
		key := keyOf()
		if key == "" {
			pause(ctx, 10*time.Millisecond)
			continue
		}
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		ok, err := acquireHTTP(callCtx, web, httpAddr, key, config)
		cancel()
		if ctx.Err() != nil {
			return
		}
		ledger.mu.Lock()
		switch {
		case err != nil:
			ledger.mu.failed[key]++
		case ok:
			ledger.mu.granted[key]++
		default:
			ledger.mu.rejected[key]++
		}
		ledger.mu.Unlock()
		pause(ctx, 10*time.Millisecond)
	}
}

// readyWatch polls a silo's /readyz until stopped, counting the answers
// while watching is on.
type readyWatch struct {
	watching        atomic.Bool
	ready, notReady atomic.Int64
}

func runReadyWatch(ctx context.Context, web *http.Client, s *nsSilo, w *readyWatch) {
	for ctx.Err() == nil {
		if w.watching.Load() {
			callCtx, cancel := context.WithTimeout(ctx, time.Second)
			ok := s.readyWithin(callCtx, web)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if ok {
				w.ready.Add(1)
			} else {
				w.notReady.Add(1)
			}
		}
		pause(ctx, 50*time.Millisecond)
	}
}

func (s *nsSilo) readyWithin(ctx context.Context, web *http.Client) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.http+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := web.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
