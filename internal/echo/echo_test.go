package echo

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/granary-go/granary/internal/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(tb testing.TB) (*Server, *Client) {
	tb.Helper()
	s, err := Listen("127.0.0.1:0", transport.Options{})
	require.NoError(tb, err)
	tb.Cleanup(func() { s.Close() })
	c, err := Dial(tb.Context(), s.Addr().String(), transport.Options{})
	require.NoError(tb, err)
	tb.Cleanup(func() { c.Close() })
	return s, c
}

func TestCallEchoes(t *testing.T) {
	_, c := start(t)
	for _, p := range [][]byte{{}, []byte("hello"), bytes.Repeat([]byte("z"), 200_000)} {
		got, err := c.Call(p)
		require.NoError(t, err)
		assert.Equal(t, p, got)
	}
}

func TestConcurrentCalls(t *testing.T) {
	_, c := start(t)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 300 {
				p := []byte(fmt.Sprintf("caller %d call %d", g, i))
				got, err := c.Call(p)
				if !assert.NoError(t, err) || !assert.Equal(t, p, got) {
					return
				}
			}
		})
	}
	wg.Wait()
	c.mu.Lock()
	assert.Empty(t, c.mu.pending)
	c.mu.Unlock()
}

func TestCallAfterClose(t *testing.T) {
	_, c := start(t)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	_, err := c.Call([]byte("late"))
	assert.ErrorIs(t, err, ErrClosed)
}

// silent accepts requests and never answers them.
type silent struct{ received chan struct{} }

func (s silent) HandleFrame(*transport.Conn, []byte) { s.received <- struct{}{} }
func (s silent) HandleClose(*transport.Conn, error)  {}

func TestPendingCallsFailWhenConnectionEnds(t *testing.T) {
	received := make(chan struct{}, 16)
	l, err := transport.Listen("127.0.0.1:0", transport.Options{}, func(*transport.Conn) transport.Handler {
		return silent{received}
	})
	require.NoError(t, err)
	defer l.Close()
	c, err := Dial(t.Context(), l.Addr().String(), transport.Options{})
	require.NoError(t, err)
	defer c.Close()

	const callers = 4
	errs := make(chan error, callers)
	for range callers {
		go func() {
			_, err := c.Call([]byte("never answered"))
			errs <- err
		}()
	}
	for range callers {
		<-received
	}
	require.NoError(t, l.Close())
	for range callers {
		select {
		case err := <-errs:
			assert.ErrorIs(t, err, ErrClosed)
			assert.ErrorIs(t, err, io.EOF, "the cause is kept")
		case <-time.After(5 * time.Second):
			t.Fatal("a pending call was not failed")
		}
	}
}

const payloadSize = 48

func BenchmarkEchoSequential(b *testing.B) {
	_, c := start(b)
	payload := bytes.Repeat([]byte("p"), payloadSize)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := c.Call(payload); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkEchoParallel16 keeps exactly 16 callers in flight, as the bench
// harness's hot-key and partitioned scenarios do (b.RunParallel would use
// GOMAXPROCS-scaled goroutines instead).
func BenchmarkEchoParallel16(b *testing.B) {
	_, c := start(b)
	payload := bytes.Repeat([]byte("p"), payloadSize)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for range 16 {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := c.Call(payload); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
