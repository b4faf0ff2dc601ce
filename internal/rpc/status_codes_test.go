package rpc

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/proxy"
)

// proxy.Code is the one list of call outcomes; a reply carries one as a
// wire.Status, numbered the same, and wire.proto documents the numbers for
// other implementations. This test fails when any of the three drifts: a
// code without a status or enum value, one renumbered, or a name that
// wire.Status prints differently from wire.proto.
func TestStatusCodesMatchProxyCodesAndWireProto(t *testing.T) {
	src, err := os.ReadFile("../wire/wire.proto")
	require.NoError(t, err)
	compiler := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"wire.proto": string(src)}),
	}}
	files, err := compiler.Compile(context.Background(), "wire.proto")
	require.NoError(t, err)
	enum := files[0].Enums().ByName("Status")
	require.NotNil(t, enum, "wire.proto declares enum Status")

	inProto := make(map[int]string)
	for i := 0; i < enum.Values().Len(); i++ {
		v := enum.Values().Get(i)
		inProto[int(v.Number())] = string(v.Name())
	}
	known := func(c proxy.Code) bool { return c.String() != "code "+strconv.Itoa(int(c)) }
	for n := 0; n <= 255; n++ {
		name, ok := inProto[n]
		assert.Equal(t, ok, known(proxy.Code(n)), "code %d: in wire.proto %v, known to proxy %v", n, ok, known(proxy.Code(n)))
		if ok {
			assert.Equal(t, name, wire.Status(n).String(), "status %d", n)
		} else {
			assert.Equal(t, "Status("+strconv.Itoa(n)+")", wire.Status(n).String(), "status %d has a name but no enum value", n)
		}
	}

	// Each code and the status of the same meaning share a number.
	for code, status := range map[proxy.Code]wire.Status{
		proxy.CodeOK:               wire.StatusOK,
		proxy.CodeApplication:      wire.StatusAppError,
		proxy.CodeUnknownGrainType: wire.StatusUnknownGrainType,
		proxy.CodeUnknownMethod:    wire.StatusUnknownMethod,
		proxy.CodeBadRequest:       wire.StatusBadRequest,
		proxy.CodePanic:            wire.StatusPanic,
		proxy.CodeCancelled:        wire.StatusCancelled,
		proxy.CodeTimeout:          wire.StatusTimeout,
		proxy.CodeUnavailable:      wire.StatusUnavailable,
		proxy.CodeOverloaded:       wire.StatusOverloaded,
		proxy.CodeForwardLimit:     wire.StatusForwardLimit,
		proxy.CodeActivation:       wire.StatusActivation,
		proxy.CodePermissionDenied: wire.StatusPermissionDenied,
	} {
		assert.Equal(t, int(status), int(code), "%v is %v on the wire", code, status)
	}
}
