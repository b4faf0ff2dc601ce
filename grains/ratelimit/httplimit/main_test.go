package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/httplimit"
	"github.com/granary-go/granary/grains/ratelimit/internal/silotest"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	quiet = silotest.Quiet
	epoch = silotest.Epoch
)

// never is a window no test waits out.
const never = 1000 * time.Hour

// startSilo starts a silo hosting the limiter grains, stopped when the
// test ends; with a fake clock, time moves only when the test says.
func startSilo(t testing.TB, fake *clock.Fake) *silo.Silo { return silotest.Start(t, "http", fake) }

// connect returns a client of s's gateway, closed when the test ends.
func connect(t testing.TB, s *silo.Silo) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{Gateways: []string{s.GatewayAddr().String()}}, client.WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, c.Connect(context.Background()))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func mustConfigs(t testing.TB, configs ...ratelimit.Config) *ratelimit.Configs {
	return silotest.Configs(t, configs...)
}

func mustMiddleware(t testing.TB, c proxy.Caller, configs *ratelimit.Configs, opts httplimit.Options) *httplimit.Middleware {
	t.Helper()
	m, err := httplimit.New(c, configs, opts, httplimit.WithLogger(quiet))
	require.NoError(t, err)
	return m
}

// ok is the handler behind the middleware in most tests.
var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })

// serve runs one request through h, from the given peer address, with
// header lines key, value, key, value...
func serve(h http.Handler, remoteAddr string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remoteAddr
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// recordingCaller notes the key of every limiter grain called through it.
type recordingCaller struct {
	proxy.Caller
	mu   sync.Mutex
	keys map[string]int
}

func record(c proxy.Caller) *recordingCaller {
	return &recordingCaller{Caller: c, keys: make(map[string]int)}
}

func (c *recordingCaller) Call(ctx context.Context, call proxy.Call, in, out proto.Message) error {
	c.mu.Lock()
	c.keys[call.Target.Key]++
	c.mu.Unlock()
	return c.Caller.Call(ctx, call, in, out)
}

func (c *recordingCaller) calledKeys() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.keys))
	for k, n := range c.keys {
		out[k] = n
	}
	return out
}

// failingCaller fails every call as an unreachable cluster does.
type failingCaller struct{}

func (failingCaller) Call(context.Context, proxy.Call, proto.Message, proto.Message) error {
	return proxy.ErrUnavailable
}
func (failingCaller) ResponseTimeout() time.Duration { return time.Second }
