package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/granary-go/granary/internal/grainc"
)

// connectPlugin is how protoc-gen-connect-go is run: by the go command, at
// the version of connectrpc.com/connect that go.mod requires.
var connectPlugin = []string{"go", "run", "connectrpc.com/connect/cmd/protoc-gen-connect-go"}

type options struct {
	files       []string // proto files, as imports name them
	importPaths []string // dir, or prefix=dir
	module      string   // Go import path prefix stripped from output names
}

// generate compiles opts.files and returns the generated files by path.
func generate(opts options) (map[string][]byte, error) {
	req, err := compile(opts)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte)

	// protoc-gen-go, as a plugin.
	resp, err := grainc.RunPlugin(grainc.ProtocGenGo(), req)
	if err != nil {
		return nil, err
	}
	if err := collect(out, resp); err != nil {
		return nil, err
	}

	// protoc-gen-connect-go, as a plugin.
	resp, err = grainc.RunPlugin(connectPlugin, req)
	if err != nil {
		return nil, err
	}
	for _, f := range resp.File {
		// Like protoc-gen-go-grpc's _grpc.pb.go and granary's _grain.pb.go,
		// the service code ends in .pb.go, which is how the repository's
		// tools tell generated code from code people write.
		if name, ok := strings.CutSuffix(f.GetName(), ".connect.go"); ok {
			f.Name = proto.String(name + "_connect.pb.go")
		}
	}
	if err := collect(out, resp); err != nil {
		return nil, err
	}
	return out, nil
}

func collect(out map[string][]byte, resp *pluginpb.CodeGeneratorResponse) error {
	for _, f := range resp.File {
		name := filepath.FromSlash(f.GetName())
		if _, dup := out[name]; dup {
			return fmt.Errorf("two generated files share the path %s", name)
		}
		out[name] = []byte(f.GetContent())
	}
	return nil
}

// compile compiles the proto files into the request a protoc plugin gets,
// finding them as granarygen does.
func compile(opts options) (*pluginpb.CodeGeneratorRequest, error) {
	param := "paths=import"
	if opts.module != "" {
		param += ",module=" + opts.module
	}
	return grainc.Compile(grainc.Options{Files: opts.files, ImportPaths: opts.importPaths, Parameter: param})
}
