package wirecodec_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/proxy/wirecodec"
)

func TestVarintsMatchProtowire(t *testing.T) {
	for _, v := range []uint64{0, 1, 0x7f, 0x80, 300, 1 << 35, 1<<64 - 1} {
		want := protowire.AppendVarint([]byte{0xaa}, v)
		got := wirecodec.AppendVarint([]byte{0xaa}, v)
		assert.Equal(t, want, got, "append %d", v)

		x, n := wirecodec.ConsumeVarint(append(got[1:], 0xbb))
		assert.Equal(t, v, x, "consume %d", v)
		assert.Equal(t, len(got)-1, n, "consume %d", v)
	}
}

func TestConsumeVarintRejectsMalformed(t *testing.T) {
	for _, b := range [][]byte{
		nil,
		{0x80},
		{0xff, 0xff},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, // overflow
	} {
		_, want := protowire.ConsumeVarint(b)
		_, n := wirecodec.ConsumeVarint(b)
		assert.Negative(t, n, "% x", b)
		assert.Equal(t, want, n, "% x", b)
	}
}

func TestConsumeUnknown(t *testing.T) {
	tag := func(num protowire.Number, typ protowire.Type) uint64 { return protowire.EncodeTag(num, typ) }
	group := protowire.AppendTag(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 5), 7, protowire.EndGroupType)
	tests := []struct {
		name     string
		tag      uint64
		input    []byte
		wantKept []byte // nil: malformed
		wantRead int
	}{
		{"varint", tag(3, protowire.VarintType), []byte{0x96, 0x01, 0xff}, []byte{0x18, 0x96, 0x01}, 2},
		{"bytes", tag(4, protowire.BytesType), []byte{2, 'h', 'i', 9}, []byte{0x22, 2, 'h', 'i'}, 3},
		{"fixed32", tag(5, protowire.Fixed32Type), []byte{1, 2, 3, 4}, []byte{0x2d, 1, 2, 3, 4}, 4},
		{"largest field number", tag(protowire.MaxValidNumber, protowire.VarintType), []byte{1},
			append(protowire.AppendTag(nil, protowire.MaxValidNumber, protowire.VarintType), 1), 1},
		{"group", tag(7, protowire.StartGroupType), group, append([]byte{0x3b}, group...), len(group)},
		{"unterminated group", tag(7, protowire.StartGroupType), group[:len(group)-1], nil, 0},
		{"mismatched end group", tag(8, protowire.StartGroupType), group, nil, 0},
		{"field number 0", tag(0, protowire.VarintType), []byte{1}, nil, 0},
		{"field number too large", uint64(protowire.MaxValidNumber+1) << 3, []byte{1}, nil, 0},
		{"truncated varint", tag(3, protowire.VarintType), []byte{0x96}, nil, 0},
		{"truncated bytes", tag(4, protowire.BytesType), []byte{3, 'h', 'i'}, nil, 0},
		{"truncated fixed64", tag(6, protowire.Fixed64Type), []byte{1, 2, 3}, nil, 0},
		{"reserved wire type", tag(3, 6), []byte{1}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prior := []byte{0x08, 0x01}
			kept, n := wirecodec.ConsumeUnknown(prior, tt.tag, tt.input)
			if tt.wantKept == nil {
				assert.Negative(t, n)
				assert.Equal(t, prior, kept, "unknown fields changed on error")
				return
			}
			assert.Equal(t, tt.wantRead, n)
			assert.Equal(t, append([]byte{0x08, 0x01}, tt.wantKept...), kept)
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{wirecodec.InvalidError("p.M"), "p.M: cannot parse invalid wire-format data"},
		{wirecodec.DepthError("p.M"), "p.M: exceeded maximum recursion depth"},
		{wirecodec.UTF8Error("p.M.s"), "field p.M.s contains invalid UTF-8"},
	}
	for _, tt := range tests {
		assert.True(t, errors.Is(tt.err, proto.Error), tt.err)
		assert.Contains(t, tt.err.Error(), tt.want)
	}
}
