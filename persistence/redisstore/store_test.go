package redisstore_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/redistest"
	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/persistence/redisstore"
)

const (
	waitFor   = 10 * time.Second
	pollEvery = 10 * time.Millisecond
)

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestUnreachableRedisIsUnavailable(t *testing.T) {
	s, err := redisstore.New(redisstore.Options{Addr: closedAddr(t)})
	require.NoError(t, err, "New does no I/O, so a server that is down is no error yet")
	defer s.Close()

	_, _, err = s.Read(bg, testKey)
	assert.ErrorIs(t, err, redisstore.ErrUnavailable)
	assert.NotErrorIs(t, err, persistence.ErrNotFound)
	_, err = s.Write(bg, testKey, []byte("x"), "")
	assert.ErrorIs(t, err, redisstore.ErrUnavailable)
	assert.NotErrorIs(t, err, persistence.ErrConflict)
	assert.ErrorIs(t, s.Delete(bg, testKey, ""), redisstore.ErrUnavailable)
	assert.ErrorIs(t, s.Ping(bg), redisstore.ErrUnavailable)
}

func TestStoreSurvivesARedisRestart(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	s := newStore(t, srv, redisstore.Options{})
	etag, err := s.Write(bg, testKey, []byte("1"), "")
	require.NoError(t, err)
	require.NoError(t, s.Ping(bg))

	srv.Stop()
	_, err = s.Write(bg, testKey, []byte("2"), etag)
	assert.ErrorIs(t, err, redisstore.ErrUnavailable)
	_, _, err = s.Read(bg, testKey)
	assert.ErrorIs(t, err, redisstore.ErrUnavailable)

	srv.Restart()
	var newETag string
	require.Eventually(t, func() bool {
		newETag, err = s.Write(bg, testKey, []byte("2"), etag)
		return err == nil
	}, waitFor, pollEvery, "the store reconnects once Redis is back: %v", err)
	data, got, err := s.Read(bg, testKey)
	require.NoError(t, err)
	assert.Equal(t, "2", string(data))
	assert.Equal(t, newETag, got)
}

// TestLostReplyIsNotMistakenForAConflict cuts the connection after Redis
// ran a write but before its reply arrives. The store cannot know whether
// the write landed; the next attempt, with the same expected ETag, must
// succeed all the same, or the owner would deactivate over a network blip.
func TestLostReplyIsNotMistakenForAConflict(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	direct := newStore(t, srv, redisstore.Options{})
	proxy := startReplyDropper(t, srv.Addr())
	s, err := redisstore.New(redisstore.Options{Addr: proxy.Addr(), KeyPrefix: direct.KeyPrefix()})
	require.NoError(t, err)
	defer s.Close()

	etag1, err := s.Write(bg, testKey, []byte("1"), "")
	require.NoError(t, err)
	// Load the delete script too, so that the reply dropped below is the
	// script's and not a NOSCRIPT that comes before it.
	require.NoError(t, s.Delete(bg, persistence.Key{GrainType: "counter", GrainKey: "never", Name: "state"}, ""))

	proxy.dropping.Store(true)
	_, err = s.Write(bg, testKey, []byte("2"), etag1)
	require.ErrorIs(t, err, redisstore.ErrUnavailable)
	data, etag2, err := direct.Read(bg, testKey)
	require.NoError(t, err)
	require.Equal(t, "2", string(data), "the write whose reply was lost did land")

	// Only the store that made the attempt may take it for its own.
	_, err = direct.Write(bg, testKey, []byte("other"), etag1)
	var conflict *persistence.ConflictError
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, etag2, conflict.Actual)

	proxy.dropping.Store(false)
	etag3, err := s.Write(bg, testKey, []byte("3"), etag1)
	require.NoError(t, err, "the retry must accept the store's own lost write")
	data, got, err := direct.Read(bg, testKey)
	require.NoError(t, err)
	assert.Equal(t, "3", string(data))
	assert.Equal(t, etag3, got)

	// The same for a delete.
	proxy.dropping.Store(true)
	require.ErrorIs(t, s.Delete(bg, testKey, etag3), redisstore.ErrUnavailable)
	_, _, err = direct.Read(bg, testKey)
	require.ErrorIs(t, err, persistence.ErrNotFound, "the delete whose reply was lost did land")
	proxy.dropping.Store(false)
	require.NoError(t, s.Delete(bg, testKey, etag3), "the retried delete finds its own work done")

	// Once Redis has answered about the key, the doubt is settled: the
	// old ETag is stale again.
	_, err = s.Write(bg, testKey, []byte("stale"), etag1)
	assert.ErrorIs(t, err, persistence.ErrConflict)
}

func TestForeignValueIsCorrupt(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	s := newStore(t, srv, redisstore.Options{})
	raw := s.KeyPrefix() + "{counter:k1}:state"

	_, err := srv.Command("SET", raw, "not a hash")
	require.NoError(t, err)
	_, _, err = s.Read(bg, testKey)
	assert.ErrorIs(t, err, redisstore.ErrCorrupt)
	_, err = s.Write(bg, testKey, []byte("x"), "")
	assert.ErrorIs(t, err, redisstore.ErrCorrupt)
	assert.ErrorIs(t, s.Delete(bg, testKey, ""), redisstore.ErrCorrupt)

	_, err = srv.Command("DEL", raw)
	require.NoError(t, err)
	_, err = srv.Command("HSET", raw, "d", "data without an etag")
	require.NoError(t, err)
	_, _, err = s.Read(bg, testKey)
	assert.ErrorIs(t, err, redisstore.ErrCorrupt)
}

func TestWrongPasswordIsRejected(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{Password: "right"})
	for _, password := range []string{"", "wrong"} {
		s := newStore(t, srv, redisstore.Options{Password: password})
		_, _, err := s.Read(bg, testKey)
		assert.ErrorIs(t, err, redisstore.ErrRejected, "password %q", password)
		assert.NotErrorIs(t, err, redisstore.ErrUnavailable)
		assert.NotContains(t, err.Error(), "right")
	}
	s := newStore(t, srv, redisstore.Options{Password: "right"})
	_, err := s.Write(bg, testKey, []byte("x"), "")
	assert.NoError(t, err)
}

func TestPrefixesAndDatabasesKeepClustersApart(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	prod := newStore(t, srv, redisstore.Options{KeyPrefix: "granary:prod:"})
	staging := newStore(t, srv, redisstore.Options{KeyPrefix: "granary:staging:"})
	otherDB := newStore(t, srv, redisstore.Options{KeyPrefix: "granary:prod:", DB: 1})

	_, err := prod.Write(bg, testKey, []byte("prod"), "")
	require.NoError(t, err)
	for _, s := range []*redisstore.Store{staging, otherDB} {
		_, _, err := s.Read(bg, testKey)
		assert.ErrorIs(t, err, persistence.ErrNotFound, s.String())
		_, err = s.Write(bg, testKey, []byte("mine"), "")
		assert.NoError(t, err, s.String())
	}
	data, _, err := prod.Read(bg, testKey)
	require.NoError(t, err)
	assert.Equal(t, "prod", string(data))
}

func TestNewWithClientLeavesTheClientOpen(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()
	s, err := redisstore.NewWithClient(client, "")
	require.NoError(t, err)
	assert.Equal(t, "granary:", s.KeyPrefix())
	assert.Equal(t, `redis://`+srv.Addr()+`/0 (key prefix "granary:")`, s.String())
	require.NoError(t, s.Ping(bg))

	require.NoError(t, s.Close())
	assert.ErrorIs(t, s.Ping(bg), persistence.ErrClosed)
	assert.NoError(t, client.Ping(bg).Err(), "the caller's client stays open")

	_, err = redisstore.NewWithClient(nil, "")
	assert.Error(t, err)
	_, err = redisstore.NewWithClient(client, "a}b")
	assert.Error(t, err)
}

func TestCloseClosesTheStoresOwnClient(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	s := newStore(t, srv, redisstore.Options{Password: "unused"})
	assert.NotContains(t, s.String(), "unused")
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is safe twice")
	_, _, err := s.Read(bg, testKey)
	assert.ErrorIs(t, err, persistence.ErrClosed)
}

func TestContextDeadlineBoundsACall(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	s := newStore(t, srv, redisstore.Options{ReadTimeout: time.Minute})
	require.NoError(t, s.Ping(bg))
	// A paused server holds every command for a second, after which the
	// read would succeed (nothing stored); only the caller's deadline can
	// end the wait early.
	_, err := srv.Command("CLIENT", "PAUSE", "1000", "ALL")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	_, _, err = s.Read(ctx, testKey)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}
