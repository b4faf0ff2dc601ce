package wiretest_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/granary-go/granary/internal/grainc/wiretest"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/proxy"
)

// withCodec are the messages with a generated codec that the tests check:
// this package's, and the example counter's, whose codecs carry grain
// calls in the silo tests.
var withCodec = []proto.Message{
	&wiretest.Scalars{},
	&wiretest.Nested{},
	&wiretest.Nested_Inner{},
	&wiretest.Tree{},
	&wiretest.Small{},
	&wiretest.Medium{},
	&testgrain.AddRequest{},
	&testgrain.AddReply{},
	&testgrain.GetRequest{},
	&testgrain.GetReply{},
	&testgrain.BlockRequest{},
	&testgrain.BlockReply{},
	&testgrain.PanicRequest{},
	&testgrain.PanicReply{},
	&testgrain.NeverRequest{},
	&testgrain.NeverReply{},
}

func TestWhichMessagesHaveCodecs(t *testing.T) {
	for _, m := range withCodec {
		_, ok := m.(proxy.WireMessage)
		assert.True(t, ok, "%T has no codec", m)
	}
	for _, m := range []proto.Message{
		&wiretest.WithOneof{},
		&wiretest.WithMap{},
		&wiretest.WithOptional{},
		&wiretest.Colliding{},
	} {
		_, ok := m.(proxy.WireMessage)
		assert.False(t, ok, "%T has a codec", m)
	}
}

// newOf returns a new, empty message of m's type.
func newOf(m proto.Message) proto.Message {
	return m.ProtoReflect().Type().New().Interface()
}

func wire(m proto.Message) proxy.WireMessage { return m.(proxy.WireMessage) }

// checkEncode checks that m's codec writes what proto.Marshal writes, or
// fails where it fails.
func checkEncode(t *testing.T, m proto.Message) {
	t.Helper()
	want, wantErr := proto.Marshal(m)
	prefix := []byte("prefix")
	got, err := wire(m).AppendGranaryWire(prefix[:len(prefix):len(prefix)])
	if wantErr != nil {
		require.Error(t, err, "proto.Marshal failed with %v; the codec did not", wantErr)
		assert.ErrorIs(t, err, proto.Error)
		return
	}
	require.NoError(t, err)
	require.Equal(t, prefix, got[:len(prefix)], "the codec changed what b held")
	if !bytes.Equal(want, got[len(prefix):]) && !sameUpToMapOrder(t, m, want, got[len(prefix):]) {
		t.Fatalf("encodings differ for %v\nproto: %s\ncodec: %s", m, hex.EncodeToString(want), hex.EncodeToString(got[len(prefix):]))
	}
}

// sameUpToMapOrder reports whether m holds a map of several entries,
// which proto writes in random order, and a and b decode the same.
func sameUpToMapOrder(t *testing.T, m proto.Message, a, b []byte) bool {
	t.Helper()
	if !hasLargeMap(m.ProtoReflect()) {
		return false
	}
	ma, mb := newOf(m), newOf(m)
	require.NoError(t, proto.Unmarshal(a, ma))
	require.NoError(t, proto.Unmarshal(b, mb))
	return proto.Equal(ma, mb)
}

func hasLargeMap(m protoreflect.Message) bool {
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			found = v.Map().Len() > 1
			if !found && fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, v protoreflect.Value) bool {
					found = hasLargeMap(v.Message())
					return !found
				})
			}
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len() && !found; i++ {
				found = hasLargeMap(v.List().Get(i).Message())
			}
		case fd.Message() != nil:
			found = hasLargeMap(v.Message())
		}
		return !found
	})
	return found
}

// checkDecode checks that decoding data into a clone of base with the
// codec does what proto does: both fail, or both give equal messages that
// re-encode the same.
func checkDecode(t *testing.T, base proto.Message, data []byte) {
	t.Helper()
	want := proto.Clone(base)
	wantErr := proto.UnmarshalOptions{Merge: true}.Unmarshal(data, want)
	got := proto.Clone(base)
	err := wire(got).MergeGranaryWire(data)
	if wantErr != nil {
		require.Error(t, err, "proto failed with %v; the codec did not, on %s", wantErr, hex.EncodeToString(data))
		assert.ErrorIs(t, err, proto.Error)
		return
	}
	require.NoError(t, err, "proto decoded %s", hex.EncodeToString(data))
	if !proto.Equal(want, got) {
		t.Fatalf("decoded messages differ for %s\nproto: %v\ncodec: %v", hex.EncodeToString(data), want, got)
	}
	// proto.Equal takes -0 for 0 and any NaN for any other: compare bits.
	deterministic := proto.MarshalOptions{Deterministic: true}
	wantBytes, err := deterministic.Marshal(want)
	require.NoError(t, err)
	gotBytes, err := deterministic.Marshal(got)
	require.NoError(t, err)
	if !bytes.Equal(wantBytes, gotBytes) {
		t.Fatalf("decoded messages encode differently for %s\nproto: %s\ncodec: %s", hex.EncodeToString(data), hex.EncodeToString(wantBytes), hex.EncodeToString(gotBytes))
	}
	// Re-encoding with the codec writes what proto writes.
	checkEncode(t, got)
}

func TestRandomMessagesMatchProto(t *testing.T) {
	samples := 500
	if testing.Short() {
		samples = 100
	}
	for seed, typ := range withCodec {
		t.Run(fmt.Sprintf("%T", typ), func(t *testing.T) {
			g := newRandomMessages(uint64(seed))
			g.maxDepth = 3
			for i := range samples {
				m := g.message(typ)
				checkEncode(t, m)
				data, err := proto.Marshal(m)
				require.NoError(t, err)
				checkDecode(t, newOf(typ), data)
				// Merging into a message that has fields already.
				checkDecode(t, g.message(typ), data)
				// Repeated scalars sent the other way round.
				md := typ.ProtoReflect().Descriptor()
				checkDecode(t, newOf(typ), recode(t, md, data, false))
				checkDecode(t, newOf(typ), recode(t, md, data, true))
				// Damaged input: truncated, a byte changed, a byte added.
				if len(data) > 0 {
					checkDecode(t, newOf(typ), data[:g.r.IntN(len(data))])
					damaged := bytes.Clone(data)
					damaged[g.r.IntN(len(damaged))] ^= byte(1 + g.r.IntN(255))
					checkDecode(t, newOf(typ), damaged)
					at := g.r.IntN(len(data))
					checkDecode(t, newOf(typ), append(append(bytes.Clone(data[:at]), byte(g.r.Uint32())), data[at:]...))
				}
				if t.Failed() {
					t.Fatalf("sample %d", i)
				}
			}
		})
	}
}

func TestInvalidUTF8FailsAsInProto(t *testing.T) {
	g := newRandomMessages(7)
	g.invalidUTF8 = true
	failed := 0
	for _, typ := range withCodec {
		for range 500 {
			m := g.message(typ)
			if _, err := proto.Marshal(m); err != nil {
				failed++
			}
			checkEncode(t, m)
		}
	}
	assert.Positive(t, failed, "no sample had invalid UTF-8")

	// Decoding: a string field holding invalid UTF-8, singular, repeated
	// and nested.
	for _, data := range [][]byte{
		protowire.AppendBytes(protowire.AppendTag(nil, 15, protowire.BytesType), []byte("\xff")),
		protowire.AppendBytes(protowire.AppendTag(nil, 31, protowire.BytesType), []byte("a\xc0")),
		protowire.AppendBytes(protowire.AppendTag(nil, 262143, protowire.BytesType), []byte("\xed\xa0\x80")),
	} {
		checkDecode(t, &wiretest.Scalars{}, data)
		err := new(wiretest.Scalars).MergeGranaryWire(data)
		require.Error(t, err)
		nested := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), data)
		checkDecode(t, &wiretest.Nested{}, nested)
	}
}

func TestEdgeValuesMatchProto(t *testing.T) {
	for _, m := range []proto.Message{
		&wiretest.Scalars{},
		&wiretest.Scalars{I32: -1, I64: math.MinInt64, U32: math.MaxUint32, U64: math.MaxUint64, S32: math.MinInt32,
			S64: math.MinInt64, F32: 1, F64: math.MaxUint64, Sf32: -1, Sf64: math.MinInt64, Color: wiretest.Color_COLOR_NEGATIVE},
		// -0 and NaNs, a signalling one included, are written bit for bit.
		&wiretest.Scalars{Fl: float32(math.Copysign(0, -1)), Db: math.Copysign(0, -1)},
		&wiretest.Scalars{Fl: math.Float32frombits(0x7f800001), Db: math.Float64frombits(0x7ff0000000000001)},
		&wiretest.Scalars{RFl: []float32{0, math.Float32frombits(0x7fc00001)}, RDb: []float64{math.Inf(-1), math.NaN()}},
		// Zeros in repeated fields are written.
		&wiretest.Scalars{RI32: []int32{0, 0}, RBo: []bool{false, true}, UnpackedBo: []bool{false}, UnpackedI64: []int64{0, -1}},
		&wiretest.Scalars{RStr: []string{""}, RByt: [][]byte{nil, {}}},
		// A nil element of a repeated message field is an empty message.
		&wiretest.Nested{Many: []*wiretest.Scalars{nil, {I32: 1}}},
		&wiretest.Tree{Kids: []*wiretest.Tree{nil}, Times: []*timestamppb.Timestamp{nil, {Seconds: 1}}, Maps: []*wiretest.WithMap{nil}},
		// Empty messages are written.
		&wiretest.Nested{Scalars: &wiretest.Scalars{}, Inner: &wiretest.Nested_Inner{}},
		&wiretest.Tree{At: &timestamppb.Timestamp{}, Odd: &wiretest.WithOneof{}},
	} {
		checkEncode(t, m)
		data, err := proto.Marshal(m)
		require.NoError(t, err)
		checkDecode(t, newOf(m), data)
	}
}

// TestLengthsOfEverySize encodes nested messages, strings and packed
// fields around the sizes where their length takes another byte.
func TestLengthsOfEverySize(t *testing.T) {
	for _, size := range []int{0, 1, 126, 127, 128, 129, 16382, 16383, 16384, 16385, 2097151, 2097152} {
		if testing.Short() && size > 16385 {
			continue
		}
		s := string(bytes.Repeat([]byte{'s'}, size))
		for _, m := range []proto.Message{
			&wiretest.Scalars{Str: s, Byt: []byte(s)},
			&wiretest.Nested{Scalars: &wiretest.Scalars{Str: s}, Inner: &wiretest.Nested_Inner{Name: s}},
			&wiretest.Nested{Many: []*wiretest.Scalars{{Byt: []byte(s)}, {Str: s}}},
			&wiretest.Scalars{RI64: make([]int64, min(size, 16385)), RBo: make([]bool, min(size, 16385)), RF32: make([]uint32, min(size, 16385)/4)},
			&wiretest.Tree{Left: &wiretest.Tree{Left: &wiretest.Tree{Maps: []*wiretest.WithMap{{Counts: map[string]int64{s: 1}}}}}},
		} {
			checkEncode(t, m)
			data, err := proto.Marshal(m)
			require.NoError(t, err)
			checkDecode(t, newOf(m), data)
		}
	}
}

// tagged returns the tag of field num with wire type typ followed by the
// value bytes.
func tagged(num protowire.Number, typ protowire.Type, value ...byte) []byte {
	return append(protowire.AppendTag(nil, num, typ), value...)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestHandMadeInputsDecodeAsInProto(t *testing.T) {
	maxVarint := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"padded tag of a known field", []byte{0x88, 0x00, 0x05}},
		{"padded tag of an unknown field", []byte{0xc0, 0xbe, 0x00, 0x05}},
		{"padded value of an unknown field", []byte{0xc0, 0x3e, 0x85, 0x00}},
		{"padded length", []byte{0x7a, 0x81, 0x00, 'x'}},
		{"int32 from a ten-byte varint", tagged(1, protowire.VarintType, maxVarint...)},
		{"int32 from a value wider than 32 bits", tagged(1, protowire.VarintType, 0x80, 0x80, 0x80, 0x80, 0x10)},
		{"uint32 from a value wider than 32 bits", tagged(3, protowire.VarintType, 0xff, 0xff, 0xff, 0xff, 0x7f)},
		{"sint32 from a value wider than 32 bits", tagged(5, protowire.VarintType, 0xfe, 0xff, 0xff, 0xff, 0x7f)},
		{"enum from a value wider than 32 bits", tagged(14, protowire.VarintType, maxVarint...)},
		{"bool from 2", tagged(13, protowire.VarintType, 2)},
		{"bool from a wide varint", tagged(13, protowire.VarintType, 0x80, 0x80, 0x01)},
		{"varint overflowing 64 bits", tagged(2, protowire.VarintType, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02)},
		{"varint of eleven bytes", tagged(2, protowire.VarintType, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80, 0x00)},
		{"truncated varint", tagged(2, protowire.VarintType, 0x80)},
		{"truncated fixed32", tagged(7, protowire.Fixed32Type, 1, 2, 3)},
		{"truncated fixed64", tagged(8, protowire.Fixed64Type, 1, 2, 3, 4, 5, 6, 7)},
		{"truncated length", tagged(15, protowire.BytesType, 5, 'a')},
		{"truncated tag", []byte{0x80}},
		{"field number 0", []byte{0x00, 0x00}},
		{"field number 0 with a wide tag", []byte{0x80, 0x00, 0x00}},
		{"largest field number", tagged(protowire.MaxValidNumber, protowire.VarintType, 1)},
		{"field number too large", append(protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3), 1)},
		{"field number over 32 bits", append(protowire.AppendVarint(nil, 1<<40), 1)},
		{"reserved wire type 6", []byte{0x0e, 0x00}},
		{"reserved wire type 7", []byte{0x0f, 0x00}},
		{"end group at the top", tagged(1, protowire.EndGroupType)},
		{"group", cat(tagged(1000, protowire.StartGroupType), tagged(1, protowire.VarintType, 1), tagged(1000, protowire.EndGroupType))},
		{"group with a known field number", cat(tagged(2, protowire.StartGroupType), tagged(2, protowire.EndGroupType), tagged(2, protowire.VarintType, 3))},
		{"nested groups", cat(tagged(5, protowire.StartGroupType), tagged(6, protowire.StartGroupType), tagged(6, protowire.EndGroupType), tagged(5, protowire.EndGroupType))},
		{"group with a large inner field number", cat(tagged(5, protowire.StartGroupType), protowire.AppendVarint(nil, uint64(1<<30)<<3|uint64(protowire.VarintType)), []byte{1}, tagged(5, protowire.EndGroupType))},
		{"mismatched end group", cat(tagged(5, protowire.StartGroupType), tagged(6, protowire.EndGroupType))},
		{"unterminated group", tagged(5, protowire.StartGroupType)},
		{"wrong wire type for a varint field", tagged(1, protowire.Fixed32Type, 1, 0, 0, 0)},
		{"wrong wire type for a string field", tagged(15, protowire.VarintType, 1)},
		{"wrong wire type for a fixed field", tagged(7, protowire.Fixed64Type, 1, 0, 0, 0, 0, 0, 0, 0)},
		{"wrong wire type for a message field", tagged(1, protowire.VarintType, 1)},
		{"wrong wire type that is malformed", tagged(1, protowire.BytesType, 9)},
		{"scalar twice", cat(tagged(2, protowire.VarintType, 1), tagged(2, protowire.VarintType, 2))},
		{"string twice", cat(tagged(15, protowire.BytesType, 1, 'a'), tagged(15, protowire.BytesType, 1, 'b'))},
		{"empty bytes", tagged(16, protowire.BytesType, 0)},
		{"bytes then empty bytes", cat(tagged(16, protowire.BytesType, 1, 'a'), tagged(16, protowire.BytesType, 0))},
		{"empty repeated bytes", tagged(32, protowire.BytesType, 0)},
		{"packed and unpacked mixed", cat(tagged(17, protowire.VarintType, 1), tagged(17, protowire.BytesType, 2, 2, 3), tagged(17, protowire.VarintType, 4))},
		{"unpacked field sent packed", tagged(40, protowire.BytesType, 3, 1, 0x80, 0x01)},
		{"packed fixed sent unpacked", tagged(23, protowire.Fixed32Type, 1, 2, 3, 4)},
		{"empty packed", tagged(18, protowire.BytesType, 0)},
		{"packed with a bad varint", tagged(18, protowire.BytesType, 1, 0x80)},
		{"packed fixed32 of a bad length", tagged(23, protowire.BytesType, 3, 1, 2, 3)},
		{"packed fixed64 of a bad length", tagged(24, protowire.BytesType, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9)},
		{"packed bools", tagged(29, protowire.BytesType, 3, 0, 1, 2)},
		{"packed negative enums", cat(tagged(30, protowire.BytesType, 10), maxVarint)},
		{"message twice merges", cat(tagged(1, protowire.BytesType, 2, 0x08, 0x01), tagged(1, protowire.BytesType, 2, 0x10, 0x02))},
		{"message with a bad field", tagged(1, protowire.BytesType, 2, 0x08, 0x80)},
		{"message longer than its input", tagged(1, protowire.BytesType, 5, 0x08, 0x01)},
		{"foreign message twice merges", cat(tagged(4, protowire.BytesType, 2, 0x08, 0x01), tagged(4, protowire.BytesType, 2, 0x10, 0x02))},
		{"foreign message with a bad field", tagged(4, protowire.BytesType, 2, 0x08, 0x80)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, typ := range withCodec {
				checkDecode(t, newOf(typ), tt.data)
			}
		})
	}
}

// TestEmptyBytesAreStoredAsInProto checks what protobuf stores for an
// empty bytes value on the wire, which proto.Equal does not see: nil in a
// singular field, an empty slice in a repeated one.
func TestEmptyBytesAreStoredAsInProto(t *testing.T) {
	data := cat(tagged(16, protowire.BytesType, 0), tagged(32, protowire.BytesType, 0))
	var want, got wiretest.Scalars
	require.NoError(t, proto.Unmarshal(data, &want))
	require.NoError(t, got.MergeGranaryWire(data))
	assert.Nil(t, want.Byt)
	assert.Nil(t, got.Byt)
	require.Len(t, want.RByt, 1)
	require.Len(t, got.RByt, 1)
	assert.NotNil(t, want.RByt[0])
	assert.NotNil(t, got.RByt[0])
}

// TestDecodeDoesNotAliasInput checks that decoded strings and bytes do not
// share memory with the input, which the transport reuses.
func TestDecodeDoesNotAliasInput(t *testing.T) {
	in := &wiretest.Scalars{Str: "abc", Byt: []byte("def"), RByt: [][]byte{[]byte("ghi")}}
	data, err := proto.Marshal(in)
	require.NoError(t, err)
	var got wiretest.Scalars
	require.NoError(t, got.MergeGranaryWire(data))
	for i := range data {
		data[i] = 0
	}
	assert.True(t, proto.Equal(in, &got), "decoded %v", &got)
}

func TestNilMessageAppendsNothing(t *testing.T) {
	var m *wiretest.Tree
	got, err := m.AppendGranaryWire([]byte("x"))
	require.NoError(t, err)
	assert.Equal(t, []byte("x"), got)
}

// nestedTrees returns a Tree nested levels deep through its left field,
// the innermost holding inner.
func nestedTrees(levels int, inner []byte) []byte {
	// The length of each level's content, innermost last.
	lengths := make([]int, levels+1)
	lengths[levels] = len(inner)
	for i := levels - 1; i >= 0; i-- {
		n := lengths[i+1]
		lengths[i] = 1 + protowire.SizeVarint(uint64(n)) + n
	}
	b := make([]byte, 0, lengths[0])
	for i := 1; i <= levels; i++ {
		b = protowire.AppendVarint(append(b, 0x12), uint64(lengths[i]))
	}
	return append(b, inner...)
}

func TestRecursionLimitAsInProto(t *testing.T) {
	inners := map[string][]byte{
		"nothing":              nil,
		"a value":              {0x08, 0x01},
		"a tree":               {0x12, 0x00},
		"a repeated tree":      {0x1a, 0x00},
		"a timestamp":          {0x22, 0x00},
		"a repeated timestamp": {0x2a, 0x00},
		"a oneof with a tree":  {0x32, 0x02, 0x1a, 0x00},
		"a map with a tree":    {0x3a, 0x06, 0x12, 0x04, 0x12, 0x02, 0x12, 0x00},
	}
	limit := protowire.DefaultRecursionLimit
	for name, inner := range inners {
		t.Run(name, func(t *testing.T) {
			// From the deepest input proto accepts to the first it refuses,
			// the codec must agree.
			deepest := -1
			for levels := limit + 1; levels > limit-8 && deepest < 0; levels-- {
				data := nestedTrees(levels, inner)
				wantErr := proto.Unmarshal(data, new(wiretest.Tree))
				err := new(wiretest.Tree).MergeGranaryWire(data)
				require.Equal(t, wantErr != nil, err != nil, "at %d levels: proto says %v, the codec %v", levels, wantErr, err)
				if wantErr == nil {
					deepest = levels
				}
			}
			require.Positive(t, deepest, "proto refused every depth tried")
			require.Less(t, deepest, limit+1, "proto accepted every depth tried")
			checkDecode(t, &wiretest.Tree{}, nestedTrees(deepest, inner))
		})
	}
}

func TestDeepMessagesFailWithoutCrashing(t *testing.T) {
	const levels = 20000
	data := nestedTrees(levels, nil)
	require.Error(t, proto.Unmarshal(data, new(wiretest.Tree)))
	err := new(wiretest.Tree).MergeGranaryWire(data)
	require.Error(t, err)
	assert.ErrorIs(t, err, proto.Error)

	// Encoding has no limit, in either.
	var root wiretest.Tree
	for m, i := &root, 0; i < levels; m, i = m.Left, i+1 {
		m.Left = &wiretest.Tree{Value: int64(i)}
	}
	checkEncode(t, &root)
}
