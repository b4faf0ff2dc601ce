package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// serverBinary is the program Start runs.
	serverBinary = "redis-server"
	// ciEnv set to "1" turns a missing server into a test failure.
	ciEnv = "GRANARY_CI"
	// startTimeout bounds how long a server may take to answer.
	startTimeout = 10 * time.Second
	// stopTimeout bounds a graceful shutdown before the server is killed.
	stopTimeout = 10 * time.Second
	// pollEvery is how often a starting server is asked whether it is up.
	pollEvery = 5 * time.Millisecond
)

// Options choose how Start configures the server. The zero value is a plain
// standalone server without a password.
type Options struct {
	// Cluster runs the server in cluster mode as a one-node cluster that
	// serves every hash slot, so that Redis Cluster clients can use it.
	Cluster bool
	// Password, if not empty, is required from clients (requirepass).
	Password string
	// Host is the address the server binds and is dialled at: an address
	// of the test's namespace. The default is 127.0.0.1; a test that runs
	// processes in network namespaces of its own gives an address of its
	// network that they reach.
	Host string
}

// Server is a redis-server process owned by one test. Its methods must be
// called from the test's goroutine (or after synchronising with it).
type Server struct {
	tb   testing.TB
	bin  string
	dir  string
	opts Options
	port int

	mu struct {
		sync.Mutex
		cmd    *exec.Cmd
		exited chan struct{} // closed when cmd has been waited for
	}
}

// Start starts a redis-server for tb and returns once it answers. It skips
// tb (or fails it, under GRANARY_CI=1) when redis-server is not on PATH.
// The server is stopped in tb's cleanup.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	bin, err := exec.LookPath(serverBinary)
	if err != nil {
		if os.Getenv(ciEnv) == "1" {
			tb.Fatalf("redistest: %s is not on PATH and %s=1 requires the Redis tests: install it (apt-get install redis-server)", serverBinary, ciEnv)
		}
		tb.Skipf("redistest: %s not on PATH; install it (apt-get install redis-server) to run the Redis tests", serverBinary)
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir(), opts: opts}
	tb.Cleanup(func() {
		if tb.Failed() {
			s.logTail(20)
		}
		s.Stop()
	})
	// Another process may take the free port before the server binds it;
	// then pick another.
	for attempt := 1; ; attempt++ {
		s.port = freePort(tb, opts.Host)
		err := s.start()
		if err == nil {
			break
		}
		if attempt == 3 {
			tb.Fatalf("redistest: %v", err)
		}
	}
	if opts.Cluster {
		s.claimAllSlots()
	}
	return s
}

// Addr returns the server's address, host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.opts.Host, strconv.Itoa(s.port)) }

// Port returns the server's port.
func (s *Server) Port() int { return s.port }

// URL returns a redis:// URL for database db on the server, with the
// password if the server has one.
func (s *Server) URL(db int) string {
	u := url.URL{Scheme: "redis", Host: s.Addr(), Path: "/" + strconv.Itoa(db)}
	if s.opts.Password != "" {
		u.User = url.UserPassword("", s.opts.Password)
	}
	return u.String()
}

// Stop shuts the server down gracefully (SIGTERM, which makes it write its
// append-only file) and waits for it to exit, killing it if it takes too
// long. It does nothing if the server is not running.
func (s *Server) Stop() {
	s.tb.Helper()
	s.mu.Lock()
	cmd, exited := s.mu.cmd, s.mu.exited
	s.mu.cmd, s.mu.exited = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-exited:
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-exited
		s.tb.Errorf("redistest: redis-server on port %d did not stop within %v and was killed", s.port, stopTimeout)
	}
}

// Restart stops the server if it runs and starts it again on the same port
// and directory, returning once it answers. Data written before a graceful
// Stop is there again.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.tb.Fatalf("redistest: restart: %v", err)
	}
}

// start runs the server on s.port and waits until it answers PING.
func (s *Server) start() error {
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", s.opts.Host,
		"--dir", s.dir,
		"--logfile", "redis.log",
		"--daemonize", "no",
		"--save", "",
		"--appendonly", "yes",
		"--appendfsync", "everysec",
	}
	if s.opts.Password != "" {
		args = append(args, "--requirepass", s.opts.Password)
	}
	if ip := net.ParseIP(s.opts.Host); ip != nil && !ip.IsLoopback() {
		// Protected mode refuses every client not on loopback when there
		// is no password; a Host is an address of the test's own network.
		args = append(args, "--protected-mode", "no")
	}
	if s.opts.Cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.mu.cmd, s.mu.exited = cmd, exited
	s.mu.Unlock()

	deadline := time.Now().Add(startTimeout)
	ticker := time.NewTicker(pollEvery)
	defer ticker.Stop()
	for {
		reply, err := s.Command("PING")
		if err == nil && reply == "PONG" {
			return nil
		}
		select {
		case <-exited:
			s.mu.Lock()
			s.mu.cmd, s.mu.exited = nil, nil
			s.mu.Unlock()
			return fmt.Errorf("redis-server on port %d exited at start: %s", s.port, s.lastLogLine())
		case <-ticker.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on port %d did not answer within %v (last: %q, %v)", s.port, startTimeout, reply, err)
		}
	}
}

// claimAllSlots makes a cluster-mode server the owner of every hash slot
// and waits until the cluster reports itself ok.
func (s *Server) claimAllSlots() {
	s.tb.Helper()
	if _, err := s.Command("CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil {
		s.tb.Fatalf("redistest: claim the hash slots: %v", err)
	}
	deadline := time.Now().Add(startTimeout)
	ticker := time.NewTicker(pollEvery)
	defer ticker.Stop()
	for {
		info, err := s.Command("CLUSTER", "INFO")
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("redistest: the one-node cluster is not ok within %v: %q, %v", startTimeout, info, err)
		}
		<-ticker.C
	}
}

// errReply is a Redis error reply.
var errReply = errors.New("redistest: error reply")

// Command sends one command on a new connection (authenticating first if
// the server has a password) and returns the reply: a status, an integer
// or a bulk string as text. An error reply is returned as an error that
// matches errReply. It is meant for test setup and checks, not for load.
func (s *Server) Command(args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	if s.opts.Password != "" {
		if _, err := roundTrip(conn, r, "AUTH", s.opts.Password); err != nil {
			return "", err
		}
	}
	return roundTrip(conn, r, args...)
}

// roundTrip writes a command in RESP and reads a one-level reply.
func roundTrip(conn net.Conn, r *bufio.Reader, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("redistest: empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("%w: %s", errReply, line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err // a nil bulk string reads as ""
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("redistest: reply type %q not supported", line[0])
}

// freePort returns a TCP port of host that was free a moment ago.
func freePort(tb testing.TB, host string) int {
	tb.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		tb.Fatalf("redistest: find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) logLines() []string {
	data, err := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(data), "\n"), "\n")
}

func (s *Server) lastLogLine() string {
	lines := s.logLines()
	if len(lines) == 0 {
		return "(no log)"
	}
	return lines[len(lines)-1]
}

// logTail logs the last n lines of the server's log, to explain a failure.
func (s *Server) logTail(n int) {
	lines := s.logLines()
	s.tb.Logf("redistest: last lines of the log of redis-server on port %d:\n%s", s.port, strings.Join(lines[max(0, len(lines)-n):], "\n"))
}
