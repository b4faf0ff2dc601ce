package client_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/examples/counter"
	"github.com/granary-go/granary/proxy"
)

// silentGateway returns the address of a listener that accepts connections
// and never answers their handshake, as a stalled silo's would.
func silentGateway(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// A call that has to connect first does so within its response timeout:
// with a gateway that never answers the handshake and a dial timeout of an
// hour, the call ends, unavailable, because its own timeout passed (not
// the transport's handshake timeout, 5 s, as it did).
func TestConnectingCountsAgainstTheCallsTimeout(t *testing.T) {
	c, err := client.New(client.Options{Gateways: []string{silentGateway(t)}, DialTimeout: time.Hour}, client.WithLogger(quiet))
	require.NoError(t, err)
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		_, err := counter.NewCounterRef(c, "k").Add(context.Background(), &counter.AddRequest{Delta: 1}, proxy.WithTimeout(50*time.Millisecond))
		done <- err
	}()
	got := outcome(t, done, "the call waited for the hour-long dial")
	assert.ErrorIs(t, got, proxy.ErrUnavailable)
	assert.ErrorIs(t, got, context.DeadlineExceeded, "the call's own timeout ended it, not the handshake's")
}

// A call that waits for another call's dial waits within its own timeout,
// not the other call's.
func TestWaitingForAnotherCallsDialCountsAgainstTheCallsTimeout(t *testing.T) {
	c, err := client.New(client.Options{Gateways: []string{silentGateway(t)}, DialTimeout: time.Hour}, client.WithLogger(quiet))
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	long := make(chan error, 1)
	go func() {
		_, err := counter.NewCounterRef(c, "k").Add(ctx, &counter.AddRequest{Delta: 1}, proxy.WithTimeout(time.Hour))
		long <- err
	}()
	short := make(chan error, 1)
	go func() {
		_, err := counter.NewCounterRef(c, "k").Add(context.Background(), &counter.AddRequest{Delta: 1}, proxy.WithTimeout(50*time.Millisecond))
		short <- err
	}()
	got := outcome(t, short, "the short call waited for the long call's dial")
	assert.ErrorIs(t, got, proxy.ErrUnavailable)
	assert.ErrorIs(t, got, context.DeadlineExceeded, "the short call's own timeout ended it")
	cancel()
	assert.Error(t, <-long, "the long call ends with its context")
}

// outcome waits for a call's error on done, failing the test with msg if it
// does not come within a minute: a call bounded by its own short timeout
// comes far sooner, one bounded by an hour-long dial does not.
func outcome(t *testing.T, done <-chan error, msg string) error {
	t.Helper()
	var got error
	require.Eventually(t, func() bool {
		select {
		case got = <-done:
			return true
		default:
			return false
		}
	}, time.Minute, 5*time.Millisecond, msg)
	return got
}
