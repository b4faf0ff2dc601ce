package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/persistence"
)

// Run runs the conformance suite against stores made by newStore, one
// fresh, empty store for each subtest. newStore may skip or fail t, and may
// register cleanups on it.
func Run(t *testing.T, newStore func(t *testing.T) persistence.Store) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.test(t, newStore(t)) })
	}
}

var cases = []struct {
	name string
	test func(t *testing.T, s persistence.Store)
}{
	{"ReadMissing", testReadMissing},
	{"WriteThenRead", testWriteThenRead},
	{"ETagChangesOnEveryWrite", testETagChangesOnEveryWrite},
	{"StaleETagConflicts", testStaleETagConflicts},
	{"Delete", testDelete},
	{"DeleteThenRecreate", testDeleteThenRecreate},
	{"EmptyValues", testEmptyValues},
	{"LargeValue", testLargeValue},
	{"ManyKeys", testManyKeys},
	{"DataIsCopied", testDataIsCopied},
	{"ConcurrentWritersOneWins", testConcurrentWritersOneWins},
	{"ConcurrentKeys", testConcurrentKeys},
	{"CancelledContext", testCancelledContext},
	{"ExpiredDeadline", testExpiredDeadline},
	{"Closed", testClosed},
}

var key = persistence.Key{GrainType: "storetest.Counter", GrainKey: "k1", Name: "state"}

// requireConflict checks that err is a *persistence.ConflictError about
// key with the given ETags, and matches persistence.ErrConflict.
func requireConflict(t *testing.T, err error, key persistence.Key, expected, actual string) {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, persistence.ErrConflict)
	var conflict *persistence.ConflictError
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, key, conflict.Key)
	assert.Equal(t, expected, conflict.Expected)
	assert.Equal(t, actual, conflict.Actual)
}

// requireStored checks that key holds data under etag.
func requireStored(t *testing.T, s persistence.Store, key persistence.Key, data []byte, etag string) {
	t.Helper()
	got, gotETag, err := s.Read(context.Background(), key)
	require.NoError(t, err, key.String())
	assert.Equal(t, data, got, key.String())
	assert.Equal(t, etag, gotETag, key.String())
}

// requireMissing checks that nothing is stored under key.
func requireMissing(t *testing.T, s persistence.Store, key persistence.Key) {
	t.Helper()
	data, etag, err := s.Read(context.Background(), key)
	require.ErrorIs(t, err, persistence.ErrNotFound, key.String())
	assert.Nil(t, data, key.String())
	assert.Empty(t, etag, key.String())
}

func testReadMissing(t *testing.T, s persistence.Store) {
	requireMissing(t, s, key)
}

func testWriteThenRead(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	etag1, err := s.Write(ctx, key, []byte("one"), "")
	require.NoError(t, err)
	require.NotEmpty(t, etag1, "a stored value has an etag")
	requireStored(t, s, key, []byte("one"), etag1)

	etag2, err := s.Write(ctx, key, []byte("two"), etag1)
	require.NoError(t, err)
	requireStored(t, s, key, []byte("two"), etag2)
}

func testETagChangesOnEveryWrite(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	seen := make(map[string]int)
	etag := ""
	for i := range 50 {
		var err error
		etag, err = s.Write(ctx, key, []byte("same bytes every time"), etag)
		require.NoError(t, err, "write %d", i)
		require.NotEmpty(t, etag)
		if first, dup := seen[etag]; dup {
			t.Fatalf("write %d returned etag %q, already returned by write %d", i, etag, first)
		}
		seen[etag] = i
	}
}

func testStaleETagConflicts(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	_, err := s.Write(ctx, key, []byte("x"), "never-issued")
	requireConflict(t, err, key, "never-issued", "") // update of a missing state
	requireMissing(t, s, key)

	etag1, err := s.Write(ctx, key, []byte("one"), "")
	require.NoError(t, err)
	_, err = s.Write(ctx, key, []byte("again"), "")
	requireConflict(t, err, key, "", etag1) // create of an existing state
	requireStored(t, s, key, []byte("one"), etag1)

	etag2, err := s.Write(ctx, key, []byte("two"), etag1)
	require.NoError(t, err)
	_, err = s.Write(ctx, key, []byte("stale"), etag1)
	requireConflict(t, err, key, etag1, etag2)
	_, err = s.Write(ctx, key, []byte("made up"), etag2+"x")
	requireConflict(t, err, key, etag2+"x", etag2)
	requireStored(t, s, key, []byte("two"), etag2) // refused writes changed nothing
}

func testDelete(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	require.NoError(t, s.Delete(ctx, key, ""), `deleting nothing with etag "" is a no-op`)
	requireConflict(t, s.Delete(ctx, key, "7"), key, "7", "")

	etag, err := s.Write(ctx, key, []byte("one"), "")
	require.NoError(t, err)
	requireConflict(t, s.Delete(ctx, key, ""), key, "", etag)
	requireConflict(t, s.Delete(ctx, key, etag+"x"), key, etag+"x", etag)
	requireStored(t, s, key, []byte("one"), etag) // refused deletes changed nothing

	require.NoError(t, s.Delete(ctx, key, etag))
	requireMissing(t, s, key)
	requireConflict(t, s.Delete(ctx, key, etag), key, etag, "") // deleted already
}

func testDeleteThenRecreate(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	// A holder of an etag from before a delete must never match the value
	// created after it, or it could overwrite state it has not seen.
	var old []string
	etag := ""
	for round := range 5 {
		var err error
		etag, err = s.Write(ctx, key, []byte("v"), "")
		require.NoError(t, err, "round %d", round)
		for _, o := range old {
			require.NotEqual(t, o, etag, "round %d: an etag from before a delete came back", round)
			_, err := s.Write(ctx, key, []byte("stale"), o)
			requireConflict(t, err, key, o, etag)
		}
		old = append(old, etag)
		require.NoError(t, s.Delete(ctx, key, etag))
	}
}

func testEmptyValues(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	// The flusher tells "nothing stored" from "stored and empty" by the
	// error, so an empty value must read back as found, and as a non-nil
	// slice.
	for i, data := range [][]byte{nil, {}} {
		k := persistence.Key{GrainType: key.GrainType, GrainKey: fmt.Sprintf("empty-%d", i), Name: key.Name}
		etag, err := s.Write(ctx, k, data, "")
		require.NoError(t, err)
		got, gotETag, err := s.Read(ctx, k)
		require.NoError(t, err, "a stored empty value is found")
		assert.NotNil(t, got, "a stored empty value reads back as a non-nil slice")
		assert.Empty(t, got)
		assert.Equal(t, etag, gotETag)
	}
}

func testLargeValue(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	data := make([]byte, 1<<20)
	random := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(random.Uint32())
	}
	copy(data, "\x00\xff\r\n$-1\r\n") // bytes a text protocol might mistake
	etag, err := s.Write(ctx, key, data, "")
	require.NoError(t, err)
	got, gotETag, err := s.Read(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, etag, gotETag)
	assert.True(t, bytes.Equal(data, got), "1 MiB of binary data must read back unchanged")
}

// trickyKeys differ only in where a separator, an escape or a brace falls,
// so a store that joins a key's parts naively stores two of them in one
// place.
var trickyKeys = []persistence.Key{
	{GrainType: "a/b", GrainKey: "c", Name: "s"},
	{GrainType: "a", GrainKey: "b/c", Name: "s"},
	{GrainType: "a:b", GrainKey: "c", Name: "s"},
	{GrainType: "a", GrainKey: "b:c", Name: "s"},
	{GrainType: "a", GrainKey: "b", Name: "c:s"},
	{GrainType: "a", GrainKey: "b:c:s", Name: ""},
	{GrainType: "a", GrainKey: "", Name: "b"},
	{GrainType: "", GrainKey: "a", Name: "b"},
	{GrainType: "", GrainKey: "", Name: ""},
	{GrainType: "t", GrainKey: "{k}", Name: "s"},
	{GrainType: "t", GrainKey: "}{", Name: "s"},
	{GrainType: "t{", GrainKey: "k}", Name: "s"},
	{GrainType: "t", GrainKey: "%3A", Name: "s"},
	{GrainType: "t", GrainKey: ":", Name: "s"},
	{GrainType: "t", GrainKey: "%", Name: "s"},
	{GrainType: "t", GrainKey: "%25", Name: "s"},
	{GrainType: "t", GrainKey: "k\x00", Name: "s"},
	{GrainType: "t", GrainKey: "k", Name: "s\x00"},
	{GrainType: "t", GrainKey: "grüße 🌾", Name: "s"},
	{GrainType: "t", GrainKey: strings.Repeat("long", 256), Name: "s"},
	{GrainType: "t", GrainKey: " k", Name: "s"},
	{GrainType: "t", GrainKey: "k", Name: "s"},
	{GrainType: "t", GrainKey: "K", Name: "s"},
	{GrainType: "t", GrainKey: "k", Name: "S"},
}

func testManyKeys(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	keys := append([]persistence.Key(nil), trickyKeys...)
	for i := range 500 {
		keys = append(keys, persistence.Key{GrainType: "storetest.Many", GrainKey: fmt.Sprint(i), Name: "state"})
	}
	etags := make([]string, len(keys))
	for i, k := range keys {
		var err error
		etags[i], err = s.Write(ctx, k, []byte(fmt.Sprint(i)), "")
		require.NoError(t, err, "key %d %q must be new: does it collide with an earlier one?", i, k)
	}
	for i, k := range keys {
		requireStored(t, s, k, []byte(fmt.Sprint(i)), etags[i])
	}
	// Deleting one key leaves its neighbours alone.
	for i := 0; i < len(trickyKeys); i += 2 {
		require.NoError(t, s.Delete(ctx, keys[i], etags[i]))
	}
	for i, k := range trickyKeys {
		if i%2 == 0 {
			requireMissing(t, s, k)
		} else {
			requireStored(t, s, k, []byte(fmt.Sprint(i)), etags[i])
		}
	}
}

func testDataIsCopied(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	in := []byte("abc")
	etag, err := s.Write(ctx, key, in, "")
	require.NoError(t, err)
	in[0] = 'X' // the writer reuses its buffer

	out, _, err := s.Read(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, []byte("abc"), out, "the store must not keep the writer's slice")
	out[1] = 'Y' // a reader scribbles on what it got

	requireStored(t, s, key, []byte("abc"), etag)
}

func testConcurrentWritersOneWins(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	etag, err := s.Write(ctx, key, []byte("start"), "")
	require.NoError(t, err)
	const rounds, writers = 20, 8
	for round := range rounds {
		type result struct {
			etag string
			err  error
		}
		results := make([]result, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				<-start
				e, err := s.Write(ctx, key, fmt.Appendf(nil, "%d/%d", round, w), etag)
				results[w] = result{e, err}
			})
		}
		close(start)
		wg.Wait()

		winner := -1
		for w, r := range results {
			if r.err == nil {
				require.Equal(t, -1, winner, "round %d: writers %d and %d both won with etag %q", round, winner, w, etag)
				winner = w
			}
		}
		require.NotEqual(t, -1, winner, "round %d: no writer won: %v", round, results)
		won := results[winner].etag
		for w, r := range results {
			if w != winner {
				// Every loser checked after the winner wrote, so it saw the
				// winner's etag.
				requireConflict(t, r.err, key, etag, won)
			}
		}
		requireStored(t, s, key, fmt.Appendf(nil, "%d/%d", round, winner), won)
		etag = won
	}
}

func testConcurrentKeys(t *testing.T, s persistence.Store) {
	ctx := context.Background()
	const workers, writes = 8, 50
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			k := persistence.Key{GrainType: key.GrainType, GrainKey: fmt.Sprintf("worker-%d", w), Name: key.Name}
			etag := ""
			for i := range writes {
				var err error
				if etag, err = s.Write(ctx, k, fmt.Appendf(nil, "%d", i), etag); err != nil {
					errs[w] = fmt.Errorf("write %d of %s: %w", i, k, err)
					return
				}
				data, got, err := s.Read(ctx, k)
				if err != nil || got != etag || string(data) != fmt.Sprint(i) {
					errs[w] = fmt.Errorf("read %d of %s: %q at %q (want %q), %v", i, k, data, got, etag, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
}

// testRefusedContext checks that every operation fails with want under ctx
// and changes nothing.
func testRefusedContext(t *testing.T, s persistence.Store, ctx context.Context, want error) {
	etag, err := s.Write(context.Background(), key, []byte("kept"), "")
	require.NoError(t, err)

	_, _, err = s.Read(ctx, key)
	assert.ErrorIs(t, err, want, "Read")
	_, err = s.Write(ctx, key, []byte("lost"), etag)
	assert.ErrorIs(t, err, want, "Write")
	other := persistence.Key{GrainType: key.GrainType, GrainKey: "never-created", Name: key.Name}
	_, err = s.Write(ctx, other, []byte("lost"), "")
	assert.ErrorIs(t, err, want, "Write of a new key")
	assert.ErrorIs(t, s.Delete(ctx, key, etag), want, "Delete")

	requireStored(t, s, key, []byte("kept"), etag)
	requireMissing(t, s, other)
}

func testCancelledContext(t *testing.T, s persistence.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	testRefusedContext(t, s, ctx, context.Canceled)
}

func testExpiredDeadline(t *testing.T, s persistence.Store) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	testRefusedContext(t, s, ctx, context.DeadlineExceeded)
}

// closer is what a store with a Close method offers.
type closer interface{ Close() error }

func testClosed(t *testing.T, s persistence.Store) {
	c, ok := s.(closer)
	if !ok {
		t.Skipf("%T has no Close method", s)
	}
	ctx := context.Background()
	etag, err := s.Write(ctx, key, []byte("x"), "")
	require.NoError(t, err)
	require.NoError(t, c.Close())

	_, _, readErr := s.Read(ctx, key)
	_, writeErr := s.Write(ctx, key, []byte("y"), etag)
	deleteErr := s.Delete(ctx, key, etag)
	for op, err := range map[string]error{"Read": readErr, "Write": writeErr, "Delete": deleteErr} {
		assert.ErrorIs(t, err, persistence.ErrClosed, "%s after Close", op)
		assert.False(t, errors.Is(err, persistence.ErrNotFound) || errors.Is(err, persistence.ErrConflict),
			"%s after Close: a closed store answers closed, not with a verdict on the data: %v", op, err)
	}
	assert.NoError(t, c.Close(), "Close is safe to call twice")
}
