package main

import (
	"os"
	"testing"

	"github.com/granary-go/granary/internal/grainc"
)

// The tests run in directories of their own, outside any module, where the
// go command cannot build protoc-gen-go; it is built once beforehand.
func TestMain(m *testing.M) { os.Exit(grainc.WithProtocGenGo(m.Run)) }
