package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/granary-go/granary/bench"
)

// DefaultRedisServer is the redis-server binary RedisRate looks for on
// PATH.
const DefaultRedisServer = "redis-server"

// redisStartTimeout bounds how long a fresh redis-server may take to
// answer.
const redisStartTimeout = 10 * time.Second

// RedisRate is redis_rate, the common distributed choice, against one
// local redis-server that Start runs on a free loopback port (no
// persistence) and Stop ends. Without a redis-server binary, Start fails
// with bench.ErrUnavailable and the run goes on without it.
type RedisRate struct {
	server  string // the binary
	cmd     *exec.Cmd
	exited  chan error // Wait's result, once the process ends
	output  *lockedBuffer
	client  *redis.Client
	limiter *redis_rate.Limiter
}

var _ bench.System = (*RedisRate)(nil)

// NewRedisRate returns the redis_rate peer, not started, which runs the
// redis-server binary server ("" for DefaultRedisServer on PATH).
func NewRedisRate(server string) *RedisRate {
	if server == "" {
		server = DefaultRedisServer
	}
	return &RedisRate{server: server}
}

// Name returns "redis_rate".
func (r *RedisRate) Name() string { return "redis_rate" }

// Topology describes redis_rate's path.
func (r *RedisRate) Topology() string {
	return "redis_rate (GCRA in a Lua script) against one local redis-server on loopback, one go-redis client pool"
}

// Cases returns the sequential, hot-key and partitioned scenarios under
// both overloads: Allow takes the caller's context.
func (r *RedisRate) Cases(m bench.Matrix) []bench.Case {
	return m.PeerCases(bench.GCRA, true, bench.Sequential, bench.HotKey, bench.Partitioned)
}

// Start runs redis-server on a free loopback port and connects to it.
func (r *RedisRate) Start(ctx context.Context) error {
	path, err := exec.LookPath(r.server)
	if err != nil {
		return fmt.Errorf("%w: no %s: %w", bench.ErrUnavailable, r.server, err)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	// go-redis logs its dial retries; the harness reports what matters.
	redis.SetLogger(quietRedis{})
	r.output = &lockedBuffer{}
	r.cmd = exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
	r.cmd.Stdout, r.cmd.Stderr = r.output, r.output
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("peer: start %s: %w", path, err)
	}
	r.exited = make(chan error, 1)
	cmd := r.cmd
	go func() { r.exited <- cmd.Wait() }()

	r.client = redis.NewClient(&redis.Options{
		Addr:                     "127.0.0.1:" + strconv.Itoa(port),
		PoolSize:                 2 * bench.Parallelism,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	r.limiter = redis_rate.NewLimiter(r.client)
	return r.awaitServer(ctx)
}

// awaitServer polls the server until it answers, exits or takes too long.
func (r *RedisRate) awaitServer(ctx context.Context) error {
	err := poll(ctx, redisStartTimeout, func(ctx context.Context) error {
		select {
		case werr := <-r.exited:
			r.exited <- werr // for Stop
			return fmt.Errorf("%w: redis-server exited (%v)", errGaveUp, werr)
		default:
		}
		return r.client.Ping(ctx).Err()
	})
	if err != nil {
		return fmt.Errorf("peer: redis-server did not answer: %w (%s)", err, r.output.String())
	}
	return nil
}

// Prepare returns the case's workload, with keys of its own.
func (r *RedisRate) Prepare(_ context.Context, c bench.Case) (bench.Workload, error) {
	keys := make([]string, c.Scenario.Keys())
	for i := range keys {
		keys[i] = fmt.Sprintf("bench:%s:%d", c, i)
	}
	return &redisWorkload{r: r, keys: keys}, nil
}

// Stop closes the client and ends the server, waiting for it to exit.
func (r *RedisRate) Stop(ctx context.Context) error {
	var errs []error
	if r.client != nil {
		errs = append(errs, r.client.Close())
		r.client = nil
	}
	if r.cmd != nil {
		errs = append(errs, r.endServer(ctx))
		r.cmd = nil
	}
	return errors.Join(errs...)
}

func (r *RedisRate) endServer(ctx context.Context) error {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
		return nil
	case <-ctx.Done():
		_ = r.cmd.Process.Kill()
		<-r.exited
		return fmt.Errorf("peer: redis-server ignored SIGTERM: %w", ctx.Err())
	}
}

var redisLimit = redis_rate.Limit{Rate: bench.Quota, Burst: bench.Quota, Period: bench.Window}

type redisWorkload struct {
	unplaced
	r    *RedisRate
	keys []string
}

func (w *redisWorkload) Do(ctx context.Context, worker int) error {
	res, err := w.r.limiter.Allow(ctx, w.keys[worker%len(w.keys)], redisLimit)
	if err != nil {
		return err
	}
	if res.Allowed != 1 {
		return bench.ErrNotGranted
	}
	return nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lockedBuffer keeps a process's output for error messages; the process's
// copying goroutines write to it while Start may read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 64<<10 {
		return len(p), nil // enough to tell what went wrong
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// quietRedis is go-redis's logger for the harness: it drops everything.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
