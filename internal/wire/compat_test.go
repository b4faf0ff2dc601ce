package wire

import (
	"context"
	_ "embed"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

//go:embed wire.proto
var wireProto string

// envelopeDescriptor compiles wire.proto, so the compatibility tests check the
// checked-in schema rather than a copy of it.
func envelopeDescriptor(tb testing.TB) protoreflect.MessageDescriptor {
	tb.Helper()
	compiler := protocompile.Compiler{
		Resolver: &protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(map[string]string{"wire.proto": wireProto}),
		},
	}
	files, err := compiler.Compile(context.Background(), "wire.proto")
	require.NoError(tb, err)
	md := files[0].Messages().ByName("Envelope")
	require.NotNil(tb, md)
	return md
}

func toDynamic(md protoreflect.MessageDescriptor, e *Envelope) *dynamicpb.Message {
	m := dynamicpb.NewMessage(md)
	f := md.Fields()
	set := func(name protoreflect.Name, v protoreflect.Value) { m.Set(f.ByName(name), v) }
	set("kind", protoreflect.ValueOfEnum(protoreflect.EnumNumber(e.Kind)))
	set("call_id", protoreflect.ValueOfUint64(e.CallID))
	set("grain_type", protoreflect.ValueOfString(e.GrainType))
	set("grain_key", protoreflect.ValueOfString(e.GrainKey))
	set("method_id", protoreflect.ValueOfUint32(e.MethodID))
	set("payload", protoreflect.ValueOfBytes(e.Payload))
	set("placement_hint", protoreflect.ValueOfString(e.PlacementHint))
	set("budget_nanos", protoreflect.ValueOfInt64(int64(e.Budget)))
	set("cancellable", protoreflect.ValueOfBool(e.Cancellable))
	set("timeout_nanos", protoreflect.ValueOfInt64(int64(e.Timeout)))
	set("status", protoreflect.ValueOfEnum(protoreflect.EnumNumber(e.Status)))
	set("error", protoreflect.ValueOfString(e.Error))
	set("hops", protoreflect.ValueOfUint32(e.Hops))
	set("from_silo", protoreflect.ValueOfBool(e.FromSilo))
	set("error_code", protoreflect.ValueOfUint32(e.ErrorCode))
	set("moved_to", protoreflect.ValueOfString(e.MovedTo))
	details := m.Mutable(f.ByName("error_details")).List()
	for _, d := range e.ErrorDetails {
		details.Append(protoreflect.ValueOfBytes(d))
	}
	entries := m.Mutable(f.ByName("metadata")).List()
	for i := 0; i < len(e.Metadata); i += 2 {
		entry := entries.NewElement().Message()
		ef := entry.Descriptor().Fields()
		entry.Set(ef.ByName("key"), protoreflect.ValueOfString(e.Metadata[i]))
		entry.Set(ef.ByName("value"), protoreflect.ValueOfString(e.Metadata[i+1]))
		entries.Append(protoreflect.ValueOfMessage(entry))
	}
	if c := e.Caller; c != nil {
		caller := m.Mutable(f.ByName("caller")).Message()
		cf := caller.Descriptor().Fields()
		caller.Set(cf.ByName("kind"), protoreflect.ValueOfUint32(c.Kind))
		caller.Set(cf.ByName("name"), protoreflect.ValueOfString(c.Name))
		caller.Set(cf.ByName("rights"), protoreflect.ValueOfUint32(c.Rights))
		caller.Set(cf.ByName("credential"), protoreflect.ValueOfUint32(c.Credential))
	}
	return m
}

func fromDynamic(m *dynamicpb.Message) Envelope {
	f := m.Descriptor().Fields()
	get := func(name protoreflect.Name) protoreflect.Value { return m.Get(f.ByName(name)) }
	e := Envelope{
		Kind:          Kind(get("kind").Enum()),
		CallID:        get("call_id").Uint(),
		GrainType:     get("grain_type").String(),
		GrainKey:      get("grain_key").String(),
		MethodID:      uint32(get("method_id").Uint()),
		Payload:       get("payload").Bytes(),
		PlacementHint: get("placement_hint").String(),
		Budget:        time.Duration(get("budget_nanos").Int()),
		Cancellable:   get("cancellable").Bool(),
		Timeout:       time.Duration(get("timeout_nanos").Int()),
		Status:        Status(get("status").Enum()),
		Error:         get("error").String(),
		Hops:          uint32(get("hops").Uint()),
		FromSilo:      get("from_silo").Bool(),
		MovedTo:       get("moved_to").String(),
		ErrorCode:     uint32(get("error_code").Uint()),
	}
	details := get("error_details").List()
	for i := range details.Len() {
		e.ErrorDetails = append(e.ErrorDetails, details.Get(i).Bytes())
	}
	entries := get("metadata").List()
	for i := range entries.Len() {
		entry := entries.Get(i).Message()
		ef := entry.Descriptor().Fields()
		e.Metadata = append(e.Metadata, entry.Get(ef.ByName("key")).String(), entry.Get(ef.ByName("value")).String())
	}
	if m.Has(f.ByName("caller")) {
		caller := get("caller").Message()
		cf := caller.Descriptor().Fields()
		e.Caller = &Identity{
			Kind: uint32(caller.Get(cf.ByName("kind")).Uint()), Name: caller.Get(cf.ByName("name")).String(),
			Rights: uint32(caller.Get(cf.ByName("rights")).Uint()), Credential: uint32(caller.Get(cf.ByName("credential")).Uint()),
		}
	}
	return normalized(e)
}

// normalized makes an empty payload and empty details nil, since proto3
// cannot tell the two apart.
func normalized(e Envelope) Envelope {
	if len(e.Payload) == 0 {
		e.Payload = nil
	}
	if len(e.ErrorDetails) == 0 {
		e.ErrorDetails = nil
	}
	for i, d := range e.ErrorDetails {
		if len(d) == 0 {
			e.ErrorDetails[i] = []byte{}
		}
	}
	if len(e.Metadata) == 0 {
		e.Metadata = nil
	}
	return e
}

func randomString(r *rand.Rand) string {
	alphabet := []rune("abcXYZ09/._-é漢🙂\u0000")
	n := r.IntN(4)
	if n == 3 {
		n = r.IntN(300)
	}
	out := make([]rune, n)
	for i := range out {
		out[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(out)
}

func randomUint64(r *rand.Rand) uint64 {
	switch r.IntN(5) {
	case 0:
		return 0
	case 1:
		return uint64(r.IntN(128))
	case 2:
		return math.MaxUint64 - uint64(r.IntN(3))
	default:
		return r.Uint64() >> r.IntN(64)
	}
}

func randomEnvelope(r *rand.Rand) Envelope {
	e := Envelope{
		Kind:          Kind(int32(randomUint64(r))),
		CallID:        randomUint64(r),
		GrainType:     randomString(r),
		GrainKey:      randomString(r),
		MethodID:      uint32(randomUint64(r)),
		PlacementHint: randomString(r),
		Budget:        time.Duration(int64(randomUint64(r))),
		Cancellable:   r.IntN(2) == 0,
		Timeout:       time.Duration(int64(randomUint64(r))),
		Status:        Status(int32(randomUint64(r))),
		Error:         randomString(r),
		Hops:          uint32(randomUint64(r)),
		FromSilo:      r.IntN(2) == 0,
		ErrorCode:     uint32(randomUint64(r)),
		MovedTo:       randomString(r),
	}
	for range r.IntN(3) {
		d := make([]byte, r.IntN(40))
		for i := range d {
			d[i] = byte(r.Uint32())
		}
		e.ErrorDetails = append(e.ErrorDetails, d)
	}
	for range r.IntN(3) {
		e.Metadata = append(e.Metadata, randomString(r), randomString(r))
	}
	if r.IntN(3) == 0 {
		e.Caller = &Identity{Kind: uint32(randomUint64(r)), Name: randomString(r), Rights: uint32(randomUint64(r)), Credential: uint32(randomUint64(r))}
	}
	if n := r.IntN(4); n > 0 {
		e.Payload = make([]byte, r.IntN(n*100))
		for i := range e.Payload {
			e.Payload[i] = byte(r.Uint32())
		}
	}
	return normalized(e)
}

func TestWireProtoCompatibility(t *testing.T) {
	md := envelopeDescriptor(t)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		want := randomEnvelope(r)

		// Ours to protobuf-go: the bytes must decode to the same values, and must
		// be the bytes protobuf-go itself would write.
		ours := want.AppendTo(nil)
		m := dynamicpb.NewMessage(md)
		require.NoError(t, proto.Unmarshal(ours, m), "case %d", i)
		require.Equal(t, want, fromDynamic(m), "case %d: ours -> dynamicpb", i)
		theirs, err := proto.MarshalOptions{Deterministic: true}.Marshal(toDynamic(md, &want))
		require.NoError(t, err)
		require.Equal(t, theirs, ours, "case %d: encodings differ", i)

		// protobuf-go to ours.
		var got Envelope
		require.NoError(t, got.Unmarshal(theirs), "case %d", i)
		require.Equal(t, want, normalized(got), "case %d: dynamicpb -> ours", i)
	}
}

// TestWireProtoSchema pins the checked-in schema to the codec's field numbers
// and enum values, which the round trip alone could miss for unused names.
func TestWireProtoSchema(t *testing.T) {
	md := envelopeDescriptor(t)
	fields := map[protoreflect.Name]protoreflect.FieldNumber{
		"kind": 1, "call_id": 2, "grain_type": 3, "grain_key": 4, "method_id": 5, "payload": 6,
		"placement_hint": 7, "budget_nanos": 8, "cancellable": 9, "timeout_nanos": 10,
		"status": 11, "error": 12, "hops": 13, "from_silo": 14, "error_code": 15, "error_details": 16, "moved_to": 17,
		"metadata": 18, "caller": 19,
	}
	assert.Equal(t, len(fields), md.Fields().Len())
	for name, num := range fields {
		fd := md.Fields().ByName(name)
		if assert.NotNil(t, fd, name) {
			assert.Equal(t, num, fd.Number(), name)
		}
	}
	kinds := md.Fields().ByName("kind").Enum()
	for k := KindUnspecified; k <= KindCancel; k++ {
		v := kinds.Values().ByNumber(protoreflect.EnumNumber(k))
		if assert.NotNil(t, v, k) {
			assert.Equal(t, k.String(), string(v.Name()))
		}
	}
	ranges := kinds.ReservedRanges()
	assert.True(t, ranges.Has(16) && ranges.Has(31) && ranges.Has(32) && ranges.Has(47))
	statuses := md.Fields().ByName("status").Enum()
	assert.Equal(t, len(statusNames), statuses.Values().Len())
	for s := StatusOK; int(s) < len(statusNames); s++ {
		v := statuses.Values().ByNumber(protoreflect.EnumNumber(s))
		if assert.NotNil(t, v, s) {
			assert.Equal(t, s.String(), string(v.Name()))
		}
	}
}
