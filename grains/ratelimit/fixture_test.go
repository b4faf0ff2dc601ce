package ratelimit_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/internal/silohost"
	"github.com/granary-go/granary/internal/storefault"
	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixtureToken is the fixture's client credential.
var fixtureToken = client.Token{Name: "fixture", Secret: []byte("the fixture client's token, 32 b")}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// epoch is where fake clocks start.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// env is one silo hosting the rate-limiting grains, with the means to
// reach it both ways a program does: the silo's own caller and a client
// through its gateway. Test bodies take the callers they are given, so
// that the same bodies can run against several silos of a cluster.
type env struct {
	t     testing.TB
	silo  *silo.Silo
	store *storefault.Store[persistence.Key]
	mem   *persistence.MemoryStore // behind store
	clock *clock.Fake              // nil with the wall clock
	calls *callCounter
	cfg   envConfig
}

type envConfig struct {
	defaults        ratelimit.Defaults
	responseTimeout time.Duration
	fake            bool
	extra           func(*silo.Silo) error // registers more grain types
	siloOptions     []silo.Option
	uncounted       bool // no call-counting filter: the direct dispatch path, for benchmarks
}

type envOption func(*envConfig)

// withDefaults sets the silo's default limiter options.
func withDefaults(d ratelimit.Defaults) envOption {
	return func(c *envConfig) { c.defaults = d }
}

// withResponseTimeout sets the silo's (and its clients') response timeout.
func withResponseTimeout(d time.Duration) envOption {
	return func(c *envConfig) { c.responseTimeout = d }
}

// withFakeClock runs the silo and its clients on a fake clock: budgets,
// deadlines, ticks, response timeouts and flushes move only when the test
// advances it.
func withFakeClock() envOption { return func(c *envConfig) { c.fake = true } }

// withSiloOptions adds options to the silo's.
func withSiloOptions(opts ...silo.Option) envOption {
	return func(c *envConfig) { c.siloOptions = append(c.siloOptions, opts...) }
}

// uncounted leaves calls uncounted, so that they take the silo's direct
// dispatch path (no incoming filter), as in production.
func uncounted() envOption { return func(c *envConfig) { c.uncounted = true } }

// withGrains registers more grain types on the silo.
func withGrains(register func(*silo.Silo) error) envOption {
	return func(c *envConfig) { c.extra = register }
}

func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, calls: newCallCounter(), mem: persistence.NewMemoryStore()}
	e.store = storefault.New[persistence.Key](e.mem)
	for _, o := range opts {
		o(&e.cfg)
	}
	siloOpts := []silo.Option{silo.WithLogger(quiet), silo.WithStore(e.store)}
	if !e.cfg.uncounted {
		siloOpts = append(siloOpts, silo.WithIncomingFilters(e.calls.filter))
	}
	if e.cfg.fake {
		e.clock = clock.NewFake(epoch)
		siloOpts = append(siloOpts, silo.WithClock(e.clock))
	}
	siloOpts = append(siloOpts, e.cfg.siloOptions...)
	// The fixture's clients change limiters too: their token has the
	// admin right (rights_test.go checks what a client without it gets).
	s, err := silo.New(silo.Options{Name: "test", GatewayAddress: "127.0.0.1:0", ResponseTimeout: e.cfg.responseTimeout,
		Security: silo.Security{ClientTokens: []silo.ClientToken{{Name: fixtureToken.Name, Secret: fixtureToken.Secret, Rights: actor.RightAdmin}}},
	}, siloOpts...)
	require.NoError(t, err)
	require.NoError(t, ratelimit.Register(s, e.cfg.defaults))
	if e.cfg.extra != nil {
		require.NoError(t, e.cfg.extra(s))
	}
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
	})
	e.silo = s
	return e
}

// entry is a way into the cluster.
type entry int

const (
	viaSilo    entry = iota // the silo's own caller, as code inside the silo process uses
	viaGateway              // a client connected to the silo's gateway
)

func (k entry) String() string {
	if k == viaSilo {
		return "silo-caller"
	}
	return "gateway-client"
}

var entries = []entry{viaSilo, viaGateway}

// caller returns a caller entering the cluster the given way.
func (e *env) caller(k entry) proxy.Caller {
	if k == viaSilo {
		return e.silo.Caller()
	}
	return e.client()
}

// client returns a new client connected to the silo's gateway, closed when
// the test ends. It is the one place that builds clients.
func (e *env) client() *client.Client {
	e.t.Helper()
	opts := []client.Option{client.WithLogger(quiet)}
	if e.clock != nil {
		opts = append(opts, client.WithClock(e.clock))
	}
	c, err := client.New(client.Options{Gateways: []string{e.silo.GatewayAddr().String()}, ResponseTimeout: e.cfg.responseTimeout, Token: &fixtureToken}, opts...)
	require.NoError(e.t, err)
	require.NoError(e.t, c.Connect(context.Background()))
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

// callCounter counts the grain methods invoked on a silo, by
// "service/method", with an incoming filter.
type callCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func newCallCounter() *callCounter { return &callCounter{counts: make(map[string]int)} }

func (c *callCounter) filter(ctx context.Context, call *proxy.IncomingCall, next proxy.IncomingInvoker) (proto.Message, error) {
	c.mu.Lock()
	c.counts[call.Method.FullName()]++
	c.mu.Unlock()
	return next(ctx, call)
}

// count returns how many calls of the named method (on any limiter grain
// type when service is "") the silo ran.
func (c *callCounter) count(service, method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for name, k := range c.counts {
		if (service == "" && strings.HasSuffix(name, "/"+method)) || name == service+"/"+method {
			n += k
		}
	}
	return n
}

// deactivate deactivates the grain's activation and waits until it is gone:
// its state has been flushed then.
func (e *env) deactivate(id actor.GrainID) {
	e.t.Helper()
	require.True(e.t, silohost.Host(e.silo).Deactivate(id), "%s is active", id)
	eventually(e.t, func() bool { return !silohost.Host(e.silo).IsActive(id) }, "%s deactivates", id)
}

// records counts the grain states the store holds.
func (e *env) records() int { return e.mem.Len() }

// holdAndQueue takes h's one permit and queues one more acquisition, which
// it returns the lease of once it is answered.
func holdAndQueue(t testing.TB, h ratelimit.Limiter) (held *ratelimit.Lease, queued <-chan *ratelimit.Lease) {
	t.Helper()
	ctx := context.Background()
	held, err := h.Acquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, held.Acquired())
	got := make(chan *ratelimit.Lease, 1)
	go func() {
		l, err := h.Acquire(ctx, 1)
		assert.NoError(t, err)
		got <- l
	}()
	waitForWaiting(t, h, 1)
	return held, got
}

// eventually polls cond until it holds.
func eventually(t testing.TB, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, msgAndArgs...)
}
