package ratelimitpb

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/granary-go/granary/proxy"
)

// fill sets random values, edge values often, in a random selection of m's
// fields, nested messages and lists included.
func fill(r *rand.Rand, m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if r.IntN(4) == 0 {
			continue
		}
		switch {
		case fd.IsList():
			list := m.Mutable(fd).List()
			for range r.IntN(4) {
				if fd.Message() != nil {
					if depth < 3 {
						v := list.NewElement()
						fill(r, v.Message(), depth+1)
						list.Append(v)
					}
					continue
				}
				list.Append(scalar(r, fd))
			}
		case fd.Message() != nil:
			if depth < 3 {
				fill(r, m.Mutable(fd).Message(), depth+1)
			}
		default:
			m.Set(fd, scalar(r, fd))
		}
	}
}

func scalar(r *rand.Rand, fd protoreflect.FieldDescriptor) protoreflect.Value {
	edge := []int64{0, 1, -1, 1 << 62, -1 << 63, 127, 128}
	n := r.Int64()
	if r.IntN(2) == 0 {
		n = edge[r.IntN(len(edge))]
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(n&1 == 1)
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(n)
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(uint64(n))
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(int32(n)))
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(string(rune('a'+r.IntN(26))) + "é:" + "granary.ratelimit"[:r.IntN(18)])
	case protoreflect.BytesKind:
		b := make([]byte, r.IntN(200))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return protoreflect.ValueOfBytes(b)
	}
	panic("unhandled kind " + fd.Kind().String())
}

// TestGeneratedCodecsAgreeWithProtobuf checks every message of the contract
// against protobuf's own codec: the bytes the generated encoder writes, and
// what the generated decoder reads back.
func TestGeneratedCodecsAgreeWithProtobuf(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	messages := File_grains_ratelimit_ratelimitpb_ratelimit_proto.Messages()
	for i := 0; i < messages.Len(); i++ {
		md := messages.Get(i)
		mt, err := protoRegistryFind(md.FullName())
		require.NoError(t, err)
		for range 200 {
			m := mt.New()
			fill(r, m, 0)
			msg := m.Interface()
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
			require.NoError(t, err)
			w, ok := msg.(proxy.WireMessage)
			require.True(t, ok, "%s has a generated codec", md.FullName())
			got, err := w.AppendGranaryWire(nil)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got), "%s encodes as protobuf does", md.FullName())
			back := mt.New().Interface().(proxy.WireMessage)
			require.NoError(t, back.MergeGranaryWire(got))
			require.True(t, proto.Equal(msg, back), "%s decodes what it encoded", md.FullName())
			_ = back.(interface{ String() string }).String()
		}
	}
}

func protoRegistryFind(name protoreflect.FullName) (protoreflect.MessageType, error) {
	return protoregistry.GlobalTypes.FindMessageByName(name)
}

// TestGeneratedDecoderRejectsWhatProtobufRejects corrupts valid encodings
// (truncations and flipped bytes) and checks that the generated decoder
// accepts exactly what protobuf accepts, into the same message.
func TestGeneratedDecoderRejectsWhatProtobufRejects(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	messages := File_grains_ratelimit_ratelimitpb_ratelimit_proto.Messages()
	for i := 0; i < messages.Len(); i++ {
		mt, err := protoRegistryFind(messages.Get(i).FullName())
		require.NoError(t, err)
		for range 50 {
			m := mt.New()
			fill(r, m, 0)
			valid, err := proto.Marshal(m.Interface())
			require.NoError(t, err)
			for variant := range 8 {
				b := append([]byte(nil), valid...)
				switch {
				case len(b) == 0:
					b = []byte{byte(r.Uint32())}
				case variant < 4:
					b = b[:r.IntN(len(b))]
				default:
					b[r.IntN(len(b))] = byte(r.Uint32())
				}
				gen := mt.New().Interface().(proxy.WireMessage)
				ref := mt.New().Interface()
				genErr, refErr := gen.MergeGranaryWire(b), proto.Unmarshal(b, ref)
				require.Equal(t, refErr == nil, genErr == nil, "%s from %x: generated %v, protobuf %v", mt.Descriptor().FullName(), b, genErr, refErr)
				if genErr == nil {
					require.True(t, proto.Equal(ref, gen), "%s from %x", mt.Descriptor().FullName(), b)
				}
			}
		}
	}
}

// TestGettersReadTheirFields calls every generated getter, on a filled
// message and on a nil one, and compares it with the field's value.
func TestGettersReadTheirFields(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	messages := File_grains_ratelimit_ratelimitpb_ratelimit_proto.Messages()
	for i := 0; i < messages.Len(); i++ {
		mt, err := protoRegistryFind(messages.Get(i).FullName())
		require.NoError(t, err)
		m := mt.New()
		fill(r, m, 0)
		msg := reflect.ValueOf(m.Interface())
		null := reflect.Zero(msg.Type())
		fields := m.Descriptor().Fields()
		for j := 0; j < fields.Len(); j++ {
			fd := fields.Get(j)
			getter := msg.MethodByName("Get" + goName(string(fd.Name())))
			require.True(t, getter.IsValid(), "%s has a getter for %s", mt.Descriptor().FullName(), fd.Name())
			got := getter.Call(nil)[0]
			if fd.Kind() != protoreflect.MessageKind && !fd.IsList() {
				want := m.Get(fd).Interface()
				if e, ok := want.(protoreflect.EnumNumber); ok {
					want = int64(e)
					got = reflect.ValueOf(got.Int())
				}
				require.Equal(t, want, got.Interface(), "%s.%s", mt.Descriptor().FullName(), fd.Name())
			}
			zero := null.MethodByName("Get" + goName(string(fd.Name()))).Call(nil)[0]
			require.True(t, zero.IsZero(), "a nil %s reads a zero %s", mt.Descriptor().FullName(), fd.Name())
		}
		// The rest of the generated method set: reset, describe, print.
		_ = m.Interface().(interface{ String() string }).String()
		msg.MethodByName("ProtoMessage").Call(nil)
		_, path := msg.MethodByName("Descriptor").Call(nil)[0], msg.MethodByName("Descriptor").Call(nil)[1]
		require.Equal(t, []int{i}, path.Interface(), "%s's descriptor path", mt.Descriptor().FullName())
		msg.MethodByName("Reset").Call(nil)
		require.True(t, proto.Equal(mt.New().Interface(), m.Interface()), "Reset empties %s", mt.Descriptor().FullName())
	}
	order := QueueOrder_QUEUE_ORDER_NEWEST_FIRST
	require.Equal(t, "QUEUE_ORDER_NEWEST_FIRST", order.String())
	require.Equal(t, protoreflect.EnumNumber(1), order.Number())
	require.Equal(t, order, *order.Enum())
	require.NotNil(t, order.Type())
	_, path := order.EnumDescriptor()
	require.Equal(t, []int{0}, path)
}

// goName is protoc-gen-go's Go name of a field.
func goName(field string) string {
	var b strings.Builder
	up := true
	for _, c := range field {
		if c == '_' {
			up = true
			continue
		}
		if up && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		up = false
		b.WriteRune(c)
	}
	return b.String()
}

// FuzzGeneratedDecoders feeds bytes, as a connection delivers them, to the
// generated decoder of every message of the contract: it accepts exactly
// what protobuf accepts, into the same message.
func FuzzGeneratedDecoders(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	messages := File_grains_ratelimit_ratelimitpb_ratelimit_proto.Messages()
	for i := 0; i < messages.Len(); i++ {
		mt, err := protoRegistryFind(messages.Get(i).FullName())
		if err != nil {
			f.Fatal(err)
		}
		m := mt.New()
		fill(r, m, 0)
		b, err := proto.Marshal(m.Interface())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b)
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		mt, err := protoRegistryFind(messages.Get(int(which) % messages.Len()).FullName())
		if err != nil {
			t.Fatal(err)
		}
		gen := mt.New().Interface().(proxy.WireMessage)
		ref := mt.New().Interface()
		genErr, refErr := gen.MergeGranaryWire(data), proto.Unmarshal(data, ref)
		if (genErr == nil) != (refErr == nil) {
			t.Fatalf("%s from %x: generated %v, protobuf %v", mt.Descriptor().FullName(), data, genErr, refErr)
		}
		if genErr == nil && !proto.Equal(ref, gen) {
			t.Fatalf("%s from %x: the decoders disagree", mt.Descriptor().FullName(), data)
		}
	})
}
