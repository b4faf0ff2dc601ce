package grainc

import (
	"os"
	"testing"
)

// The tests generate code many times; protoc-gen-go is built once for all.
func TestMain(m *testing.M) { os.Exit(WithProtocGenGo(m.Run)) }
