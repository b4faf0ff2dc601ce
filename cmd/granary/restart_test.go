package main

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/examples/counter"
)

// loggedSilo is a silo process whose log (stderr) the test reads: the
// membership events it logs are its view.
type loggedSilo struct {
	name string
	args []string // the whole command line, to run it again
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	log  []string
}

// startLoggedSilo runs the binary with args, and kills it when the test
// ends.
func startLoggedSilo(t *testing.T, bin, name string, args []string) *loggedSilo {
	t.Helper()
	s := &loggedSilo{name: name, args: args, cmd: exec.Command(bin, args...), done: make(chan struct{})}
	stderr, err := s.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, s.cmd.Start())
	go func() {
		defer close(s.done)
		lines := bufio.NewScanner(stderr)
		for lines.Scan() {
			s.mu.Lock()
			s.log = append(s.log, lines.Text())
			s.mu.Unlock()
		}
		_ = s.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
	return s
}

var memberEvent = regexp.MustCompile(`msg="cluster: member (joined|left|failed)" .*\bmember=(\S+) generation=(\d+)`)

// view replays the membership events the silo logged: member to
// generation.
func (s *loggedSilo) view() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := map[string]string{}
	for _, line := range s.log {
		m := memberEvent.FindStringSubmatch(line)
		switch {
		case m == nil:
		case m[1] == "joined":
			v[m[2]] = m[3]
		case v[m[2]] == m[3]: // the departure of the incarnation shown
			delete(v, m[2])
		}
	}
	return v
}

// viewsOf describes the silos' views for a failure message; it is
// evaluated when the wait begins, so it re-reads them itself.
func viewsOf(silos []*loggedSilo) fmt.Stringer { return viewsString(silos) }

type viewsString []*loggedSilo

func (v viewsString) String() string {
	var b strings.Builder
	for _, s := range v {
		fmt.Fprintf(&b, "%s sees %v; ", s.name, s.view())
	}
	return b.String()
}

func (s *loggedSilo) logged(text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.log, func(l string) bool { return strings.Contains(l, text) })
}

// waitForOneView waits until every silo's view shows exactly the silos
// given, each with the generation the silo itself logged.
func waitForOneView(t *testing.T, silos ...*loggedSilo) {
	t.Helper()
	var names []string
	for _, s := range silos {
		names = append(names, s.name)
	}
	slices.Sort(names)
	require.Eventually(t, func() bool {
		for _, s := range silos {
			v := s.view()
			if !slices.Equal(names, slices.Sorted(maps.Keys(v))) {
				return false
			}
			for _, other := range silos {
				if v[other.name] != other.view()[other.name] {
					return false
				}
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "one view of %v: %s", names, viewsOf(silos))
}

// The recipe of docs/cluster.md: three silo processes, each given every
// seed, its own included, started at once. a is killed with SIGKILL and
// started again with the very same command: it rejoins the cluster of b
// and c instead of forming its own, and one activation of a counter serves
// the calls through all three gateways.
func TestASiloKilledAndRestartedWithTheSameCommandRejoinsItsCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three processes")
	}
	bin := buildBinary(t)
	names := []string{"a", "b", "c"}
	gossip := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	gateways := make([]string, 3)
	silos := make([]*loggedSilo, 3)
	secret := writeFile(t, "cluster.secret", "the cluster's secret of 32 bytes")
	for i, name := range names {
		gateways[i] = freeAddr(t)
		args := []string{"-name", name, "-gateway", gateways[i], "-silo-address", freeAddr(t),
			"-gossip", gossip[i], "-seeds", strings.Join(gossip, ","), "-timings", "fast",
			"-secret-file", secret}
		silos[i] = startLoggedSilo(t, bin, name, args)
	}
	start := time.Now()
	waitForOneView(t, silos...)
	t.Logf("one view of three %v after the start", time.Since(start).Round(time.Millisecond))
	for _, s := range silos {
		require.False(t, s.logged("starting a new cluster"), "%s formed a cluster alone", s.name)
	}

	a := silos[0]
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
	<-a.done
	waitForOneView(t, silos[1:]...)

	start = time.Now()
	silos[0] = startLoggedSilo(t, bin, a.name, a.args) // the same command again
	waitForOneView(t, silos...)
	t.Logf("one view of three %v after the restart", time.Since(start).Round(time.Millisecond))
	require.NotEqual(t, a.view()["a"], silos[0].view()["a"], "a new incarnation")
	require.False(t, silos[0].logged("starting a new cluster"))

	// One cluster, one activation: a counter added to through each gateway
	// in turn counts every call.
	var last int64
	for i, gw := range gateways {
		cl, err := client.New(client.Options{Gateways: []string{gw}, ResponseTimeout: 2 * time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { _ = cl.Close() })
		ref := counter.NewCounterRef(cl, "restarted")
		var got int64
		retry(t, fmt.Sprintf("add through %s", names[i]), func(ctx context.Context) error {
			r, err := ref.Add(ctx, &counter.AddRequest{Delta: 1})
			if err == nil {
				got = r.Value
			}
			return err
		})
		require.Greater(t, got, last, "the counter through %s continues the others' count", names[i])
		last = got
	}
}
