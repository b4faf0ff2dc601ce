package persistence

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// storeOnly hides every method of a Store but the three of the interface,
// for the stores that cannot claim.
type storeOnly struct{ Store }

// A second activation of a grain, opened while the first still runs (as
// on a silo the cluster took for dead), makes the first one's next write
// fail instead of landing under it: the store never holds a change the new
// activation did not start from. Without the claim the old activation's
// write would pass the ETag check, the new one having written nothing, and
// the new one would serve the state from before it.
func TestOpenFencesTheRecordsOpenedBefore(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(Store) Store
	}{
		{"claiming store", nil},
		{"store without Claim", func(s Store) Store { return storeOnly{s} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, tc.wrap)
			_, err := fx.store.Write(context.Background(), testKey, []byte("4"), "")
			require.NoError(t, err)

			survivor := newTestOwner(t)
			old := survivor.open(t, fx.f, testKey)
			survivor.do(t, func() { survivor.state = 5; old.MarkDirty() })

			successor := newTestOwner(t)
			current, data, err := fx.f.Open(context.Background(), testKey, successor.schedule, successor.snapshot)
			require.NoError(t, err)
			assert.Equal(t, []byte("4"), data)
			_, etag, err := fx.store.Read(context.Background(), testKey)
			require.NoError(t, err)
			assert.Equal(t, etag, current.ETag(), "the new record holds the claimed ETag")
			assert.NotEqual(t, etag, old.ETag())

			survivor.do(t, func() { assert.ErrorIs(t, old.Flush(context.Background()), ErrConflict) })
			assert.Equal(t, "4", fx.stored(t, testKey), "the fenced write did not land")

			successor.do(t, func() { successor.state = 6; assert.NoError(t, current.Flush(context.Background())) })
			assert.Equal(t, "6", fx.stored(t, testKey))
			assert.Equal(t, uint64(2), fx.f.Stats().Claims, "each Open found the state stored")
		})
	}
}

// A state nothing stores yet has no ETag to claim: Open writes nothing.
func TestOpenClaimsNothingForAStateNotStored(t *testing.T) {
	fx := newFixture(t, nil)
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)
	assert.Empty(t, r.ETag())
	assert.Zero(t, fx.store.Len())
	assert.Zero(t, fx.f.Stats().Claims)
}

// changingStore writes a new value under every claim's feet, the first
// changes times.
type changingStore struct {
	*MemoryStore
	changes atomic.Int32
}

func (s *changingStore) Claim(ctx context.Context, key Key, etag string) (string, error) {
	if s.changes.Add(-1) >= 0 {
		if _, err := s.MemoryStore.Write(ctx, key, []byte("changed"), etag); err != nil {
			return "", err
		}
	}
	return s.MemoryStore.Claim(ctx, key, etag)
}

// A state that another writer changes between Open's read and its claim is
// read again, and Open gives up, with the conflict, only when it keeps
// changing.
func TestOpenReadsAgainWhenTheStateChangesUnderItsClaim(t *testing.T) {
	for _, tc := range []struct {
		changes int32
		ok      bool
	}{{1, true}, {claimAttempts - 1, true}, {claimAttempts, false}} {
		store := &changingStore{MemoryStore: NewMemoryStore()}
		store.changes.Store(tc.changes)
		fx := newFixture(t, func(Store) Store { return store })
		_, err := store.Write(context.Background(), testKey, []byte("first"), "")
		require.NoError(t, err)
		o := newTestOwner(t)
		r, data, err := fx.f.Open(context.Background(), testKey, o.schedule, o.snapshot)
		if !tc.ok {
			assert.ErrorIs(t, err, ErrConflict, "%d changes", tc.changes)
			assert.Nil(t, r)
			continue
		}
		require.NoError(t, err, "%d changes", tc.changes)
		assert.Equal(t, []byte("changed"), data, "%d changes: the data read after the last change", tc.changes)
		_, etag, err := store.Read(context.Background(), testKey)
		require.NoError(t, err)
		assert.Equal(t, etag, r.ETag())
	}
}
