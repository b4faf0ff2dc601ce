package wire_test

import (
	"fmt"
	"time"

	"github.com/granary-go/granary/internal/wire"
)

func ExampleEnvelope() {
	req := wire.Envelope{
		Kind:      wire.KindRequest,
		CallID:    1,
		GrainType: "ratelimit.TokenBucket",
		GrainKey:  "tenant-42",
		MethodID:  2,
		Payload:   []byte("acquire"),
		Timeout:   time.Second,
	}
	frame := req.AppendTo(nil) // appends to any buffer, such as a transport batch

	// Decoding reuses one Envelope; known grain types need no allocation.
	types := wire.NewInterner("ratelimit.TokenBucket")
	var got wire.Envelope
	if err := got.UnmarshalInterned(frame, types); err != nil {
		panic(err)
	}
	fmt.Println(got.Kind, got.GrainType, got.GrainKey, string(got.Payload), got.Timeout)
	// Output: REQUEST ratelimit.TokenBucket tenant-42 acquire 1s
}
