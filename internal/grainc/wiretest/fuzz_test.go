package wiretest_test

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

// FuzzMergeGranaryWire decodes arbitrary bytes into each message type with
// the generated codec and with proto: both must fail, or both must give
// equal messages that encode the same (see checkDecode).
func FuzzMergeGranaryWire(f *testing.F) {
	for i, typ := range withCodec {
		g := newRandomMessages(uint64(100 + i))
		g.maxDepth = 3
		g.long = false
		for range 8 {
			data, err := proto.Marshal(g.message(typ))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(byte(i), data)
		}
	}
	f.Add(byte(3), nestedTrees(50, []byte{0x22, 0x02, 0x08, 0x01}))
	f.Fuzz(func(t *testing.T, which byte, data []byte) {
		typ := withCodec[int(which)%len(withCodec)]
		checkDecode(t, newOf(typ), data)
	})
}
