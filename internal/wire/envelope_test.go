package wire

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

func sampleRequest() Envelope {
	return Envelope{
		Kind:          KindRequest,
		CallID:        300,
		GrainType:     "ratelimit.TokenBucket",
		GrainKey:      "tenant-42",
		MethodID:      7,
		Payload:       []byte("0123456789abcdef0123456789abcdef0123456789abcdef"),
		PlacementHint: "silo-1",
		Budget:        80 * time.Millisecond,
		Cancellable:   true,
		Timeout:       100 * time.Millisecond,
		Hops:          1,
		FromSilo:      true,
	}
}

func TestEnvelopeRoundTrip(t *testing.T) {
	for _, e := range []Envelope{
		{},
		sampleRequest(),
		{Kind: KindReply, CallID: 1, Status: StatusAppError, Error: "no quota", Payload: []byte{0}},
		{Kind: KindReply, CallID: 2, Status: StatusAppError, Error: "not found", ErrorCode: 404, ErrorDetails: [][]byte{[]byte("a"), {}}},
		{Kind: KindReply, CallID: 3, Payload: []byte{8, 1}, MovedTo: "silo-2"},
		{Kind: KindCancel, CallID: 1<<64 - 1},
		{Kind: -1, Status: -5, Budget: -1, Timeout: -time.Second},
		{Kind: 16}, // a directory kind this version does not name
	} {
		var got Envelope
		require.NoError(t, got.Unmarshal(e.AppendTo(nil)))
		assert.Equal(t, e, got)
	}
}

func TestEnvelopeAppendToAppends(t *testing.T) {
	e := Envelope{Kind: KindCancel, CallID: 5}
	b := e.AppendTo([]byte("prefix"))
	assert.Equal(t, "prefix\x08\x03\x10\x05", string(b))
}

func TestEnvelopeUnmarshalResets(t *testing.T) {
	e := sampleRequest()
	require.NoError(t, e.Unmarshal([]byte{0x10, 0x09}))
	assert.Equal(t, Envelope{CallID: 9}, e)
	e = sampleRequest()
	e.Reset()
	assert.Equal(t, Envelope{}, e)
}

func TestEnvelopePayloadAliasesInput(t *testing.T) {
	req := sampleRequest()
	frame := req.AppendTo(nil)
	var e Envelope
	require.NoError(t, e.Unmarshal(frame))
	require.NotEmpty(t, e.Payload)
	assert.Equal(t, len(e.Payload), cap(e.Payload), "append must not overwrite the following fields")
	// Payload points into frame.
	start := uintptr(unsafe.Pointer(unsafe.SliceData(frame)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(e.Payload)))
	assert.True(t, p >= start && p < start+uintptr(len(frame)))
}

func TestEnvelopeUnmarshalProto3Rules(t *testing.T) {
	b := []byte{}
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	// Unknown fields of every wire type are skipped.
	b = protowire.AppendTag(b, 99, protowire.VarintType)
	b = protowire.AppendVarint(b, 1<<40)
	b = protowire.AppendTag(b, 100, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, 1)
	b = protowire.AppendTag(b, 101, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, 1)
	b = protowire.AppendTag(b, 102, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("skip me"))
	b = protowire.AppendTag(b, 103, protowire.StartGroupType)
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 5)
	b = protowire.AppendTag(b, 103, protowire.EndGroupType)
	// A known field with the wrong wire type is treated as unknown.
	b = protowire.AppendTag(b, 4, protowire.VarintType)
	b = protowire.AppendVarint(b, 3)
	// The last occurrence wins.
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, 2)
	// Any non-zero varint is true.
	b = protowire.AppendTag(b, 9, protowire.VarintType)
	b = protowire.AppendVarint(b, 1<<33)

	var e Envelope
	require.NoError(t, e.Unmarshal(b))
	assert.Equal(t, Envelope{Kind: KindRequest, CallID: 2, Cancellable: true}, e)
}

func TestEnvelopeUnmarshalMalformed(t *testing.T) {
	for name, b := range map[string][]byte{
		"truncated tag":          {0x80},
		"field number 0":         {0x00, 0x01},
		"field number too large": protowire.AppendTag(nil, protowire.MaxValidNumber+1, protowire.VarintType),
		"truncated varint":       {0x10, 0x80},
		"varint overflow":        {0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},
		"length past end":        {0x32, 0x05, 'a'},
		"truncated fixed32":      {0x0d, 0x00},
		"wire type 6":            {0x0e},
		"wire type 7":            {0x0f},
		"lone end group":         {0x0c},
		"unterminated group":     {0x0b, 0x08, 0x01},
		"invalid UTF-8 key":      {0x22, 0x01, 0xff},
		"invalid UTF-8 error":    {0x62, 0x02, 0xc3, 0x28},
	} {
		t.Run(name, func(t *testing.T) {
			var e Envelope
			err := e.Unmarshal(b)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrMalformed), "%v", err)
		})
	}
}

func TestInterner(t *testing.T) {
	canonical := "ratelimit.TokenBucket"
	in := NewInterner(canonical, "silo-1")
	req := sampleRequest()
	frame := req.AppendTo(nil)

	var e Envelope
	require.NoError(t, e.UnmarshalInterned(frame, in))
	assert.Equal(t, unsafe.StringData(canonical), unsafe.StringData(e.GrainType), "known type is the canonical string")
	assert.Equal(t, "silo-1", e.PlacementHint)

	other := Envelope{GrainType: "unregistered"}
	require.NoError(t, e.UnmarshalInterned(other.AppendTo(nil), in))
	assert.Equal(t, "unregistered", e.GrainType)
	require.NoError(t, e.UnmarshalInterned(frame, nil))
	assert.Equal(t, canonical, e.GrainType)
}

func TestEnvelopeAllocations(t *testing.T) {
	req := sampleRequest()
	frame := req.AppendTo(nil)
	buf := make([]byte, 0, 256)
	in := NewInterner(req.GrainType, req.PlacementHint)
	var e Envelope

	assert.Zero(t, testing.AllocsPerRun(100, func() { buf = req.AppendTo(buf[:0]) }), "encode")
	assert.Equal(t, 3.0, testing.AllocsPerRun(100, func() { _ = e.Unmarshal(frame) }), "decode: three strings")
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _ = e.UnmarshalInterned(frame, in) }), "decode interned: only the key")

	reply := Envelope{Kind: KindReply, CallID: 300, Payload: req.Payload}
	replyFrame := reply.AppendTo(nil)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = e.Unmarshal(replyFrame) }), "decode reply")
}

func TestKindAndStatusString(t *testing.T) {
	assert.Equal(t, "REQUEST", KindRequest.String())
	assert.Equal(t, "Kind(16)", Kind(16).String())
	assert.Equal(t, "OVERLOADED", StatusOverloaded.String())
	assert.Equal(t, "Status(-1)", Status(-1).String())
}

func BenchmarkEnvelopeAppendTo(b *testing.B) {
	req := sampleRequest()
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = req.AppendTo(buf[:0])
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkEnvelopeUnmarshal(b *testing.B) {
	req := sampleRequest()
	frame := req.AppendTo(nil)
	in := NewInterner(req.GrainType, req.PlacementHint)
	var e Envelope
	b.Run("request", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(frame)))
		for b.Loop() {
			_ = e.Unmarshal(frame)
		}
	})
	b.Run("request-interned", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(frame)))
		for b.Loop() {
			_ = e.UnmarshalInterned(frame, in)
		}
	})
	reply := Envelope{Kind: KindReply, CallID: 300, Payload: req.Payload}
	replyFrame := reply.AppendTo(nil)
	b.Run("reply", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(replyFrame)))
		for b.Loop() {
			_ = e.Unmarshal(replyFrame)
		}
	})
}

// A decoder shares the strings it already knows: the registered grain type
// and the keys of recent requests are neither copied nor re-checked, so a
// busy grain's requests decode without allocating.
func TestDecoderSharesKnownStrings(t *testing.T) {
	req := sampleRequest()
	frame := req.AppendTo(nil)
	dec := NewDecoder(NewInterner(req.GrainType, req.PlacementHint))

	var a, b Envelope
	require.NoError(t, dec.Decode(frame, &a))
	require.NoError(t, dec.Decode(append([]byte(nil), frame...), &b))
	assert.Equal(t, normalized(req), normalized(b))
	assert.Same(t, unsafe.StringData(a.GrainKey), unsafe.StringData(b.GrainKey), "the second frame reuses the key")
	assert.Same(t, unsafe.StringData(a.GrainType), unsafe.StringData(b.GrainType))
	allocs := testing.AllocsPerRun(100, func() { _ = dec.Decode(frame, &b) })
	assert.Zero(t, allocs)

	other := sampleRequest()
	other.GrainKey = "tenant-43"
	require.NoError(t, dec.Decode(other.AppendTo(nil), &b))
	assert.Equal(t, "tenant-43", b.GrainKey, "a different key is not mistaken for a cached one")

	bad := sampleRequest()
	bad.GrainKey = "\xff"
	var e Envelope
	require.ErrorIs(t, dec.Decode(bad.AppendTo(nil), &e), ErrMalformed, "keys are still checked for UTF-8")
	require.ErrorIs(t, dec.Decode(bad.AppendTo(nil), &e), ErrMalformed, "and an invalid one is never remembered")
}

// Sixteen grains called turn about, the partitioned load of the silo's
// benchmark, all stay remembered: two keys that land in one set share it
// instead of evicting each other on every request.
func TestDecoderRemembersSixteenKeys(t *testing.T) {
	req := sampleRequest()
	dec := NewDecoder(NewInterner(req.GrainType, req.PlacementHint))
	frames := make([][]byte, 16)
	for i := range frames {
		req.GrainKey = fmt.Sprint("key-", i)
		frames[i] = req.AppendTo(nil)
	}
	var e Envelope
	for _, f := range frames {
		require.NoError(t, dec.Decode(f, &e))
	}
	allocs := testing.AllocsPerRun(20, func() {
		for _, f := range frames {
			_ = dec.Decode(f, &e)
		}
	})
	assert.Zero(t, allocs, "a key decoded before is shared, not copied")
	assert.Equal(t, "key-15", e.GrainKey)
}

func BenchmarkDecoderDecode(b *testing.B) {
	req := sampleRequest()
	frame := req.AppendTo(nil)
	dec := NewDecoder(NewInterner(req.GrainType, req.PlacementHint))
	var e Envelope
	b.ReportAllocs()
	for b.Loop() {
		_ = dec.Decode(frame, &e)
	}
}

type bytesPayload struct {
	b   []byte
	err error
}

func (p bytesPayload) AppendPayload(b []byte) ([]byte, error) {
	b = append(b, p.b...)
	return b, p.err
}

// Encoding the payload in place writes exactly what AppendTo writes for
// the same payload, whatever room its length prefix needs.
func TestAppendWithPayloadMatchesAppendTo(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 300, 16383, 16384, 2_100_000} {
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte(i * 7)
		}
		e := sampleRequest()
		prefix := []byte("prefix")
		got, err := e.AppendWithPayload(append([]byte(nil), prefix...), bytesPayload{b: payload})
		require.NoError(t, err)
		e.Payload = payload
		want := e.AppendTo(append([]byte(nil), prefix...))
		require.Equal(t, want, got, "payload of %d bytes", n)
	}
	e := sampleRequest()
	boom := errors.New("boom")
	b, err := e.AppendWithPayload([]byte("keep"), bytesPayload{b: []byte("partial"), err: boom})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, "keep", string(b), "a failed payload leaves b as it was")
}

// BenchmarkDecoderDecodeCall decodes the request of an ordinary grain call
// (no placement hint) on a connection that has seen its grain before.
func BenchmarkDecoderDecodeCall(b *testing.B) {
	req := Envelope{Kind: KindRequest, CallID: 123456, GrainType: "example.Counter", GrainKey: "key-0",
		MethodID: 0x9abcdef1, Payload: []byte{0x08, 0x01}, Budget: 24 * time.Second, Timeout: 30 * time.Second}
	frame := req.AppendTo(nil)
	dec := NewDecoder(NewInterner(req.GrainType))
	var e Envelope
	if err := dec.Decode(frame, &e); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = dec.Decode(frame, &e)
	}
}

// BenchmarkDecoderDecodeRelayed is BenchmarkDecoderDecodeCall for a request
// a silo relays, naming its caller, and one that carries metadata.
func BenchmarkDecoderDecodeRelayed(b *testing.B) {
	base := Envelope{Kind: KindRequest, CallID: 123456, GrainType: "example.Counter", GrainKey: "key-0",
		MethodID: 0x9abcdef1, Payload: []byte{0x08, 0x01}, Budget: 24 * time.Second, Timeout: 30 * time.Second}
	relayed := base
	relayed.Hops, relayed.FromSilo, relayed.Caller = 1, true, &Identity{Kind: 1, Name: "checkout", Credential: 1}
	withMetadata := base
	withMetadata.Metadata = []string{"tenant", "acme", "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	for name, req := range map[string]Envelope{"caller": relayed, "metadata": withMetadata} {
		b.Run(name, func(b *testing.B) {
			frame := req.AppendTo(nil)
			dec := NewDecoder(NewInterner(req.GrainType))
			var e Envelope
			if err := dec.Decode(frame, &e); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				_ = dec.Decode(frame, &e)
			}
		})
	}
}

// The decoder's fast path takes ordinary requests for grains it knows and
// decodes them exactly as Unmarshal does; anything else (an unknown key,
// fields out of order or repeated, a hint it does not intern) goes the
// general way with the same result.
func TestFastRequestMatchesUnmarshal(t *testing.T) {
	base := Envelope{Kind: KindRequest, CallID: 1 << 20, GrainType: "example.Counter", GrainKey: "key-0",
		MethodID: 0x9abcdef1, Payload: []byte{0x08, 0x01}, Budget: 24 * time.Second, Timeout: 30 * time.Second}
	variants := map[string]Envelope{"ordinary": base}
	v := base
	v.Payload, v.Budget, v.Timeout = nil, 0, 0
	variants["no optional fields"] = v
	v = base
	v.Cancellable, v.PlacementHint = true, "silo-1"
	variants["cancellable, interned hint"] = v
	v = base
	v.PlacementHint = "silo-9"
	variants["hint not interned"] = v
	v = base
	v.Hops, v.FromSilo, v.Caller = 1, true, &Identity{Kind: 1, Name: "checkout", Credential: 1}
	variants["relayed, with its caller"] = v

	for name, env := range variants {
		t.Run(name, func(t *testing.T) {
			dec := NewDecoder(NewInterner(base.GrainType, "silo-1"))
			frame := env.AppendTo(nil)
			var want, got Envelope
			require.NoError(t, want.Unmarshal(frame))
			require.NoError(t, dec.Decode(frame, &got)) // learns the key
			assert.Equal(t, want, got)
			fast := dec.fastRequest(frame, &got)
			assert.Equal(t, env.PlacementHint != "silo-9", fast, "fast path taken")
			require.NoError(t, dec.Decode(frame, &got))
			assert.Equal(t, want, got)
			assert.Equal(t, len(got.Payload), cap(got.Payload), "an append to the payload must not reach the fields after it")
		})
	}

	// Frames the fast path must leave to the general decoder.
	dec := NewDecoder(NewInterner(base.GrainType))
	known := base.AppendTo(nil)
	require.NoError(t, dec.Decode(known, &Envelope{}))
	require.True(t, dec.fastRequest(known, &Envelope{}))
	for name, frame := range map[string][]byte{
		"repeated call id": append(append([]byte{}, known...), 0x10, 0x05),
		"unknown field":    append(append([]byte{}, known...), 0x78, 0x01),
		"truncated":        known[:len(known)-1],
		"unknown key":      (&Envelope{Kind: KindRequest, CallID: 2, GrainType: base.GrainType, GrainKey: "other", MethodID: 1}).AppendTo(nil),
		"reply":            (&Envelope{Kind: KindReply, CallID: 2}).AppendTo(nil),
		"metadata": (&Envelope{Kind: KindRequest, CallID: 2, GrainType: base.GrainType, GrainKey: base.GrainKey, MethodID: 1,
			Metadata: []string{"tenant", "acme"}}).AppendTo(nil),
		"a caller not seen before": (&Envelope{Kind: KindRequest, CallID: 2, GrainType: base.GrainType, GrainKey: base.GrainKey, MethodID: 1,
			Caller: &Identity{Kind: 2, Name: "silo-3"}}).AppendTo(nil),
	} {
		var e Envelope
		assert.False(t, dec.fastRequest(frame, &e), name)
		var want, got Envelope
		wantErr := want.Unmarshal(frame)
		gotErr := dec.Decode(frame, &got)
		assert.Equal(t, wantErr == nil, gotErr == nil, name)
		if wantErr == nil {
			assert.Equal(t, want, got, name)
		}
	}
}

func TestSalvageReadsTheCallOfAFrameWithBadContents(t *testing.T) {
	bad := Envelope{Kind: KindRequest, CallID: 77, GrainType: "t", GrainKey: "\xff\xfe", MethodID: 3}
	b := bad.AppendTo(nil)
	var e Envelope
	require.ErrorIs(t, e.Unmarshal(b), ErrMalformed, "a key that is not UTF-8 is refused")
	kind, id, ok := Salvage(b)
	require.True(t, ok, "but the frame itself is well formed")
	assert.Equal(t, KindRequest, kind)
	assert.EqualValues(t, 77, id)

	for _, broken := range [][]byte{
		{0x08},             // a tag without its value
		{0x22, 0x05, 'a'},  // a length past the end
		{0x0b, 0x08, 0x01}, // a group that never ends
		{0x00},             // field number 0
	} {
		_, _, ok := Salvage(broken)
		assert.False(t, ok, "% x", broken)
	}
}

// TestMetadataLimits checks that a request's metadata is accepted up to
// each limit and refused one past it, by the decoder (as a request to
// refuse alone, not a malformed frame) and by CheckMetadata alike.
func TestMetadataLimits(t *testing.T) {
	pairs := func(n, valueLen int) []string {
		var md []string
		for i := range n {
			md = append(md, fmt.Sprintf("k%02d", i), strings.Repeat("v", valueLen))
		}
		return md
	}
	perEntry := (MaxMetadataBytes - 3*MaxMetadataEntries) / MaxMetadataEntries // fills the byte limit exactly
	for _, tc := range []struct {
		name string
		md   []string
		ok   bool
	}{
		{"entries at the limit", pairs(MaxMetadataEntries, 1), true},
		{"one entry too many", pairs(MaxMetadataEntries+1, 1), false},
		{"bytes at the limit", pairs(MaxMetadataEntries, perEntry), true},
		{"one byte too many", append(pairs(MaxMetadataEntries-1, perEntry), "k31", strings.Repeat("v", perEntry+1)), false},
		{"one large value", []string{"k", strings.Repeat("v", MaxMetadataBytes)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Envelope{Kind: KindRequest, CallID: 5, GrainType: "g", GrainKey: "k", Metadata: tc.md}
			b := e.AppendTo(nil)
			var got Envelope
			err := NewDecoder(NewInterner("g")).Decode(b, &got)
			if tc.ok {
				require.NoError(t, err)
				require.NoError(t, CheckMetadata(tc.md))
				require.Equal(t, tc.md, got.Metadata)
				return
			}
			require.ErrorIs(t, err, ErrMetadataTooLarge)
			require.NotErrorIs(t, err, ErrMalformed)
			require.ErrorIs(t, CheckMetadata(tc.md), ErrMetadataTooLarge)
			kind, id, ok := Salvage(b)
			require.True(t, ok)
			require.Equal(t, KindRequest, kind)
			require.Equal(t, uint64(5), id)
		})
	}
	require.ErrorIs(t, CheckMetadata([]string{"odd"}), ErrMetadataTooLarge)
}

// TestCallerRoundTrip checks that a relayed request's caller survives
// encoding, and that a request without one decodes with none.
func TestCallerRoundTrip(t *testing.T) {
	e := sampleRequest()
	e.Caller = &Identity{Kind: 1, Name: "billing", Rights: 1, Credential: 2}
	e.Metadata = []string{"tenant", "acme"}
	var got Envelope
	dec := NewDecoder(NewInterner(e.GrainType, e.PlacementHint))
	require.NoError(t, dec.Decode(e.AppendTo(nil), &got))
	require.Equal(t, *e.Caller, *got.Caller)
	require.Equal(t, e.Metadata, got.Metadata)

	plain := sampleRequest()
	require.NoError(t, dec.Decode(plain.AppendTo(nil), &got))
	require.Nil(t, got.Caller)
	require.Nil(t, got.Metadata)
}
