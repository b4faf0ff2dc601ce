package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
)

var (
	secretA = bytes.Repeat([]byte("a"), 32)
	secretB = bytes.Repeat([]byte("b"), 32)
)

func TestHandshakeExchangesIdentities(t *testing.T) {
	listenerID := Identity{SiloID: "silo-1", Generation: 42, ClusterID: "prod"}
	diallerID := Identity{Role: RoleSilo, SiloID: "silo-2", Generation: 7, ClusterID: "prod"}
	seen := make(chan Identity, 1)
	l := listen(t, Options{Identity: listenerID, ClusterSecret: secretA}, func(c *Conn) Handler {
		seen <- c.Peer() // known before the first frame
		return &echoHandler{}
	})
	r := newRecorder()
	c := dial(t, l, Options{Identity: diallerID, ClusterSecret: secretA}, r)

	assert.Equal(t, diallerID, <-seen)
	listenerID.Role = RoleSilo // a listener's role, filled in
	assert.Equal(t, listenerID, c.Peer())
	require.NoError(t, c.Send(body("after the handshake")))
	assert.Equal(t, "after the handshake", string(r.next(t)))
	assert.EqualValues(t, 1, l.Stats().Accepted)
	_, isTLS := c.TLSState()
	assert.False(t, isTLS)
}

func TestHandshakeDefaultsToAClientWithoutCluster(t *testing.T) {
	seen := make(chan Identity, 1)
	l := listen(t, Options{}, func(c *Conn) Handler { seen <- c.Peer(); return &echoHandler{} })
	c := dial(t, l, Options{}, newRecorder())
	assert.Equal(t, Identity{Role: RoleClient}, <-seen)
	assert.Equal(t, Identity{Role: RoleSilo}, c.Peer())
}

// handshakeVersion runs a dialler's handshake that speaks version against l.
func handshakeVersion(t *testing.T, l *Listener, opts Options, version uint16) error {
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, opts.prepare(false))
	h := handshake{rw: nc, local: opts.Identity, secret: opts.ClusterSecret, version: version}
	_, err = h.dial()
	return err
}

func TestHandshakeRefusalsAreClearOnBothSides(t *testing.T) {
	for name, tc := range map[string]struct {
		listener, dialler Options
		version           uint16 // the dialler speaks this version, when set
		reason            error
		diallerFinds      bool // the dialler, not the listener, finds the problem
		counted           func(ListenerStats) uint64
	}{
		"wrong secret": {
			listener: Options{ClusterSecret: secretA}, dialler: Options{ClusterSecret: secretB},
			reason: ErrSecretMismatch, diallerFinds: true, // the listener's proof fails first
			counted: func(s ListenerStats) uint64 { return s.HandshakeSecret },
		},
		"dialler without the secret": {
			listener: Options{ClusterSecret: secretA}, dialler: Options{},
			reason:  ErrSecretMismatch,
			counted: func(s ListenerStats) uint64 { return s.HandshakeSecret },
		},
		"listener without a secret": {
			listener: Options{}, dialler: Options{ClusterSecret: secretA},
			reason:  ErrSecretMismatch,
			counted: func(s ListenerStats) uint64 { return s.HandshakeSecret },
		},
		"wrong cluster id": {
			listener: Options{Identity: Identity{ClusterID: "prod"}}, dialler: Options{Identity: Identity{ClusterID: "staging"}},
			reason:  ErrClusterMismatch,
			counted: func(s ListenerStats) uint64 { return s.HandshakeCluster },
		},
		"wrong version": {
			listener: Options{}, dialler: Options{}, version: protocolVersion + 1,
			reason:  ErrVersionMismatch,
			counted: func(s ListenerStats) uint64 { return s.HandshakeVersion },
		},
		"role not accepted": {
			listener: Options{Listener: ListenerOptions{AcceptRoles: []Role{RoleSilo}}}, dialler: Options{},
			reason:  ErrRoleRefused,
			counted: func(s ListenerStats) uint64 { return s.HandshakeRole },
		},
	} {
		t.Run(name, func(t *testing.T) {
			logs, logger := newLogBuffer()
			l := listen(t, tc.listener, func(*Conn) Handler {
				t.Error("a refused dialler reached accept")
				return nil
			}, WithLogger(logger))

			var err error
			if tc.version != 0 {
				err = handshakeVersion(t, l, tc.dialler, tc.version)
			} else {
				var c *Conn
				c, err = Dial(t.Context(), l.Addr().String(), tc.dialler, newRecorder())
				require.Nil(t, c)
			}
			// The dialler's side.
			var he *HandshakeError
			require.ErrorAs(t, err, &he)
			assert.ErrorIs(t, err, ErrHandshake)
			assert.ErrorIs(t, err, tc.reason)
			assert.Equal(t, !tc.diallerFinds, he.ByPeer, "who found the problem")
			assert.NotEmpty(t, he.Detail, "the error says what was wrong")

			// The listener's side: counted once, and logged with its reason.
			require.Eventually(t, func() bool { return tc.counted(l.Stats()) == 1 }, waitFor, time.Millisecond)
			require.Eventually(t, func() bool { return l.Stats().Open == 0 }, waitFor, time.Millisecond)
			assert.Zero(t, l.Stats().Accepted)
			assert.Contains(t, logs.String(), "reason="+ReasonName(tc.reason))
			assert.Contains(t, logs.String(), "level=WARN")
			assert.Equal(t, 1, bytes.Count([]byte(logs.String()), []byte("\n")), "one line for one connection:\n%s", logs)
		})
	}
}

// fakeListener serves one connection with a listener's handshake that
// speaks version, and reports its error.
func fakeListener(t *testing.T, version uint16) (addr string, result <-chan error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		nc, err := ln.Accept()
		if err != nil {
			errs <- err
			return
		}
		defer nc.Close()
		h := &handshake{rw: nc, local: Identity{Role: RoleSilo}, version: version}
		if _, err = io.ReadFull(nc, h.buf[:msgHeaderSize]); err == nil {
			_, err = h.listen()
		}
		errs <- err
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String(), errs
}

func TestDiallerRefusesAListenerOfAnotherVersion(t *testing.T) {
	addr, listenerErr := fakeListener(t, protocolVersion+1)
	_, err := Dial(t.Context(), addr, Options{}, newRecorder())
	var he *HandshakeError
	require.ErrorAs(t, err, &he)
	assert.ErrorIs(t, err, ErrVersionMismatch)
	assert.False(t, he.ByPeer, "the dialler found it")

	err = <-listenerErr
	require.ErrorAs(t, err, &he)
	assert.ErrorIs(t, err, ErrVersionMismatch)
	assert.True(t, he.ByPeer, "and told the listener")
}

func TestListenerRefusesWhatIsNoHandshake(t *testing.T) {
	logs, logger := newLogBuffer()
	l := listen(t, Options{}, func(*Conn) Handler { t.Error("accepted"); return nil }, WithLogger(logger))
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	_, err = nc.Write([]byte("GET / HTTP/1.1\r\nHost: granary\r\n\r\n"))
	require.NoError(t, err)
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(waitFor)))
	_, err = io.ReadAll(nc)
	if err != nil {
		assert.True(t, isConnectionLost(err), "closed, not timed out: %v", err)
	}
	require.Eventually(t, func() bool { return l.Stats().HandshakeMalformed == 1 }, waitFor, time.Millisecond)
	assert.Contains(t, logs.String(), "reason=malformed")
}

func TestListenerHandshakeDeadline(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	l := listen(t, Options{}, func(*Conn) Handler { t.Error("accepted"); return nil }, WithClock(fake))
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	_, err = nc.Write([]byte("GRNY")) // a start, and then nothing
	require.NoError(t, err)

	require.Eventually(t, func() bool { return fake.Pending() == 1 }, waitFor, time.Millisecond, "the deadline is armed")
	fake.Advance(DefaultHandshakeTimeout - time.Millisecond)
	assert.Zero(t, l.Stats().HandshakeTimeout)
	assert.Equal(t, 1, l.Stats().Open, "still inside the deadline")

	fake.Advance(time.Millisecond)
	require.NoError(t, nc.SetReadDeadline(time.Now().Add(waitFor)))
	_, err = nc.Read(make([]byte, 1))
	assert.True(t, isConnectionLost(err), "the listener closed it: %v", err)
	require.Eventually(t, func() bool { return l.Stats().HandshakeTimeout == 1 }, waitFor, time.Millisecond)
	assert.Zero(t, l.Stats().Open)
}

// silentListener accepts connections and never says a word.
func silentListener(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		for _, nc := range conns {
			nc.Close()
		}
	})
	return ln.Addr().String()
}

func TestDialHandshakeDeadline(t *testing.T) {
	addr := silentListener(t)
	fake := clock.NewFake(time.Unix(0, 0))
	errs := make(chan error, 1)
	go func() {
		_, err := Dial(t.Context(), addr, Options{HandshakeTimeout: time.Minute}, newRecorder(), WithClock(fake))
		errs <- err
	}()
	require.Eventually(t, func() bool { return fake.Pending() == 1 }, waitFor, time.Millisecond)
	fake.Advance(time.Minute)
	select {
	case err := <-errs:
		assert.ErrorIs(t, err, ErrHandshakeTimeout)
		assert.ErrorIs(t, err, ErrHandshake)
	case <-time.After(waitFor):
		t.Fatal("Dial outlived its handshake deadline")
	}
}

func TestDialContextEndsTheHandshake(t *testing.T) {
	addr := silentListener(t)
	fake := clock.NewFake(time.Unix(0, 0)) // never advanced: only ctx can end the wait
	ctx, cancel := context.WithCancel(t.Context())
	errs := make(chan error, 1)
	go func() {
		_, err := Dial(ctx, addr, Options{}, newRecorder(), WithClock(fake))
		errs <- err
	}()
	require.Eventually(t, func() bool { return fake.Pending() == 1 }, waitFor, time.Millisecond)
	cancel()
	select {
	case err := <-errs:
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, ErrHandshakeAborted)
	case <-time.After(waitFor):
		t.Fatal("Dial ignored its context")
	}
}

func TestListenerCloseEndsHandshakes(t *testing.T) {
	l, err := Listen("127.0.0.1:0", Options{}, func(*Conn) Handler { return &echoHandler{} }, WithLogger(quiet))
	require.NoError(t, err)
	nc, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer nc.Close()
	require.Eventually(t, func() bool { return l.Stats().Open == 1 }, waitFor, time.Millisecond)
	require.NoError(t, l.Close())
	st := l.Stats()
	assert.Zero(t, st.Open)
	assert.Zero(t, st.HandshakeAborted, "closing our own listener is no failure of the peer's")
}

func TestHandshakeErrorText(t *testing.T) {
	err := error(&HandshakeError{Reason: ErrClusterMismatch, ByPeer: true, Detail: `the listener is not in cluster "b"`})
	assert.Equal(t, `transport: handshake failed: cluster id mismatch (refused by the peer): the listener is not in cluster "b"`, err.Error())
	cause := errors.New("connection reset")
	err = &HandshakeError{Reason: ErrHandshakeAborted, Err: cause}
	assert.Equal(t, "transport: handshake failed: connection lost during the handshake: connection reset", err.Error())
	assert.ErrorIs(t, err, cause)
	assert.NotErrorIs(t, err, ErrClusterMismatch)
}
