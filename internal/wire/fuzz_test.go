package wire

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

// FuzzEnvelopeUnmarshal checks that Unmarshal never panics, that anything it
// accepts re-encodes to a stable form, and that it accepts exactly what
// protobuf-go accepts for wire.proto, with the same values.
func FuzzEnvelopeUnmarshal(f *testing.F) {
	req := sampleRequest()
	f.Add(req.AppendTo(nil))
	reply := Envelope{Kind: KindReply, CallID: 1, Status: StatusAppError, Error: "boom", Payload: []byte("x")}
	f.Add(reply.AppendTo(nil))
	f.Add((&Envelope{Kind: KindReply, CallID: 3, MovedTo: "silo-2"}).AppendTo(nil))
	f.Add([]byte{})
	f.Add([]byte{0x08, 0x03, 0x10, 0x05})                   // cancel
	f.Add([]byte{0x0b, 0x08, 0x01, 0x0c, 0x10, 0x01})       // group, then a field
	f.Add([]byte{0x22, 0x01, 0xff})                         // invalid UTF-8
	f.Add([]byte{0x08, 0x01, 0x10, 0x07, 0x22, 0x01, 0xff}) // a request whose key is not UTF-8
	f.Add([]byte{0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // truncated varint
	f.Add([]byte{0xf8, 0xff, 0xff, 0xff, 0x0f, 0x01})       // large field number

	md := envelopeDescriptor(f)
	// One decoder for every input, as on a connection: what it remembers
	// from earlier frames must never change how a later one decodes.
	dec := NewDecoder(NewInterner(sampleRequest().GrainType, "silo-1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var e Envelope
		err := e.Unmarshal(b)
		var viaDecoder Envelope
		decErr := dec.Decode(b, &viaDecoder)
		require.Equal(t, err == nil, decErr == nil, "Unmarshal: %v, Decoder: %v", err, decErr)
		if err == nil {
			require.Equal(t, normalized(e), normalized(viaDecoder))
			_ = dec.Decode(b, &viaDecoder) // a second time, with its strings remembered
			require.Equal(t, normalized(e), normalized(viaDecoder))
		}
		kind, id, salvaged := Salvage(b)
		if err == nil {
			require.True(t, salvaged, "what decodes can be salvaged")
			require.Equal(t, e.Kind, kind)
			require.Equal(t, e.CallID, id)
		}
		m := dynamicpb.NewMessage(md)
		refErr := proto.Unmarshal(b, m)
		if err != nil {
			require.True(t, errors.Is(err, ErrMalformed), "%v", err)
			require.Error(t, refErr, "protobuf-go accepts what we reject: %v", err)
			return
		}
		require.NoError(t, refErr, "we accept what protobuf-go rejects")
		require.Equal(t, fromDynamic(m), normalized(e))

		first := e.AppendTo(nil)
		var again Envelope
		require.NoError(t, again.Unmarshal(first))
		require.Equal(t, normalized(e), normalized(again))
		require.Equal(t, first, again.AppendTo(nil))
	})
}
