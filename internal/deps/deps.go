//go:build tools

package deps

import (
	_ "github.com/asynkron/protoactor-go/actor"
	_ "github.com/bufbuild/protocompile"
	_ "github.com/hashicorp/memberlist"
	_ "github.com/stretchr/testify/require"
	_ "go.uber.org/goleak"
	_ "golang.org/x/time/rate"
	_ "google.golang.org/protobuf/compiler/protogen"
)
