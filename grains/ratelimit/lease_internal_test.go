package ratelimit

import (
	"bufio"
	"context"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/grains/ratelimit/internal/contract"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
)

// readHex reads a hex fixture, skipping comment lines.
func readHex(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var b strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			b.WriteString(line)
		}
	}
	require.NoError(t, sc.Err())
	data, err := hex.DecodeString(b.String())
	require.NoError(t, err)
	return data
}

func TestALeaseFromAnOlderServerRequiresRelease(t *testing.T) {
	data := readHex(t, "testdata/lease-before-release-optional.hex")
	for _, decode := range []func([]byte, *pb.LeaseMetadata) error{
		func(b []byte, m *pb.LeaseMetadata) error { return m.MergeGranaryWire(b) },
		func(b []byte, m *pb.LeaseMetadata) error { return proto.Unmarshal(b, m) },
	} {
		l := &Lease{}
		require.NoError(t, decode(data, &l.md))
		assert.True(t, l.Acquired())
		assert.False(t, l.ReleaseOptional(), "no release_optional field: release is required")
		assert.EqualValues(t, 42, l.ID())
		assert.Equal(t, actor.GrainID{Type: contract.ConcurrencyGrainType, Key: "tenant:7"}, l.Owner())
	}
}

// releaseRecorder is a grain that records the releases it receives.
type releaseRecorder struct{ released []uint64 }

func (r *releaseRecorder) Call(_ context.Context, call proxy.Call, in, out proto.Message) error {
	r.released = append(r.released, in.(*pb.ReleaseRequest).LeaseId)
	return nil
}

func (r *releaseRecorder) ResponseTimeout() time.Duration { return time.Second }

func TestReleaseIsSentOnceAndRetriedAfterAFailure(t *testing.T) {
	rec := &releaseRecorder{}
	h := Concurrency(rec, "mine")
	id := h.GrainID()
	l := &Lease{grain: h.grain}
	l.md.LeaseId, l.md.Acquired, l.md.GrainId = 7, true, &pb.GrainId{Type: id.Type, Key: id.Key}
	require.NoError(t, l.Release(context.Background()))
	require.NoError(t, l.Release(context.Background()))
	assert.Equal(t, []uint64{7}, rec.released, "sent once")

	foreign := &Lease{grain: h.grain}
	foreign.md.LeaseId, foreign.md.Acquired, foreign.md.GrainId = 8, true, &pb.GrainId{Type: "other.Type", Key: "k"}
	assert.ErrorIs(t, foreign.Release(context.Background()), ErrUnknownOwner)
	assert.ErrorIs(t, foreign.Release(context.Background()), ErrUnknownOwner, "a failed release may be retried")

	other := &Lease{grain: h.grain}
	other.md.LeaseId, other.md.Acquired, other.md.GrainId = 9, true, &pb.GrainId{Type: id.Type, Key: "theirs"}
	require.NoError(t, other.Release(context.Background()))
	assert.Equal(t, []uint64{7, 9}, rec.released, "a lease of another grain is released there")
}

// FuzzLeaseFromTheWire decodes lease metadata as a reply from the network
// would bring it, and reads it the ways a caller does: nothing panics, and
// RetryAfter is never negative.
func FuzzLeaseFromTheWire(f *testing.F) {
	f.Add([]byte{})
	for _, md := range []*pb.LeaseMetadata{
		{LeaseId: 1, Acquired: true, GrainId: &pb.GrainId{Type: contract.FixedWindowGrainType, Key: "k"}, ReleaseOptional: true},
		{Metadata: []*pb.MetadataEntry{{Name: MetadataRetryAfter, Value: "1.5s"}}},
		{Metadata: []*pb.MetadataEntry{{Name: MetadataRetryAfter, Value: "-3s"}, {Name: MetadataReasonPhrase, Value: "x"}}},
	} {
		b, err := md.AppendGranaryWire(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l := &Lease{}
		if err := l.md.MergeGranaryWire(data); err != nil {
			return
		}
		_ = l.Reason()
		if l.RetryAfter() < 0 {
			t.Fatalf("negative RetryAfter from %q", data)
		}
		for range l.Metadata() {
		}
		_ = l.String()
		_ = l.Owner()
		if (l.Err() == nil) != l.Acquired() {
			t.Fatal("Err disagrees with Acquired")
		}
	})
}
