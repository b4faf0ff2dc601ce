package ratelimit

import (
	"bufio"
	"context"
	"encoding/hex"
	"os"
	"strings"
	"testing"

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
		md := new(pb.LeaseMetadata)
		require.NoError(t, decode(data, md))
		l := &Lease{md: md}
		assert.True(t, l.Acquired())
		assert.False(t, l.ReleaseOptional(), "no release_optional field: release is required")
		assert.EqualValues(t, 42, l.ID())
		assert.Equal(t, actor.GrainID{Type: contract.ConcurrencyGrainType, Key: "tenant:7"}, l.Owner())
	}
}

// recordingRef records the releases sent through it.
type recordingRef struct {
	commonRef
	id       actor.GrainID
	released []uint64
}

func (r *recordingRef) GrainID() actor.GrainID { return r.id }

func (r *recordingRef) Release(_ context.Context, in *pb.ReleaseRequest, _ ...proxy.CallOption) (*pb.ReleaseReply, error) {
	r.released = append(r.released, in.LeaseId)
	return &pb.ReleaseReply{Released: true}, nil
}

func TestReleaseUsesTheHoldersReferenceForItsOwnGrainsLeases(t *testing.T) {
	id := actor.GrainID{Type: contract.ConcurrencyGrainType, Key: "mine"}
	ref := &recordingRef{id: id}
	l := &Lease{md: &pb.LeaseMetadata{LeaseId: 7, Acquired: true, GrainId: &pb.GrainId{Type: id.Type, Key: id.Key}}, holder: ref}
	require.NoError(t, l.Release(context.Background()))
	require.NoError(t, l.Release(context.Background()))
	assert.Equal(t, []uint64{7}, ref.released, "sent once, through the holder's reference")

	foreign := &Lease{md: &pb.LeaseMetadata{LeaseId: 8, Acquired: true, GrainId: &pb.GrainId{Type: "other.Type", Key: "k"}}, holder: ref}
	assert.ErrorIs(t, foreign.Release(context.Background()), ErrUnknownOwner)
	assert.ErrorIs(t, foreign.Release(context.Background()), ErrUnknownOwner, "a failed release may be retried")
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
		md := new(pb.LeaseMetadata)
		if err := md.MergeGranaryWire(data); err != nil {
			return
		}
		l := &Lease{md: md}
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
