package proxy

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// BenchmarkDispatch is the server side of a call without filters: find the
// method, decode the request, run the grain.
func BenchmarkDispatch(b *testing.B) {
	d := &Dispatcher{Service: testService()}
	payload, err := proto.Marshal(wrapperspb.Int64(21))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Dispatch(ctx, echoGrain{}, unbounded.ID, payload); err != nil {
			b.Fatal(err)
		}
	}
}
