package directory

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/internal/directory/directorypb"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/ring"
	"github.com/granary-go/granary/proxy"
)

// countReplies counts the replies to the requests it answers, and keeps
// the last error.
type countReplies struct {
	n   atomic.Int32
	err atomic.Pointer[error]
}

func (c *countReplies) Reply(_ *host.Request, _ proto.Message, err error) {
	c.n.Add(1)
	c.err.Store(&err)
}

// A handoff whose range ends before it begins is refused as a bad request
// and changes nothing: its entries are not merged, no hold is released.
func TestAHandoffWithARangeThatEndsBeforeItBeginsIsRefused(t *testing.T) {
	_, _, _, j := joinedBeside(t, true)
	before := j.dir.Stats()
	in := &directorypb.HandoffRequest{From: &directorypb.Activation{Silo: "a", Generation: 1},
		Ranges:  []*directorypb.Range{{First: 0, Last: ^uint64(0)}, {First: 9, Last: 3}},
		Entries: []*directorypb.Entry{{Grain: pbGrain(grain(1)), Activation: &directorypb.Activation{Silo: "a", Generation: 1}}}}
	payload, err := proto.Marshal(in)
	require.NoError(t, err)
	replies := &countReplies{}
	j.dir.Serve(&host.Request{MethodID: directorypb.Directory_Handoff_Method.ID, Payload: payload, Reply: replies, FromSilo: true})
	require.EqualValues(t, 1, replies.n.Load())
	assert.ErrorIs(t, *replies.err.Load(), proxy.ErrBadRequest)
	after := j.dir.Stats()
	assert.Equal(t, before.Held, after.Held, "no hold released")
	assert.Equal(t, before.Partition, after.Partition, "no entry merged")
}

// holdsOf returns d's held ranges.
func holdsOf(d *Directory) []ring.Range {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]ring.Range, 0, len(d.mu.holds))
	for _, h := range d.mu.holds {
		out = append(out, h.r)
	}
	return out
}

// checkReleased checks, at the edges and middles of the holds and of the
// handed ranges, that a handoff of handed released what it covered of
// the holds (but a hold it would have cut too fine, left whole), and
// nothing else.
func checkReleased(t *testing.T, before, after, handed []ring.Range) {
	t.Helper()
	in := func(h uint64, rs []ring.Range) (ring.Range, bool) {
		for _, r := range rs {
			if r.Contains(h) {
				return r, true
			}
		}
		return ring.Range{}, false
	}
	var points []uint64
	for _, r := range append(slices.Clone(before), handed...) {
		points = append(points, r.First, r.Last, r.First+(r.Last-r.First)/2, r.First-1, r.Last+1)
	}
	for _, h := range points {
		_, was := in(h, before)
		now, is := in(h, after)
		_, gone := in(h, handed)
		switch {
		case is && !was:
			t.Fatalf("hash %#x held after the handoff, not before", h)
		case was && !gone && !is:
			t.Fatalf("hash %#x released, not handed over", h)
		case was && gone && is && !slices.Contains(before, now):
			t.Fatalf("hash %#x handed over and still held in %v, a piece of a hold", h, now)
		}
	}
}

// FuzzServe sends a silo's partition whatever another silo could send:
// any method, any payload. The partition must answer each request exactly
// once (a parked one when its range is released or the directory closes),
// never panic, and grow its entries and holds by no more than the request
// carried. The serving silo has just joined and holds the ranges it
// gained, so that handoffs have holds to release.
func FuzzServe(f *testing.F) {
	pb := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	g := pbGrain(grain(1))
	self := &directorypb.Activation{Silo: "c", Generation: 1}
	other := &directorypb.Activation{Silo: "a", Generation: 1}
	stranger := &directorypb.Activation{Silo: "nobody", Generation: 9}
	all := []*directorypb.Range{{First: 0, Last: ^uint64(0)}}
	inverted := []*directorypb.Range{{First: 1 << 63, Last: 5}, {First: 10, Last: 2}}
	for i, m := range []proto.Message{
		&directorypb.RegisterRequest{Grain: g, Activation: other},
		&directorypb.UnregisterRequest{Grain: g, Activation: other},
		&directorypb.LookupRequest{Grain: g},
		&directorypb.HandoffRequest{From: other, Ranges: all, Entries: []*directorypb.Entry{{Grain: g, Activation: other}}},
		&directorypb.HostedRequest{Ranges: all},
		&directorypb.DeactivateRequest{Grain: g, Activation: self},
	} {
		f.Add(uint8(i), pb(m))
	}
	f.Add(uint8(3), pb(&directorypb.HandoffRequest{From: other, Ranges: inverted, Unfilled: inverted}))
	f.Add(uint8(3), pb(&directorypb.HandoffRequest{From: stranger, Ranges: []*directorypb.Range{{First: 100, Last: 200}, {First: 150, Last: 1 << 62}},
		Mourning: []*directorypb.Mourning{{Silo: stranger, RemainingNanos: int64(time.Hour), Ranges: all}},
		Entries:  []*directorypb.Entry{{Grain: g, Activation: stranger}, {Grain: g, Activation: self}}}))
	var fine []*directorypb.Range
	for k := range uint64(20) {
		fine = append(fine, &directorypb.Range{First: k << 59, Last: k<<59 + 1<<40})
	}
	f.Add(uint8(3), pb(&directorypb.HandoffRequest{From: other, Ranges: fine}))
	f.Add(uint8(3), pb(&directorypb.HandoffRequest{From: other, Ranges: fine[:3]}))
	f.Add(uint8(4), pb(&directorypb.HostedRequest{Ranges: inverted}))
	f.Add(uint8(0), []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add(uint8(200), []byte{})

	f.Fuzz(func(t *testing.T, method uint8, payload []byte) {
		_, _, _, j := joinedBeside(t, true)

		methods := directorypb.DirectoryService.Methods
		id := uint32(0xdeadbeef)
		if int(method) < len(methods) {
			id = methods[method].Desc.ID
		}
		var sent struct{ entries, ranges int }
		var handoff *directorypb.HandoffRequest // one the partition takes
		if int(method) < len(methods) {
			in := methods[method].NewRequest()
			if proto.Unmarshal(payload, in) == nil {
				if h, ok := in.(*directorypb.HandoffRequest); ok {
					sent.entries, sent.ranges = len(h.GetEntries()), len(h.GetRanges())
					if badRanges(h.GetRanges(), h.GetUnfilled()) == nil && !slices.ContainsFunc(h.GetMourning(), func(m *directorypb.Mourning) bool { return badRanges(m.GetRanges()) != nil }) {
						handoff = h
					}
				}
			}
		}
		before, heldBefore := j.dir.Stats(), holdsOf(j.dir)
		replies := &countReplies{}
		j.dir.Serve(&host.Request{MethodID: id, Payload: payload, Reply: replies, FromSilo: true})
		after, heldAfter := j.dir.Stats(), holdsOf(j.dir)
		switch {
		case handoff == nil:
			if !slices.Equal(heldBefore, heldAfter) {
				t.Fatalf("holds changed from %v to %v on a request that hands nothing over", heldBefore, heldAfter)
			}
		case len(handoff.GetUnfilled()) == 0: // no rebuild starts, releasing what it will
			checkReleased(t, heldBefore, heldAfter, rangesOf(handoff.GetRanges()))
		}
		if after.Partition > before.Partition+sent.entries+1 {
			t.Fatalf("the partition grew from %d to %d entries on a request of %d", before.Partition, after.Partition, sent.entries)
		}
		if after.Held > before.Held+sent.ranges {
			t.Fatalf("the holds grew from %d to %d on a request of %d ranges", before.Held, after.Held, sent.ranges)
		}
		if n := replies.n.Load(); n > 1 || (n == 0 && after.Held == 0) {
			t.Fatalf("%d replies, %d ranges held", n, after.Held)
		}
		j.dir.Close()
		if n := replies.n.Load(); n != 1 {
			t.Fatalf("%d replies once the directory closed", n)
		}
	})
}
