package redisstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/granary-go/granary/persistence"
)

// Store is a persistence.Store in Redis, shared by every silo that
// connects to the same server (or cluster) with the same key prefix. Each
// state is one Redis hash; ETag-checked writes and deletes run atomically
// in Redis as Lua scripts.
//
// A Store is safe for concurrent use. Create one with New or NewWithClient;
// Close it when the silo has stopped.
type Store struct {
	client redis.UniversalClient
	// ownsClient: New made the client, so Close closes it.
	ownsClient bool
	prefix     string
	describe   string
	closed     atomic.Bool
	doubts     doubts
}

var _ persistence.ExpiringStore = (*Store)(nil)

// New returns a Store that connects to Redis as opts say, filling opts'
// zero fields with defaults. It reports invalid options and does no I/O:
// connections open on first use (see Ping to check the server at start).
func New(opts Options) (*Store, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	client := redis.NewClient(&redis.Options{
		Addr:         opts.Addr,
		Username:     opts.Username,
		Password:     opts.Password,
		DB:           opts.DB,
		TLSConfig:    opts.TLS,
		PoolSize:     opts.PoolSize,
		DialTimeout:  opts.DialTimeout,
		ReadTimeout:  opts.ReadTimeout,
		WriteTimeout: opts.WriteTimeout,
		PoolTimeout:  opts.PoolTimeout,
		// A call's context bounds its network I/O, as the Store contract
		// asks.
		ContextTimeoutEnabled: true,
		// The flusher retries a failed write every period with a fresh
		// snapshot. A hidden retry inside the client would add latency to
		// every call while Redis is down, and would hide from the store
		// whether a first attempt reached Redis (see doubts).
		MaxRetries:    -1,
		DialerRetries: 1,
		// Maintenance notifications are a Redis Cloud feature, and Redis
		// before 7.2 refuses CLIENT SETINFO: asking for either would cost
		// every new connection a command that most servers refuse.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		DisableIdentity:          true,
	})
	return &Store{client: client, ownsClient: true, prefix: opts.KeyPrefix, describe: opts.String()}, nil
}

// NewFromURL returns a Store that connects as a redis:// or rediss:// URL
// says (see ParseURL for its form), for a binary's command line. Like New,
// it does no I/O.
func NewFromURL(rawURL string) (*Store, error) {
	opts, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return New(opts)
}

// NewWithClient returns a Store that uses client, which may be any
// go-redis client: a *redis.Client, a *redis.ClusterClient for Redis
// Cluster (the keys of one grain share a hash slot), or a failover client
// for Sentinel. keyPrefix "" means DefaultKeyPrefix. The caller keeps
// owning the client: Close does not close it.
//
// Set ContextTimeoutEnabled on the client so that contexts bound network
// I/O. The client's own retries (MaxRetries) are safe for writes, which the
// store makes idempotent; a delete retried after its first attempt landed
// reports a conflict with nothing stored, which makes the owner reload and
// find the state gone, as it asked.
func NewWithClient(client redis.UniversalClient, keyPrefix string) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: NewWithClient needs a client")
	}
	if keyPrefix == "" {
		keyPrefix = DefaultKeyPrefix
	}
	if err := checkKeyPrefix(keyPrefix); err != nil {
		return nil, fmt.Errorf("redisstore: key prefix %w", err)
	}
	return &Store{client: client, prefix: keyPrefix, describe: describeClient(client, keyPrefix)}, nil
}

// describeClient names a caller's client for String, without secrets.
func describeClient(client redis.UniversalClient, keyPrefix string) string {
	var where string
	switch c := client.(type) {
	case *redis.Client:
		where = fmt.Sprintf("redis://%s/%d", c.Options().Addr, c.Options().DB)
	case *redis.ClusterClient:
		where = "redis cluster " + strings.Join(c.Options().Addrs, ",")
	default:
		where = fmt.Sprintf("redis client %T", client)
	}
	return fmt.Sprintf("%s (key prefix %q)", where, keyPrefix)
}

// String describes where the store keeps state, for a startup log. It
// never contains a password.
func (s *Store) String() string { return s.describe }

// KeyPrefix returns the prefix that begins every key the store writes.
func (s *Store) KeyPrefix() string { return s.prefix }

// Ping checks that Redis answers, for a silo that wants to fail at start
// rather than at its first activation.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.usable(ctx, "ping"); err != nil {
		return err
	}
	if err := s.client.Ping(ctx).Err(); err != nil {
		err, _ := failure(ctx, "ping", err)
		return err
	}
	return nil
}

// Close makes every later call fail with an error matching
// persistence.ErrClosed and, if New made the client, closes it. It is safe
// to call twice.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) || !s.ownsClient {
		return nil
	}
	if err := s.client.Close(); err != nil {
		return fmt.Errorf("redisstore: close: %w", err)
	}
	return nil
}

// usable refuses a call on a closed store or with a context that has
// already ended, before anything is sent.
func (s *Store) usable(ctx context.Context, what string) error {
	if s.closed.Load() {
		return fmt.Errorf("redisstore: %s: %w", what, persistence.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: %s: %w", what, err)
	}
	return nil
}

// Read returns the state stored under key and its ETag, or
// persistence.ErrNotFound.
func (s *Store) Read(ctx context.Context, key persistence.Key) ([]byte, string, error) {
	if err := s.usable(ctx, "read "+key.String()); err != nil {
		return nil, "", err
	}
	fields, err := s.client.HMGet(ctx, redisKey(s.prefix, key), "e", "d").Result()
	if err != nil {
		err, _ := failure(ctx, "read "+key.String(), err)
		return nil, "", err
	}
	etag, hasETag := fields[0].(string)
	data, hasData := fields[1].(string)
	switch {
	case !hasETag && !hasData:
		return nil, "", persistence.ErrNotFound
	case !hasETag || !hasData || etag == "":
		return nil, "", fmt.Errorf("%w: read %s: a hash without its ETag or data", ErrCorrupt, key)
	}
	// make, not []byte(data): an empty value must read back non-nil.
	out := make([]byte, len(data))
	copy(out, data)
	return out, etag, nil
}

// Write stores data under key if etag is the stored ETag ("" if nothing is
// stored) and returns the new ETag, or a *persistence.ConflictError.
func (s *Store) Write(ctx context.Context, key persistence.Key, data []byte, etag string) (string, error) {
	return s.WriteExpiring(ctx, key, data, etag, 0)
}

// WriteExpiring is Write for a state that is worthless once ttl has
// passed: Redis drops the key then (PEXPIRE, in the same script as the
// write), so that state nobody reads again does not stay for ever. A ttl
// of 0 keeps the state until it is deleted; a ttl under a millisecond
// counts as one.
func (s *Store) WriteExpiring(ctx context.Context, key persistence.Key, data []byte, etag string, ttl time.Duration) (string, error) {
	newETag := rand.Text()
	if err := s.checked(ctx, writeScript, "write", key, etag, newETag, data, ttl); err != nil {
		return "", err
	}
	return newETag, nil
}

// Delete removes the state under key if etag is the stored ETag; with etag
// "" it succeeds when nothing is stored. A mismatch is a
// *persistence.ConflictError.
func (s *Store) Delete(ctx context.Context, key persistence.Key, etag string) error {
	// "" is what a delete leaves, so it is what a lost one proposed.
	return s.checked(ctx, deleteScript, "delete", key, etag, "", nil, 0)
}

// checked runs a check-and-change script (see scripts.go for its
// arguments) on key, expecting etag and proposing proposed, and keeps the
// store's doubts up to date with the outcome.
func (s *Store) checked(ctx context.Context, script *redis.Script, op string, key persistence.Key, etag, proposed string, data []byte, ttl time.Duration) error {
	what := op + " " + key.String()
	if err := s.usable(ctx, what); err != nil {
		return err
	}
	alternates := s.doubts.alternates(key, etag)
	args := make([]any, 0, 4+len(alternates))
	ttlMillis := int64(0)
	if ttl > 0 {
		ttlMillis = max(ttl.Milliseconds(), 1)
	}
	args = append(args, etag, proposed, data, strconv.FormatInt(ttlMillis, 10))
	for _, a := range alternates {
		args = append(args, a)
	}
	reply, err := script.Run(ctx, s.client, []string{redisKey(s.prefix, key)}, args...).Slice()
	if err != nil {
		err, out := failure(ctx, what, err)
		if out == inDoubt {
			s.doubts.add(key, etag, proposed)
		}
		return err
	}
	s.doubts.settle(key)
	ok, current, err := scriptReply(reply)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, what, err)
	case !ok:
		return &persistence.ConflictError{Key: key, Expected: etag, Actual: current}
	}
	return nil
}

// scriptReply reads a script's {ok, etag} reply.
func scriptReply(reply []any) (ok bool, etag string, err error) {
	if len(reply) != 2 {
		return false, "", fmt.Errorf("script reply %v: want two elements", reply)
	}
	flag, isInt := reply[0].(int64)
	etag, isString := reply[1].(string)
	if !isInt || !isString || (flag != 0 && flag != 1) {
		return false, "", fmt.Errorf("script reply %v: want {0 or 1, etag}", reply)
	}
	return flag == 1, etag, nil
}
