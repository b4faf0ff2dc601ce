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
	withMetadata := sampleRequest()
	withMetadata.Metadata = []string{"tenant", "acme", "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	withMetadata.Caller = &Identity{Kind: 1, Name: "billing", Rights: 1, Credential: 1}
	f.Add(withMetadata.AppendTo(nil))
	f.Add([]byte{0x92, 0x01, 0x03, 0x0a, 0x01, 0xff})                         // a metadata key that is not UTF-8
	f.Add([]byte{0x92, 0x01, 0x02, 0x18, 0x01, 0x92, 0x01, 0x00})             // an entry with an unknown field, and an empty one
	f.Add([]byte{0x9a, 0x01, 0x02, 0x08, 0x01, 0x9a, 0x01, 0x02, 0x18, 0x01}) // a caller in two parts, merged
	f.Add([]byte{0x9a, 0x01, 0x02, 0x08})                                     // a caller cut short
	over := Envelope{Kind: KindRequest, CallID: 9}
	for range MaxMetadataEntries + 1 {
		over.Metadata = append(over.Metadata, "k", "v")
	}
	f.Add(over.AppendTo(nil))

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
		if errors.Is(err, ErrMetadataTooLarge) {
			// The one place we refuse what protobuf-go accepts, on purpose:
			// the metadata is over its limits.
			require.NoError(t, refErr)
			md := fromDynamic(m).Metadata
			require.Error(t, CheckMetadata(md), "refused metadata within the limits: %d strings", len(md))
			require.True(t, salvaged, "a request over the metadata limits is refused alone")
			return
		}
		if err != nil {
			require.True(t, errors.Is(err, ErrMalformed), "%v", err)
			require.Error(t, refErr, "protobuf-go accepts what we reject: %v", err)
			return
		}
		require.NoError(t, refErr, "we accept what protobuf-go rejects")
		require.NoError(t, CheckMetadata(e.Metadata), "accepted metadata over the limits")
		require.Equal(t, fromDynamic(m), normalized(e))

		first := e.AppendTo(nil)
		var again Envelope
		require.NoError(t, again.Unmarshal(first))
		require.Equal(t, normalized(e), normalized(again))
		require.Equal(t, first, again.AppendTo(nil))
	})
}
