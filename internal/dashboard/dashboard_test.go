package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/grains/ratelimit"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	dpb "github.com/granary-go/granary/internal/dashboard/dashboardpb"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/silohost"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/testcluster"
)

func actorID() actor.GrainID { return actor.GrainID{Type: dpb.StatsGrainType} }

func TestSnapshotShowsTheSilosLimitersAndTheirHottestKeys(t *testing.T) {
	s, d, _ := startSilo(t, Options{Hottest: 2})
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

	snap := d.Snapshot(ctx, true)

	assert.Equal(t, "dash", snap.Self)
	require.Len(t, snap.Members, 1)
	assert.Equal(t, "active", snap.Members[0].State)
	assert.Equal(t, []TypeActivations{
		{Type: pb.FixedWindowLimiterGrainType, Count: 2, Silos: map[string]int64{"dash": 2}},
		{Type: pb.TokenBucketLimiterGrainType, Count: 1, Silos: map[string]int64{"dash": 1}},
	}, snap.Activations)
	require.Len(t, snap.Silos, 1)
	assert.True(t, snap.Silos[0].Answered)
	assert.Equal(t, int64(3), snap.Silos[0].Activations)
	assert.Equal(t, snap.Members[0].Generation, snap.Silos[0].Generation)
	require.NotNil(t, snap.Limiters)
	assert.Equal(t, uint64(4+3+2), snap.Limiters.Granted)
	assert.Equal(t, uint64(2), snap.Limiters.Rejected)
	assert.Equal(t, snap.Limiters, snap.Silos[0].Limiters)

	require.NotNil(t, snap.Keys)
	assert.Equal(t, int64(3), snap.Keys.Active)
	assert.Equal(t, int64(3), snap.Keys.Asked)
	require.Len(t, snap.Keys.Hottest, 2, "Hottest bounds the list")
	first, second := snap.Keys.Hottest[0], snap.Keys.Hottest[1]
	assert.Equal(t, Key{Algorithm: "fixed-window", Key: "hot", Silo: "dash", Limit: 4, Available: 0, Utilization: 1, Succeeded: 4, Refused: 2}, first)
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
	assert.Equal(t, snap.Silos[0].Calls, func() (n uint64) {
		for _, c := range snap.Calls {
			n += c.Total
		}
		return n
	}())
	_, asked := calls[pb.FixedWindowLimiterGrainType+"/Statistics"]
	assert.False(t, asked, "the calls are read before the keys are asked")
}

func TestThePublicSnapshotLeavesTheKeysOut(t *testing.T) {
	s, d, _ := startSilo(t, Options{})
	acquire(t, ratelimit.FixedWindow(s.Caller(), "user:42"), 1)
	mux := http.NewServeMux()
	d.Register(mux, false)
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
	s, d, _ := startSilo(t, Options{MinInterval: time.Minute})
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	d.now = func() time.Time { return now }
	first, err := d.encoded(context.Background(), false)
	require.NoError(t, err)
	acquire(t, ratelimit.FixedWindow(s.Caller(), "k"), 1)
	now = now.Add(59 * time.Second)
	again, err := d.encoded(context.Background(), false)
	require.NoError(t, err)
	assert.Equal(t, string(first), string(again), "within MinInterval, the same snapshot")
	now = now.Add(time.Second)
	fresh, err := d.encoded(context.Background(), false)
	require.NoError(t, err)
	assert.NotEqual(t, string(first), string(fresh))
	assert.Contains(t, string(fresh), pb.FixedWindowLimiterGrainType)
}

func TestOneBuildServesEveryoneWhoAsksMeanwhile(t *testing.T) {
	var s shared[int]
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	var builds atomic.Int32
	release := make(chan struct{})
	build := func(context.Context) int { builds.Add(1); <-release; return 42 }
	var wg sync.WaitGroup
	got := make([]int, 5)
	for i := range got {
		wg.Go(func() {
			v, err := s.get(context.Background(), clock, time.Second, build)
			assert.NoError(t, err)
			got[i] = v
		})
	}
	require.Eventually(t, func() bool { return builds.Load() == 1 }, 10*time.Second, time.Millisecond)
	// One more who gives up while the build is under way.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.get(ctx, clock, time.Second, build)
	assert.ErrorIs(t, err, context.Canceled)
	close(release)
	wg.Wait()
	assert.Equal(t, []int{42, 42, 42, 42, 42}, got)
	assert.Equal(t, int32(1), builds.Load())
	now = now.Add(time.Second)
	v, err := s.get(context.Background(), clock, time.Second, func(context.Context) int { builds.Add(1); return 43 })
	require.NoError(t, err)
	assert.Equal(t, 43, v, "a second later, built anew")

	// A build that saw its ctx end is handed to its asker but not kept.
	ctx, cancel = context.WithCancel(context.Background())
	now = now.Add(time.Second)
	v, err = s.get(ctx, clock, time.Second, func(context.Context) int { cancel(); return 44 })
	require.NoError(t, err)
	assert.Equal(t, 44, v)
	v, err = s.get(context.Background(), clock, time.Second, func(context.Context) int { return 45 })
	require.NoError(t, err)
	assert.Equal(t, 45, v)
}

func TestThePageAndItsAssetsAreServedFromTheBinary(t *testing.T) {
	_, d, _ := startSilo(t, Options{})
	mux := http.NewServeMux()
	d.Register(mux, false)
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
	for _, o := range []Options{{MinInterval: -1}, {MaxKeys: 2, Hottest: 3}, {CallTimeout: -time.Second}, {PeerTimeout: -1}, {MaxKeys: 5000, Hottest: 2000}} {
		_, err := New(nil, nil, o)
		assert.ErrorIs(t, err, ErrInvalidOptions, "%+v", o)
	}
	_, err := New(nil, nil, Options{})
	assert.ErrorIs(t, err, ErrInvalidOptions, "no silo")
}

func TestADashboardComesBeforeItsSiloStarts(t *testing.T) {
	s, _, _ := startSilo(t, Options{})
	_, err := New(s, nil, Options{})
	assert.ErrorIs(t, err, silo.ErrStarted, "the service for the other silos is added before Start")
}

// Three silos, limiters spread over them by placement: any silo's page
// shows each silo's activations as that silo counts them, and the
// cluster's hottest keys on the admin page.
func TestOneSilosPageShowsTheWholeCluster(t *testing.T) {
	var mu sync.Mutex
	dashboards := map[string]*Dashboard{}
	t.Cleanup(func() { // after the cluster stops: cleanups run last first
		for _, d := range dashboards {
			d.Close()
		}
	})
	c := testcluster.New(t, testcluster.Options{Silos: 3, Register: func(s *silo.Silo) error {
		if err := ratelimit.Register(s, ratelimit.Defaults{}); err != nil {
			return err
		}
		d, err := New(s, nil, Options{Hottest: 4})
		if err != nil {
			return err
		}
		mu.Lock()
		dashboards[s.Name()] = d
		mu.Unlock()
		return nil
	}})
	ctx := context.Background()
	for i := range 12 {
		l := ratelimit.FixedWindow(c.Silo(0).Caller(), fmt.Sprintf("user:%d", i))
		require.NoError(t, l.Configure(ctx, ratelimit.FixedWindowOptions{PermitLimit: 10, Window: time.Hour}))
		acquire(t, l, i%5+1)
	}
	own := func(i int) int64 { // what silo i itself counts
		n := int64(0)
		for _, id := range silohost.Host(c.Silo(i)).Active() {
			if id.Type == pb.FixedWindowLimiterGrainType {
				n++
			}
		}
		return n
	}
	for i := range 3 {
		self := testcluster.Name(i)
		var snap Snapshot
		require.Eventually(t, func() bool {
			snap = dashboards[self].Snapshot(ctx, true)
			if len(snap.Silos) != 3 || len(snap.Activations) != 1 || snap.Activations[0].Count != 12 {
				return false
			}
			for j := range 3 {
				if !snap.Silos[j].Answered || snap.Activations[0].Silos[testcluster.Name(j)] != own(j) {
					return false
				}
			}
			return true
		}, 30*time.Second, 20*time.Millisecond, "silo %s's page: %+v", self, &snap)
		assert.Equal(t, self, snap.Self)
		for j, sp := range snap.Silos {
			assert.Equal(t, snap.Members[j].Name, sp.Name)
			assert.Equal(t, snap.Members[j].Generation, sp.Generation)
			assert.Equal(t, own(j), sp.Activations, "silo %s as %s shows it", sp.Name, self)
		}
		require.NotNil(t, snap.Limiters)
		assert.Equal(t, uint64(1+2+3+4+5+1+2+3+4+5+1+2), snap.Limiters.Granted, "the cluster's acquisitions")
		require.NotNil(t, snap.Keys)
		assert.Equal(t, int64(12), snap.Keys.Active)
		var hottest []string
		for _, k := range snap.Keys.Hottest {
			hottest = append(hottest, k.Key)
		}
		// Two keys have five of their ten permits taken, two four.
		assert.Equal(t, []string{"user:4", "user:9", "user:3", "user:8"}, hottest, "the hottest keys of the cluster")
		for _, k := range snap.Keys.Hottest {
			where, found, err := c.Locate(ctx, actor.GrainID{Type: pb.FixedWindowLimiterGrainType, Key: k.Key})
			require.NoError(t, err)
			assert.True(t, found)
			assert.Equal(t, where, k.Silo, "a key names the silo its grain lives on")
		}
		public := dashboards[self].Snapshot(ctx, false)
		assert.Nil(t, public.Keys)
		body, err := json.Marshal(public)
		require.NoError(t, err)
		assert.NotContains(t, string(body), "user:", "the public page names no key of any silo")
	}

	// A client reaches no silo's part: the service is for silos only.
	_, err := dpb.NewStatsRef(c.Client(), "").Snapshot(ctx, &dpb.SnapshotRequest{Keys: true})
	assert.ErrorIs(t, err, actor.ErrUnknownGrainType)

	// A silo that crashed is shown as not answering while the view still
	// lists it; the page does not wait for it past PeerTimeout.
	c.Kill(2)
	var snap Snapshot
	require.Eventually(t, func() bool {
		snap = dashboards[testcluster.Name(0)].Snapshot(ctx, false)
		return len(snap.Silos) == 3 && snap.Silos[0].Answered && snap.Silos[1].Answered && !snap.Silos[2].Answered
	}, 30*time.Second, 10*time.Millisecond, "silo-2 listed, not answering: %+v", &snap)
	assert.NotEmpty(t, snap.Silos[2].Error)
	t.Logf("silo-2 on the page: %s", snap.Silos[2].Error)
	assert.NotContains(t, snap.Activations[0].Silos, testcluster.Name(2), "no figure of a silo that did not answer")
}

// A silo that does not answer in time, or answers badly, is shown as
// such; the others' parts are there all the same.
func TestASilosThatDoesNotAnswerIsShownAsSuch(t *testing.T) {
	s, d, _ := startSilo(t, Options{PeerTimeout: 50 * time.Millisecond})
	acquire(t, ratelimit.FixedWindow(s.Caller(), "alice"), 1)
	view := d.view()
	for _, peer := range []string{"good", "keys-unasked", "silent", "wrong-name"} {
		view.Members = append(view.Members, silo.MemberView{Member: cluster.Member{ID: peer}, State: cluster.StatusActive})
	}
	d.view = func() silo.ClusterView { return view }
	d.ask = func(ctx context.Context, peer string, keys bool) (*dpb.SnapshotReply, error) {
		p := seedAnswer()
		p.Silo = peer
		switch peer {
		case "silent":
			<-ctx.Done()
			return nil, fmt.Errorf("%w: %w", proxy.ErrTimeout, ctx.Err())
		case "wrong-name":
			p.Silo = "good"
		case "keys-unasked":
			keys = false
		}
		b, err := proxy.AppendMessage(nil, p)
		require.NoError(t, err)
		return decodeAnswer(b, keys, d.opts.Hottest)
	}
	snap := d.Snapshot(context.Background(), true)
	parts := map[string]SiloPart{}
	for _, sp := range snap.Silos {
		parts[sp.Name] = sp
	}
	assert.True(t, parts["dash"].Answered)
	assert.True(t, parts["good"].Answered)
	assert.Equal(t, int64(2), parts["good"].Activations)
	for _, peer := range []string{"keys-unasked", "silent", "wrong-name"} {
		assert.False(t, parts[peer].Answered, peer)
		assert.NotEmpty(t, parts[peer].Error, peer)
	}
	assert.Contains(t, parts["silent"].Error, "deadline exceeded")
	assert.Contains(t, parts["keys-unasked"].Error, "keys not asked for")
	require.Len(t, snap.Activations, 1)
	assert.Equal(t, map[string]int64{"dash": 1, "good": 2}, snap.Activations[0].Silos, "only the parts that came")
	var keys []string
	for _, k := range snap.Keys.Hottest {
		keys = append(keys, k.Silo+"/"+k.Key)
	}
	assert.Equal(t, []string{"good/alice", "dash/alice", "good/search"}, keys)
}

func TestAnAnswerOutOfBoundsIsRefused(t *testing.T) {
	huge := seedAnswer()
	huge.Keys = nil
	for range maxTypes {
		huge.Activations = append(huge.Activations, &dpb.TypeCount{Type: strings.Repeat("t", maxNameBytes), Count: 1})
	}
	b, err := proxy.AppendMessage(nil, huge)
	require.NoError(t, err)
	require.Greater(t, len(b), maxAnswerBytes)
	_, err = decodeAnswer(b, true, DefaultHottest)
	assert.ErrorIs(t, err, ErrBadAnswer)
	assert.Contains(t, err.Error(), "bytes, more than")

	for name, spoil := range map[string]func(p *dpb.SnapshotReply){
		"negative activations": func(p *dpb.SnapshotReply) { p.Activations[0].Count = -1 },
		"too many types": func(p *dpb.SnapshotReply) {
			for range maxTypes {
				p.Activations = append(p.Activations, &dpb.TypeCount{Type: "t"})
			}
		},
		"a long method":       func(p *dpb.SnapshotReply) { p.Calls[0].Method = strings.Repeat("m", maxNameBytes+1) },
		"bounds out of order": func(p *dpb.SnapshotReply) { p.Calls[0].Bounds = []float64{0.01, 0.001} },
		"counts falling":      func(p *dpb.SnapshotReply) { p.Calls[0].Cumulative = []uint64{3, 1} },
		"more than timed":     func(p *dpb.SnapshotReply) { p.Calls[0].Cumulative = []uint64{1, 4} },
		"too many keys": func(p *dpb.SnapshotReply) {
			for range DefaultHottest {
				p.Keys.Hottest = append(p.Keys.Hottest, &dpb.Key{Algorithm: "fixed-window", Key: "k"})
			}
		},
		"an unknown algorithm": func(p *dpb.SnapshotReply) { p.Keys.Hottest[0].Algorithm = "<script>" },
		"a negative limit":     func(p *dpb.SnapshotReply) { p.Keys.Hottest[0].Limit = -1 },
	} {
		p := seedAnswer()
		spoil(p)
		b, err := proxy.AppendMessage(nil, p)
		require.NoError(t, err, name)
		_, err = decodeAnswer(b, true, DefaultHottest)
		assert.ErrorIs(t, err, ErrBadAnswer, name)
	}
	b, err = proxy.AppendMessage(nil, seedAnswer())
	require.NoError(t, err)
	_, err = decodeAnswer(b, true, DefaultHottest)
	assert.NoError(t, err, "the seed itself is good")
}

// A part built for another silo is not cut short at the asker's timeout:
// finished, it serves the next ask at once.
func TestAPartOutlastsTheAskersTimeout(t *testing.T) {
	_, d, _ := startSilo(t, Options{PeerTimeout: time.Millisecond})
	var builds atomic.Int32
	started, release := make(chan time.Duration, 1), make(chan struct{})
	d.build = func(ctx context.Context, keys bool) *dpb.SnapshotReply {
		builds.Add(1)
		deadline, _ := ctx.Deadline()
		started <- time.Until(deadline)
		<-release
		return d.buildPart(ctx, keys)
	}
	payload, err := proxy.AppendMessage(nil, &dpb.SnapshotRequest{})
	require.NoError(t, err)
	ask := func() *recorder {
		rec := &recorder{done: make(chan struct{})}
		d.serve(&host.Request{Target: actorID(), MethodID: dpb.Stats_Snapshot_Method.ID, Payload: payload, Reply: rec,
			FromSilo: true, Timeout: time.Millisecond})
		return rec
	}
	first := ask()
	left := <-started
	assert.Greater(t, left, partBudget-time.Second, "the build's deadline is the budget's, not the asker's millisecond")
	close(release)
	<-first.done
	require.NoError(t, first.err)
	again := ask()
	<-again.done
	require.NoError(t, again.err)
	assert.Same(t, first.reply, again.reply, "the next ask gets the part built")
	assert.Equal(t, int32(1), builds.Load())
}
