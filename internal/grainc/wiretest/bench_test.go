package wiretest_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/internal/grainc/wiretest"
)

// benchMessage is a message to encode and a function making an empty one
// to decode into, as a dispatcher does.
type benchMessage struct {
	name  string
	m     proto.Message
	fresh func() proto.Message
}

// benchMessages are a small message, the size of a typical grain reply,
// a medium one, and one whose nested messages take more than 127 bytes,
// so that their lengths need two bytes.
func benchMessages() []benchMessage {
	return []benchMessage{
		{"Small", &wiretest.Small{A: 42, B: 1_700_000_000_000_000_000}, func() proto.Message { return new(wiretest.Small) }},
		{"Medium", &wiretest.Medium{
			Key:     "account/0d8f6c1e-7b7a-4f0e-9a55-2f7f3c9e8b11",
			Version: 12345,
			Ids:     []int64{1, 2, 3, 500, 70000, 1 << 40},
			Small:   &wiretest.Small{A: 7, B: -7},
			Payload: make([]byte, 64),
			Color:   wiretest.Color_COLOR_RED,
			Score:   0.75,
			Tags:    []string{"alpha", "beta", "gamma"},
			Done:    true,
		}, func() proto.Message { return new(wiretest.Medium) }},
		{"NestedLarge", nestedLarge(), func() proto.Message { return new(wiretest.Nested) }},
	}
}

func nestedLarge() *wiretest.Nested {
	m := &wiretest.Nested{Label: "large", Inner: &wiretest.Nested_Inner{Name: "root"}}
	for i := range 8 {
		m.Many = append(m.Many, &wiretest.Scalars{I64: int64(i), Str: string(make([]byte, 200)), RI32: []int32{1, 2, 3}})
		m.Inner.Children = append(m.Inner.Children, &wiretest.Nested_Inner{Name: string(make([]byte, 150))})
	}
	return m
}

func BenchmarkAppend(b *testing.B) {
	for _, bm := range benchMessages() {
		m := bm.m
		buf := make([]byte, 0, 1024)
		b.Run(bm.name+"/granary", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = wire(m).AppendGranaryWire(buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bm.name+"/proto", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf[:0], m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMerge(b *testing.B) {
	for _, bm := range benchMessages() {
		data, err := proto.Marshal(bm.m)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bm.name+"/granary", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := wire(bm.fresh()).MergeGranaryWire(data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bm.name+"/proto", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := proto.Unmarshal(data, bm.fresh()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
