package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/examples/counter"
	"github.com/granary-go/granary/proxy"
)

// freeAddr returns a loopback address nothing listens on now, for TCP and
// UDP (memberlist takes both), for a process the test starts to bind. It
// is picked below the kernel's ephemeral range: a port from that range
// (what ":0" gives) can be taken by any outgoing connection before the
// process binds it, and the three processes make many.
func freeAddr(t *testing.T) string {
	t.Helper()
	ports.mu.Lock()
	defer ports.mu.Unlock()
	low := ephemeralLow()
	for range 1000 {
		port := low - 12000 + rand.IntN(12000)
		if ports.given[port] {
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", addr)
		_ = l.Close()
		if err != nil {
			continue
		}
		_ = u.Close()
		if ports.given == nil {
			ports.given = make(map[int]bool)
		}
		ports.given[port] = true
		return addr
	}
	t.Fatal("no free loopback port in 1000 tries")
	return ""
}

// ephemeralLow is the first port of the kernel's ephemeral range, or
// Linux's default first one where the kernel does not say.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low < 13024 {
		return 32768
	}
	return low
}

// ports are those freeAddr gave, never given twice in one test binary.
var ports struct {
	mu    sync.Mutex
	given map[int]bool
}

// buildBinary builds the granary binary once for the whole test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		dir, err := os.MkdirTemp("", "granary-test-")
		if err != nil {
			binary.err = err
			return
		}
		binary.dir = dir
		binary.path = filepath.Join(dir, "granary")
		build := exec.Command("go", "build", "-o", binary.path, ".")
		build.Stderr = os.Stderr
		binary.err = build.Run()
	})
	require.NoError(t, binary.err, "go build")
	return binary.path
}

// binary is the binary buildBinary built; TestMain removes its directory.
var binary struct {
	once      sync.Once
	dir, path string
	err       error
}

// process is one silo process of the built binary.
type process struct {
	name, gateway string
	cmd           *exec.Cmd
	exited        chan error
	state         atomic.Pointer[os.ProcessState] // set once the process has exited
	stdout        []string                        // what it printed, complete once exited has sent
	stderr        lockedBuffer
}

// lockedBuffer collects a process's log while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// warnings returns the log's lines at WARN and ERROR, and those that are
// not log records (a failed start's "granary: ..."), the last n of them.
func (b *lockedBuffer) warnings(n int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, line := range strings.Split(b.buf.String(), "\n") {
		if line != "" && (!strings.HasPrefix(line, "time=") || strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")) {
			out = append(out, line)
		}
	}
	return out[max(len(out)-n, 0):]
}

// startProcess starts a silo process of the cluster that seed (a gossip
// address, or "" for the first) belongs to, with extra flags after the
// usual ones, and returns it with its gossip address.
func startProcess(t *testing.T, bin, name, seed string, extra ...string) (*process, string) {
	t.Helper()
	p := &process{name: name, gateway: freeAddr(t), exited: make(chan error, 1)}
	gossip := freeAddr(t)
	args := []string{"-name", name, "-gateway", p.gateway, "-silo-address", freeAddr(t), "-gossip", gossip, "-timings", "fast",
		"-secret-file", writeFile(t, "cluster.secret", "the cluster's secret of 32 bytes")}
	if seed != "" {
		args = append(args, "-seeds", seed)
	}
	p.cmd = exec.Command(bin, append(args, extra...)...)
	p.cmd.Stderr = &p.stderr
	// A failure says what the process warned of (a fence, a false death)
	// and whether it had exited.
	t.Cleanup(func() {
		if t.Failed() {
			for _, line := range p.stderr.warnings(50) {
				t.Logf("%s: %s", name, line)
			}
			if st := p.state.Load(); st != nil {
				t.Logf("%s: exited: %s", name, st)
			}
		}
	})
	out, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	lines := bufio.NewScanner(out)
	go func() {
		for lines.Scan() {
			p.stdout = append(p.stdout, lines.Text())
		}
		err := p.cmd.Wait()
		p.state.Store(p.cmd.ProcessState)
		p.exited <- err
	}()
	t.Cleanup(func() {
		if p.state.Load() == nil {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	return p, gossip
}

// retry calls fn until it succeeds, within a while; a failed call must
// fail clearly and never hang.
func retry(t *testing.T, what string, fn func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := fn(ctx)
		cancel()
		if err == nil {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s: %v", what, err)
		require.True(t, errors.Is(err, proxy.ErrUnavailable) || errors.Is(err, proxy.ErrTimeout) ||
			errors.Is(err, context.DeadlineExceeded), "%s failed unclearly: %v", what, err)
		time.Sleep(20 * time.Millisecond) // a caller's retry
	}
}

// Three silo processes of the built binary form a cluster on loopback; a
// client calls through each gateway in turn; one process is killed with
// SIGKILL and one stopped with SIGINT: calls keep succeeding on the
// survivors, and each stopped process exits cleanly.
func TestThreeSiloProcessesSurviveAKillAndAStop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three processes")
	}
	bin := buildBinary(t)
	a, seed := startProcess(t, bin, "a", "")
	b, _ := startProcess(t, bin, "b", seed)
	c, _ := startProcess(t, bin, "c", seed)
	procs := []*process{a, b, c}

	clients := make([]*client.Client, 3)
	for i, p := range procs {
		cl, err := client.New(client.Options{Gateways: []string{p.gateway}, ResponseTimeout: 2 * time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { _ = cl.Close() })
		clients[i] = cl
	}
	// Each process hosts a few grains, placed by hint through another's gateway.
	const perSilo = 4
	for i, p := range procs {
		for k := range perSilo {
			ref := counter.NewCounterRef(clients[(i+1)%3], fmt.Sprintf("%s-%d", p.name, k))
			retry(t, "place on "+p.name, func(ctx context.Context) error {
				_, err := ref.Add(ctx, &counter.AddRequest{Delta: 1}, proxy.WithPlacementHint(p.name))
				return err
			})
		}
	}
	callAll := func(via []*client.Client, want int64) {
		t.Helper()
		for _, p := range procs {
			for k := range perSilo {
				for _, cl := range via {
					ref := counter.NewCounterRef(cl, fmt.Sprintf("%s-%d", p.name, k))
					retry(t, "call "+ref.GrainID().String(), func(ctx context.Context) error {
						r, err := ref.Get(ctx, &counter.GetRequest{})
						if err == nil && r.Value < want {
							return fmt.Errorf("%w: %s has %d", proxy.ErrUnavailable, ref.GrainID(), r.Value)
						}
						return err
					})
				}
			}
		}
	}
	callAll(clients, 1)

	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
	<-c.exited
	// c's grains come back on a survivor: from the memory store they lost
	// their state, so any value will do.
	callAll(clients[:2], 0)

	require.NoError(t, b.cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, <-b.exited, "b exits cleanly on SIGINT")
	callAll(clients[:1], 0)

	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-a.exited, "a exits cleanly on SIGTERM")
	assert.NotNil(t, a.cmd.ProcessState)
}
