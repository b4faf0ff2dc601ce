package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
)

func TestSnapshotShowsTheSilosLimitersAndTheirHottestKeys(t *testing.T) {
	s, reg := startSilo(t)
	ctx := context.Background()
	hot := ratelimit.FixedWindow(s.Caller(), "hot")
	require.NoError(t, hot.Configure(ctx, ratelimit.FixedWindowOptions{PermitLimit: 4, Window: time.Hour}))
	warm := ratelimit.FixedWindow(s.Caller(), "warm")
	require.NoError(t, warm.Configure(ctx, ratelimit.FixedWindowOptions{PermitLimit: 10, Window: time.Hour}))
	bucket := ratelimit.TokenBucket(s.Caller(), "bucket")
	require.NoError(t, bucket.Configure(ctx, ratelimit.TokenBucketOptions{TokenLimit: 8, TokensPerPeriod: 1, ReplenishmentPeriod: time.Hour}))
	assert.Equal(t, 2, acquire(t, hot, 6))
	assert.Equal(t, 0, acquire(t, warm, 3))
	assert.Equal(t, 0, acquire(t, bucket, 2))

	d, err := New(s, reg, Options{ShowKeys: true, Hottest: 2})
	require.NoError(t, err)
	snap := d.Snapshot(ctx)

	assert.Equal(t, "dash", snap.Self)
	require.Len(t, snap.Members, 1)
	assert.Equal(t, "active", snap.Members[0].State)
	assert.Equal(t, []TypeCount{{pb.FixedWindowLimiterGrainType, 2}, {pb.TokenBucketLimiterGrainType, 1}}, snap.Activations)
	require.NotNil(t, snap.Limiters)
	assert.Equal(t, uint64(4+3+2), snap.Limiters.Granted)
	assert.Equal(t, uint64(2), snap.Limiters.Rejected)

	require.NotNil(t, snap.Keys)
	assert.Equal(t, 3, snap.Keys.Active)
	assert.Equal(t, 3, snap.Keys.Asked)
	require.Len(t, snap.Keys.Hottest, 2, "Hottest bounds the list")
	first, second := snap.Keys.Hottest[0], snap.Keys.Hottest[1]
	assert.Equal(t, Key{Algorithm: "fixed-window", Key: "hot", Limit: 4, Available: 0, Utilization: 1, Succeeded: 4, Refused: 2}, first)
	assert.Equal(t, "warm", second.Key)
	assert.InDelta(t, 0.3, second.Utilization, 1e-9)

	calls := map[string]MethodCalls{}
	for _, c := range snap.Calls {
		calls[c.Type+"/"+c.Method] = c
	}
	try := calls[pb.FixedWindowLimiterGrainType+"/TryAcquire"]
	assert.Equal(t, uint64(9), try.Total, "the calls come from the silo's instruments: %+v", snap.Calls)
	assert.Equal(t, uint64(9), try.Outcomes["ok"], "a refused lease is an answer")
	assert.Equal(t, uint64(9), try.Timed)
	assert.Greater(t, try.P99, 0.0)
	assert.GreaterOrEqual(t, try.P99, try.P50)
	_, asked := calls[pb.FixedWindowLimiterGrainType+"/Statistics"]
	assert.False(t, asked, "the calls are read before the keys are asked")
}

func TestThePublicSnapshotLeavesTheKeysOut(t *testing.T) {
	s, reg := startSilo(t)
	acquire(t, ratelimit.FixedWindow(s.Caller(), "user:42"), 1)
	d, err := New(s, reg, Options{})
	require.NoError(t, err)
	mux := http.NewServeMux()
	d.Register(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, SnapshotPath, nil))
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.NotContains(t, rec.Body.String(), "user:42")
	var snap map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &snap))
	assert.NotContains(t, snap, "keys")
	assert.Contains(t, snap, "activations")
}

func TestSnapshotsAreSharedWithinMinInterval(t *testing.T) {
	s, reg := startSilo(t)
	d, err := New(s, reg, Options{MinInterval: time.Minute})
	require.NoError(t, err)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	d.now = func() time.Time { return now }
	first, err := d.encoded(context.Background())
	require.NoError(t, err)
	acquire(t, ratelimit.FixedWindow(s.Caller(), "k"), 1)
	now = now.Add(59 * time.Second)
	again, err := d.encoded(context.Background())
	require.NoError(t, err)
	assert.Equal(t, string(first), string(again), "within MinInterval, the same snapshot")
	now = now.Add(time.Second)
	fresh, err := d.encoded(context.Background())
	require.NoError(t, err)
	assert.NotEqual(t, string(first), string(fresh))
	assert.Contains(t, string(fresh), pb.FixedWindowLimiterGrainType)
}

func TestThePageAndItsAssetsAreServedFromTheBinary(t *testing.T) {
	s, reg := startSilo(t)
	d, err := New(s, reg, Options{})
	require.NoError(t, err)
	mux := http.NewServeMux()
	d.Register(mux)
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	page := get(Path)
	require.Equal(t, http.StatusOK, page.Code)
	assert.Contains(t, page.Header().Get("Content-Type"), "text/html")
	assert.Equal(t, "default-src 'self'", page.Header().Get("Content-Security-Policy"))
	for _, asset := range []string{"app.js", "style.css"} {
		assert.Contains(t, page.Body.String(), `"`+asset+`"`)
		rec := get(Path + asset)
		assert.Equal(t, http.StatusOK, rec.Code, asset)
		assert.NotEmpty(t, rec.Body.String(), asset)
	}
	assert.NotContains(t, page.Body.String(), "//", "no asset from elsewhere")
	assert.Equal(t, http.StatusMovedPermanently, get("/dashboard").Code)
	assert.Equal(t, http.StatusNotFound, get(Path+"nothing.js").Code)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, SnapshotPath, strings.NewReader("{}")))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code, "read-only")
}

func TestOptionsAreValidated(t *testing.T) {
	for _, o := range []Options{{MinInterval: -1}, {MaxKeys: 2, Hottest: 3}, {CallTimeout: -time.Second}} {
		_, err := New(nil, nil, o)
		assert.ErrorIs(t, err, ErrInvalidOptions, "%+v", o)
	}
	_, err := New(nil, nil, Options{})
	assert.ErrorIs(t, err, ErrInvalidOptions, "no silo")
}
