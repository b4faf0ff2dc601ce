package silo_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

// An incoming filter sees who makes each call and the metadata it
// carries, as the grain's method does (actor.IdentityOf, actor.MetadataOf
// on its context), and may refuse the call. Here the caller is the silo's
// own code; through a gateway it would be the client its handshake proved.
func ExampleWithIncomingFilters_identity() {
	whoCalls := func(ctx context.Context, call *proxy.IncomingCall, next proxy.IncomingInvoker) (proto.Message, error) {
		id, _ := actor.IdentityOf(ctx)
		fmt.Printf("%s by %v %q, tenant %q\n", call.Method.Name, id.Kind, id.Name, actor.MetadataOf(ctx).Get("tenant"))
		if id.Kind == actor.CallerClient && !id.Rights.Has(actor.RightAdmin) && call.Method.Name == "Fail" {
			return nil, fmt.Errorf("%w: %s needs the admin right", proxy.ErrPermissionDenied, call.Method.FullName())
		}
		return next(ctx, call)
	}
	s, err := silo.New(silo.Options{Name: "example", DisableGateway: true},
		silo.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), silo.WithIncomingFilters(whoCalls))
	if err != nil {
		panic(err)
	}
	if err := testgrain.RegisterCounterGrain(s, testgrain.New(nil)); err != nil {
		panic(err)
	}
	if err := s.Start(context.Background()); err != nil {
		panic(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Stop(ctx)
	}()

	ctx := actor.WithMetadata(context.Background(), "tenant", "acme")
	if _, err := testgrain.NewCounterRef(s.Caller(), "visits").Add(ctx, &testgrain.AddRequest{Delta: 1}); err != nil {
		panic(err)
	}
	// Output: Add by silo "example", tenant "acme"
}
