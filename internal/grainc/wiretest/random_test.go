package wiretest_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// randomMessages builds random messages through protoreflect, so that
// every field of every type is covered without naming it, with values
// chosen to hit the edges of the wire format.
type randomMessages struct {
	r *rand.Rand
	// invalidUTF8 lets strings be invalid UTF-8, which both codecs must
	// then refuse.
	invalidUTF8 bool
	// maxDepth bounds the nesting of messages.
	maxDepth int
	// long lets strings and bytes be longer than 127 and 16383 bytes.
	long bool
}

func newRandomMessages(seed uint64) *randomMessages {
	return &randomMessages{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), maxDepth: 4, long: true}
}

// fill sets a random selection of m's fields, and sometimes unknown fields.
func (g *randomMessages) fill(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if g.r.IntN(3) == 0 {
			continue
		}
		if oneof := fd.ContainingOneof(); oneof != nil && m.WhichOneof(oneof) != nil {
			continue
		}
		switch {
		case fd.IsMap():
			entries := m.Mutable(fd).Map()
			for range g.r.IntN(3) {
				key := g.scalar(fd.MapKey()).MapKey()
				if fd.MapValue().Message() != nil {
					if depth >= g.maxDepth {
						continue
					}
					v := entries.NewValue()
					g.fill(v.Message(), depth+1)
					entries.Set(key, v)
				} else {
					entries.Set(key, g.scalar(fd.MapValue()))
				}
			}
		case fd.IsList():
			list := m.Mutable(fd).List()
			n := g.r.IntN(4)
			if fd.Message() == nil && g.r.IntN(20) == 0 {
				n = 50 + g.r.IntN(100) // packed records longer than 127 bytes
			}
			for range n {
				if fd.Message() != nil {
					if depth >= g.maxDepth {
						break
					}
					v := list.NewElement()
					g.fill(v.Message(), depth+1)
					list.Append(v)
				} else {
					list.Append(g.scalar(fd))
				}
			}
		case fd.Message() != nil:
			if depth < g.maxDepth {
				g.fill(m.Mutable(fd).Message(), depth+1)
			}
		default:
			m.Set(fd, g.scalar(fd))
		}
	}
	if g.r.IntN(4) == 0 {
		m.SetUnknown(g.unknown(m.Descriptor()))
	}
}

func (g *randomMessages) scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(g.r.IntN(2) == 0)
	case protoreflect.EnumKind:
		values := []int32{0, 1, -3, 1000000, math.MinInt32, math.MaxInt32, 7, g.r.Int32()}
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(values[g.r.IntN(len(values))]))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(g.integer(32)))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(g.integer(64)))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(g.integer(32)))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(g.integer(64))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(g.float()))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(g.float())
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(g.text())
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes(g.bytes())
	}
	panic("no random value for " + fd.Kind().String())
}

// integer returns the bit pattern of a random integer of the given width:
// an edge value or a random one, sign-extended to 64 bits when negative.
func (g *randomMessages) integer(bits int) uint64 {
	var v int64
	switch g.r.IntN(12) {
	case 0:
		v = 0
	case 1:
		v = -1
	case 2:
		v = 1
	case 3:
		v = 127
	case 4:
		v = 128
	case 5:
		v = 16383
	case 6:
		v = 16384
	case 7:
		v = math.MinInt64 >> (64 - bits) // the minimum of the width
	case 8:
		v = math.MaxInt64 >> (64 - bits) // the maximum of the width
	case 9:
		v = int64(g.r.IntN(300)) - 150
	default:
		v = int64(g.r.Uint64())
		if bits == 32 {
			v = int64(int32(v))
		}
	}
	return uint64(v)
}

func (g *randomMessages) float() float64 {
	values := []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1),
		1.5, -2.25, math.SmallestNonzeroFloat64, math.MaxFloat64, math.MaxFloat32}
	if g.r.IntN(3) == 0 {
		return g.r.NormFloat64() * 1e6
	}
	return values[g.r.IntN(len(values))]
}

func (g *randomMessages) text() string {
	switch g.r.IntN(10) {
	case 0:
		return ""
	case 1:
		return "a"
	case 2:
		return "héllo, wörld ✓ 𝄞"
	case 3:
		if g.long {
			return strings.Repeat("x", 128+g.r.IntN(200))
		}
	case 4:
		if g.long && g.r.IntN(4) == 0 {
			return strings.Repeat("é", 8192+g.r.IntN(100)) // over 16383 bytes
		}
	case 5:
		if g.invalidUTF8 && g.r.IntN(3) == 0 {
			invalid := []string{"\xff", "a\xc0b", "\xed\xa0\x80", "ok\xe2\x82"}
			return invalid[g.r.IntN(len(invalid))]
		}
	}
	var b strings.Builder
	for range g.r.IntN(20) {
		b.WriteRune(rune(' ' + g.r.IntN(0x7f-' ')))
	}
	return b.String()
}

func (g *randomMessages) bytes() []byte {
	switch g.r.IntN(8) {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2:
		if g.long {
			return make([]byte, 128+g.r.IntN(300))
		}
	case 3:
		if g.long && g.r.IntN(4) == 0 {
			return make([]byte, 16384+g.r.IntN(100))
		}
	}
	b := make([]byte, g.r.IntN(20))
	for i := range b {
		b[i] = byte(g.r.Uint32())
	}
	return b
}

// unknown returns well-formed unknown fields: new field numbers, and
// known ones with a wire type other than the field's, of every wire type,
// groups included.
func (g *randomMessages) unknown(md protoreflect.MessageDescriptor) []byte {
	var b []byte
	for range 1 + g.r.IntN(3) {
		b = g.appendUnknownField(b, md, 0)
	}
	return b
}

func (g *randomMessages) appendUnknownField(b []byte, md protoreflect.MessageDescriptor, depth int) []byte {
	num := protowire.Number(1000 + g.r.IntN(100))
	switch g.r.IntN(4) {
	case 0:
		num = protowire.MaxValidNumber
	case 1:
		if fields := md.Fields(); fields.Len() > 0 {
			num = fields.Get(g.r.IntN(fields.Len())).Number()
		}
	}
	typ := []protowire.Type{protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type,
		protowire.BytesType, protowire.StartGroupType}[g.r.IntN(5)]
	if fd := md.Fields().ByNumber(num); fd != nil && accepts(fd, typ) {
		// The value would be a known field: possibly an invalid one, and
		// not unknown after a round trip. Use a free number instead.
		num = 1000
	}
	b = protowire.AppendTag(b, num, typ)
	switch typ {
	case protowire.VarintType:
		b = protowire.AppendVarint(b, g.integer(64))
	case protowire.Fixed32Type:
		b = protowire.AppendFixed32(b, uint32(g.integer(32)))
	case protowire.Fixed64Type:
		b = protowire.AppendFixed64(b, g.integer(64))
	case protowire.BytesType:
		b = protowire.AppendBytes(b, g.bytes())
	case protowire.StartGroupType:
		if depth < 3 {
			for range g.r.IntN(3) {
				b = g.appendUnknownField(b, md, depth+1)
			}
		}
		b = protowire.AppendTag(b, num, protowire.EndGroupType)
	}
	return b
}

// accepts reports whether a field decodes values of wire type typ.
func accepts(fd protoreflect.FieldDescriptor, typ protowire.Type) bool {
	if fd.IsList() && typ == protowire.BytesType {
		return true // repeated scalars are accepted packed
	}
	return elementWireType(fd) == typ
}

// elementWireType returns the wire type of one value of a field.
func elementWireType(fd protoreflect.FieldDescriptor) protowire.Type {
	switch fd.Kind() {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return protowire.BytesType
	case protoreflect.GroupKind:
		return protowire.StartGroupType
	}
	return protowire.VarintType
}

// message returns a random message of m's type.
func (g *randomMessages) message(m proto.Message) proto.Message {
	out := m.ProtoReflect().Type().New()
	g.fill(out, 0)
	return out.Interface()
}

// recode rewrites the top-level repeated scalar fields of an encoded
// message of type md: every packed record as one record per value when
// pack is false, every single value as a packed record of one when pack is
// true. protobuf decodes either form whatever the field's declaration.
func recode(t *testing.T, md protoreflect.MessageDescriptor, data []byte, pack bool) []byte {
	t.Helper()
	var out []byte
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeField(data)
		require.GreaterOrEqual(t, n, 0)
		record := data[:n]
		data = data[n:]
		fd := md.Fields().ByNumber(num)
		if fd == nil || !fd.IsList() || fd.Message() != nil || fd.Kind() == protoreflect.StringKind || fd.Kind() == protoreflect.BytesKind {
			out = append(out, record...)
			continue
		}
		_, _, tagLen := protowire.ConsumeTag(record)
		value := record[tagLen:]
		elem := elementWireType(fd)
		switch {
		case pack && typ == elem:
			out = protowire.AppendBytes(protowire.AppendTag(out, num, protowire.BytesType), value)
		case !pack && typ == protowire.BytesType:
			values, _ := protowire.ConsumeBytes(value)
			for len(values) > 0 {
				k := protowire.ConsumeFieldValue(num, elem, values)
				require.GreaterOrEqual(t, k, 0)
				out = append(protowire.AppendTag(out, num, elem), values[:k]...)
				values = values[k:]
			}
		default:
			out = append(out, record...)
		}
	}
	return out
}
