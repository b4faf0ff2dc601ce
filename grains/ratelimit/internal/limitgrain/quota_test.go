package limitgrain

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit/internal/contract"
	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
)

func leaseQuota(t *testing.T, g *fixedGrain, in *pb.QuotaRequest) *pb.QuotaReply {
	t.Helper()
	r, err := g.LeaseQuota(context.Background(), in)
	require.NoError(t, err)
	return r
}

var autoFixed = limiter.FixedWindowOptions{PermitLimit: 100, Window: time.Second}

func TestASliceIsChargedStoredAndExpiresWithItsWindow(t *testing.T) {
	f := newRuntime(t, pb.FixedWindowLimiterGrainType)
	g := newFixed(f, autoFixed)
	f.advance(300 * time.Millisecond)
	writes := f.writes
	r := leaseQuota(t, g, &pb.QuotaRequest{Holder: 1, Rate: 1000, Need: 1})
	require.Equal(t, int64(100), r.Permits, "the only holder gets the window")
	require.NotZero(t, r.SliceId)
	require.True(t, r.Exhausted)
	require.Equal(t, int64(700*time.Millisecond), r.ExpiresInNanos, "what is left of the window")
	require.Equal(t, int64(time.Second), r.IntervalNanos)
	require.Equal(t, writes+1, f.writes, "stored before the answer")
	require.Equal(t, int64(0), stats(t, g).AvailablePermits)
	// The next window has its quota again.
	f.advance(700 * time.Millisecond)
	require.Equal(t, int64(100), stats(t, g).AvailablePermits)
}

func TestNoSliceWhileAcquisitionsWait(t *testing.T) {
	f := newRuntime(t, pb.FixedWindowLimiterGrainType)
	g := newFixed(f, limiter.FixedWindowOptions{PermitLimit: 1, QueueLimit: 1, Window: time.Second})
	acquire(f, g, 1).lease(t)
	acquire(f, g, 1).waiting(t)
	r := leaseQuota(t, g, &pb.QuotaRequest{Holder: 1, Rate: 1000, Need: 1})
	require.True(t, r.Exact)
	require.Zero(t, r.Permits)
}

func TestNoSliceUnderManualReplenishment(t *testing.T) {
	f := newRuntime(t, pb.FixedWindowLimiterGrainType)
	g := newFixed(f, limiter.FixedWindowOptions{PermitLimit: 10, Window: time.Second, ManualReplenishment: true})
	require.True(t, leaseQuota(t, g, &pb.QuotaRequest{Holder: 1, Rate: 1000, Need: 1}).Exact)
	require.Equal(t, int64(10), stats(t, g).AvailablePermits)
}

func TestASliceRequestInstallsTheHoldersOptions(t *testing.T) {
	f := newRuntime(t, pb.FixedWindowLimiterGrainType)
	g := newFixed(f, autoFixed)
	other := autoFixed
	other.PermitLimit = 5
	encoded, err := proxy.AppendMessage(nil, contract.FixedWindowToWire(other))
	require.NoError(t, err)
	require.Equal(t, int64(5), leaseQuota(t, g, &pb.QuotaRequest{Holder: 1, Rate: 1000, Need: 1, Options: encoded}).Permits)
	require.Equal(t, other, g.options)
	require.True(t, g.configured)

	invalid, err := proxy.AppendMessage(nil, contract.FixedWindowToWire(limiter.FixedWindowOptions{PermitLimit: -1}))
	require.NoError(t, err)
	_, err = g.LeaseQuota(context.Background(), &pb.QuotaRequest{Holder: 1, Options: invalid})
	require.Error(t, err, "invalid options")
	_, err = g.LeaseQuota(context.Background(), &pb.QuotaRequest{Holder: 1, Options: []byte{0xff}})
	require.Error(t, err, "options that do not decode")
	require.Equal(t, other, g.options, "nothing changed")
}

func TestASliceTheStoreRefusedIsRefunded(t *testing.T) {
	f := newRuntime(t, pb.FixedWindowLimiterGrainType)
	g := newFixed(f, autoFixed)
	f.writeErr = errors.New("store down")
	r := leaseQuota(t, g, &pb.QuotaRequest{Holder: 1, Rate: 1000, Need: 1})
	require.True(t, r.Exact)
	require.Equal(t, int64(100), stats(t, g).AvailablePermits)
}

func TestUnusedPermitsOfASliceComeBackOnceWithinItsWindow(t *testing.T) {
	f := newRuntime(t, pb.FixedWindowLimiterGrainType)
	g := newFixed(f, autoFixed)
	r := leaseQuota(t, g, &pb.QuotaRequest{Holder: 1, Rate: 1000, Need: 1})
	ret := func(holder, id uint64, unused int64) int64 {
		out, err := g.ReturnQuota(context.Background(), &pb.ReturnQuotaRequest{Holder: holder, SliceId: id, Unused: unused})
		require.NoError(t, err)
		return out.Returned
	}
	require.Zero(t, ret(2, r.SliceId, 40), "another holder's slice")
	require.Equal(t, int64(40), ret(1, r.SliceId, 40))
	require.Zero(t, ret(1, r.SliceId, 40), "returned once")
	require.Equal(t, int64(40), stats(t, g).AvailablePermits)
	// More than the slice held comes back as the slice.
	r = leaseQuota(t, g, &pb.QuotaRequest{Holder: 1, Rate: 1000, Need: 1})
	require.Equal(t, int64(40), ret(1, r.SliceId, 1000))
	// Once the window ended nothing comes back.
	r = leaseQuota(t, g, &pb.QuotaRequest{Holder: 1, Rate: 1000, Need: 1})
	f.advance(time.Second)
	require.Zero(t, ret(1, r.SliceId, 10))
}

func TestAConfigurationChangeForgetsSlices(t *testing.T) {
	f := newRuntime(t, pb.FixedWindowLimiterGrainType)
	g := newFixed(f, autoFixed)
	r := leaseQuota(t, g, &pb.QuotaRequest{Holder: 1, Rate: 1000, Need: 1})
	_, err := g.Reset(context.Background(), &pb.ResetRequest{})
	require.NoError(t, err)
	out, err := g.ReturnQuota(context.Background(), &pb.ReturnQuotaRequest{Holder: 1, SliceId: r.SliceId, Unused: 10})
	require.NoError(t, err)
	require.Zero(t, out.Returned)
	require.Equal(t, int64(100), stats(t, g).AvailablePermits)
}

// FuzzSliceRequests feeds slice requests and returns, as they come off
// the network, to a fixed-window grain: whatever they say, the grain
// never hands out more than its window holds, nor takes back more than it
// handed out.
func FuzzSliceRequests(f *testing.F) {
	seed, err := (&pb.QuotaRequest{Holder: 1, Rate: 1000, Need: 2}).AppendGranaryWire(nil)
	if err != nil {
		f.Fatal(err)
	}
	back, err := (&pb.ReturnQuotaRequest{Holder: 1, SliceId: 1, Unused: 3}).AppendGranaryWire(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed, back)
	f.Add([]byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, []byte{})
	f.Fuzz(func(t *testing.T, request, giveBack []byte) {
		rt := newRuntime(t, pb.FixedWindowLimiterGrainType)
		g := newFixed(rt, fuzzFixed)
		options := g.options
		var handed int64
		for range 3 {
			in := new(pb.QuotaRequest)
			if in.MergeGranaryWire(request) != nil {
				return
			}
			r, err := g.LeaseQuota(context.Background(), in)
			if err != nil {
				require.Equal(t, options, g.options, "a refused request changes nothing")
				continue
			}
			if g.options != options { // the request's options were installed: a fresh limiter
				options, handed = g.options, 0
			}
			handed += r.Permits
			ret := new(pb.ReturnQuotaRequest)
			if ret.MergeGranaryWire(giveBack) == nil {
				ret.SliceId = r.SliceId // the real id, so that returns are exercised
				out, err := g.ReturnQuota(context.Background(), ret)
				require.NoError(t, err)
				require.LessOrEqual(t, out.Returned, r.Permits)
				handed -= out.Returned
			}
			avail := stats(t, g).AvailablePermits
			require.GreaterOrEqual(t, avail, int64(0))
			require.Equal(t, options.PermitLimit, avail+handed, "every permit is free or in a slice")
		}
	})
}
