package links

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/delivery"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/internal/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errStopping = errors.New("test: stopping")

// nowhere delivers nothing: the links under test carry no call.
type nowhere struct{}

func (nowhere) Deliver(req *delivery.Request) {}

// group is the silo's background group, as the links see it.
type group struct {
	mu      sync.Mutex
	wg      sync.WaitGroup
	stopped bool
	ctx     context.Context
	cancel  context.CancelFunc
}

func newGroup() *group {
	g := &group{}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	return g
}

func (g *group) Go(fn func(ctx context.Context)) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return errStopping
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		fn(g.ctx)
	}()
	return nil
}

func (g *group) stop() {
	g.mu.Lock()
	g.stopped = true
	g.cancel()
	g.mu.Unlock()
	g.wg.Wait()
}

// newLinks returns the links of the silo named self, with addresses for
// the other silos in addrs.
func newLinks(t *testing.T, self string, addrs map[string]string, g *group) *Links {
	t.Helper()
	id := transport.Identity{Role: transport.RoleSilo, SiloID: self, Generation: 1, ClusterID: "test"}
	opts := transport.Options{Identity: id, ClusterSecret: []byte("0123456789abcdef0123456789abcdef")}
	accept := opts
	accept.Listener.AcceptRoles = []transport.Role{transport.RoleSilo}
	var mu sync.Mutex
	return New(Options{
		Self: self, Dial: opts, Accept: accept,
		NewEndpoint: func(c *transport.Conn) (*rpc.Endpoint, error) {
			ep := rpc.NewEndpoint(rpc.EndpointOptions{}, nowhere{}, wire.NewInterner(), clock.Real{}, slog.Default())
			if c != nil {
				ep.Attach(c)
			}
			return ep, nil
		},
		Address: func(silo string) (string, bool) {
			mu.Lock()
			defer mu.Unlock()
			a, ok := addrs[silo]
			return a, ok
		},
		Go:  g.Go,
		Log: slog.Default(),
	})
}

// A silo with no link to another says so; once stopping, asking for a link
// is answered at once with the group's error, and dials nothing.
func TestNoLinkAndNoDialOnceStopping(t *testing.T) {
	g := newGroup()
	ls := newLinks(t, "a", nil, g)
	_, err := ls.Link("b")
	require.ErrorIs(t, err, ErrNoLink)

	// Not in the view: the dial fails without a connection.
	_, err = ls.Ensure(context.Background(), "b")
	require.ErrorIs(t, err, ErrNoLink)

	g.stop()
	var got error
	called := false
	ls.LinkLater("b", func(_ *rpc.Endpoint, err error) { called, got = true, err })
	require.True(t, called, "answered before LinkLater returns")
	assert.ErrorIs(t, got, ErrNoLink)
	assert.ErrorIs(t, got, errStopping)
}

// The calls that wait for one link are bounded; one more fails at once.
func TestWaitersAreBounded(t *testing.T) {
	ls := New(Options{Self: "a", Go: func(fn func(context.Context)) error {
		return nil // the dial never runs: every call waits
	}, Log: slog.Default()})
	answered := 0
	for range maxWaiters {
		ls.LinkLater("b", func(*rpc.Endpoint, error) { answered++ })
	}
	var got error
	ls.LinkLater("b", func(_ *rpc.Endpoint, err error) { answered++; got = err })
	require.Equal(t, 1, answered, "only the call over the bound is answered")
	assert.ErrorIs(t, got, ErrNoLink)
}

// A dial that reaches another silo than the one it meant fails, and
// registers nothing at the dialling end.
func TestADialThatReachesAnotherSiloFails(t *testing.T) {
	g := newGroup()
	defer g.stop()
	addrs := map[string]string{}
	a, b := newLinks(t, "a", addrs, g), newLinks(t, "b", addrs, g)
	lb, err := b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	defer func() {
		b.CloseListener()
		a.CloseAll()
		b.CloseAll()
		require.Eventually(t, func() bool { return len(a.Conns())+len(b.Conns()) == 0 }, 20*time.Second, time.Millisecond)
	}()
	_, err = a.DialAt(context.Background(), "c", lb.Addr().String())
	require.ErrorIs(t, err, ErrNoLink, "b answered as b, not c")
	assert.Contains(t, err.Error(), `answered as "b"`)
	_, err = a.Link("c")
	assert.ErrorIs(t, err, ErrNoLink, "no link to c")
	_, err = a.Link("b")
	assert.ErrorIs(t, err, ErrNoLink, "nor to b, whom a did not mean to dial")
}

// A link whose connection ended before it was registered (a dial the
// peer closed at once) is not kept: nothing would ever remove it.
func TestALinkThatEndedBeforeItWasRegisteredIsNotKept(t *testing.T) {
	g := newGroup()
	defer g.stop()
	a := newLinks(t, "a", nil, g)
	ep := rpc.NewEndpoint(rpc.EndpointOptions{}, nowhere{}, wire.NewInterner(), clock.Real{}, slog.Default())
	l := &link{ep: ep, peer: "b", peerGen: 1, dialedBy: "a"}
	a.drop(l, rpc.EndpointStats{})
	assert.False(t, a.add(l), "add says it kept nothing")
	_, err := a.Link("b")
	assert.ErrorIs(t, err, ErrNoLink)
}

// When two silos dial each other at once, both keep the link dialled by
// the silo with the smaller name and close the other.
func TestTwoSilosKeepOneLink(t *testing.T) {
	g := newGroup()
	defer g.stop()
	addrs := map[string]string{}
	a, b := newLinks(t, "a", addrs, g), newLinks(t, "b", addrs, g)
	la, err := a.Listen("127.0.0.1:0")
	require.NoError(t, err)
	lb, err := b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	addrs["a"], addrs["b"] = la.Addr().String(), lb.Addr().String()
	defer func() {
		a.CloseListener()
		b.CloseListener()
		a.CloseAll()
		b.CloseAll()
		require.Eventually(t, func() bool { return a.Stats().Listener.Open == 0 && len(a.Conns())+len(b.Conns()) == 0 },
			20*time.Second, time.Millisecond)
	}()

	ctx := context.Background()
	var wg sync.WaitGroup
	var errA, errB error
	wg.Add(2)
	// DialAt dials even when a link is up (Ensure would use one that
	// arrived first), so both links come up.
	go func() { defer wg.Done(); _, errA = a.DialAt(ctx, "b", addrs["b"]) }()
	go func() { defer wg.Done(); _, errB = b.DialAt(ctx, "a", addrs["a"]) }()
	wg.Wait()
	require.NoError(t, errA)
	require.NoError(t, errB)
	// The second link closes once idle.
	require.Eventually(t, func() bool {
		ea, errA := a.Link("b")
		eb, errB := b.Link("a")
		if errA != nil || errB != nil {
			return false
		}
		return ea.Conn().LocalAddr().String() == eb.Conn().RemoteAddr().String() &&
			la.Stats().Open+lb.Stats().Open == 1
	}, 20*time.Second, time.Millisecond, "one link, the same on both ends")
	ea, _ := a.Link("b")
	assert.Equal(t, addrs["b"], ea.Conn().RemoteAddr().String(), "the link a dialled is kept")
}
