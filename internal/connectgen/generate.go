package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	gengo "google.golang.org/protobuf/cmd/protoc-gen-go/internal_gengo"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"
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

	// protoc-gen-go, in process.
	gen, err := protogen.Options{}.New(req)
	if err != nil {
		return nil, err
	}
	gen.SupportedFeatures = gengo.SupportedFeatures
	gen.SupportedEditionsMinimum = gengo.SupportedEditionsMinimum
	gen.SupportedEditionsMaximum = gengo.SupportedEditionsMaximum
	for _, f := range gen.Files {
		if f.Generate {
			gengo.GenerateFile(gen, f)
		}
	}
	if err := collect(out, gen.Response()); err != nil {
		return nil, err
	}

	// protoc-gen-connect-go, as a plugin.
	resp, err := runPlugin(connectPlugin, req)
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
	if resp.Error != nil {
		return fmt.Errorf("generator: %s", resp.GetError())
	}
	for _, f := range resp.File {
		name := filepath.FromSlash(f.GetName())
		if _, dup := out[name]; dup {
			return fmt.Errorf("two generated files share the path %s", name)
		}
		out[name] = []byte(f.GetContent())
	}
	return nil
}

// runPlugin runs a protoc plugin on req, as protoc would.
func runPlugin(command []string, req *pluginpb.CodeGeneratorRequest) (*pluginpb.CodeGeneratorResponse, error) {
	in, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(command, " "), err, stderr.String())
	}
	resp := new(pluginpb.CodeGeneratorResponse)
	if err := proto.Unmarshal(stdout.Bytes(), resp); err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(command, " "), err)
	}
	return resp, nil
}

// compile compiles the proto files into the request a protoc plugin gets.
func compile(opts options) (*pluginpb.CodeGeneratorRequest, error) {
	roots := opts.importPaths
	if len(roots) == 0 {
		roots = []string{"."}
	}
	compiler := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: func(name string) (io.ReadCloser, error) { return open(roots, name) },
		}),
		SourceInfoMode: protocompile.SourceInfoStandard, // comments carry over
	}
	compiled, err := compiler.Compile(context.Background(), opts.files...)
	if err != nil {
		return nil, err
	}
	param := "paths=import"
	if opts.module != "" {
		param += ",module=" + opts.module
	}
	return &pluginpb.CodeGeneratorRequest{
		FileToGenerate: opts.files,
		Parameter:      &param,
		// No CompilerVersion: the headers then name none that could differ
		// between machines.
		ProtoFile: dependenciesFirst(compiled),
	}, nil
}

// open finds an import on the roots: a root "prefix=dir" serves the
// imports under prefix/ from dir.
func open(roots []string, name string) (io.ReadCloser, error) {
	for _, root := range roots {
		rel := name
		prefix, dir, mapped := strings.Cut(root, "=")
		if !mapped {
			dir = root
		} else if rel, mapped = strings.CutPrefix(name, strings.Trim(prefix, "/")+"/"); !mapped {
			continue
		}
		f, err := os.Open(filepath.Join(dir, filepath.FromSlash(rel)))
		if err == nil {
			return f, nil
		}
	}
	return nil, fmt.Errorf("%s: %w", name, os.ErrNotExist)
}

// dependenciesFirst lists the compiled files and their imports, each after
// what it imports, as protoc lists them for a plugin.
func dependenciesFirst(files linker.Files) []*descriptorpb.FileDescriptorProto {
	var (
		out  []*descriptorpb.FileDescriptorProto
		seen = make(map[string]bool)
		add  func(fd protoreflect.FileDescriptor)
	)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		for i := 0; i < fd.Imports().Len(); i++ {
			add(fd.Imports().Get(i).FileDescriptor)
		}
		out = append(out, protodesc.ToFileDescriptorProto(fd))
	}
	for _, f := range files {
		add(f)
	}
	return out
}
