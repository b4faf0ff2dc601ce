package grainc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/granary-go/granary/proxy/granarypb"
)

// Errors reported by Generate, wrapped with the file or method at fault.
var (
	// ErrCompile reports a proto file that does not compile, including one
	// whose imports cannot be found.
	ErrCompile = errors.New("grainc: compile error")
	// ErrUnsupported reports a contract feature grains do not support, such
	// as a streaming method.
	ErrUnsupported = errors.New("grainc: unsupported")
	// ErrMethodIDCollision reports two methods of one service whose ids
	// collide; renaming either method resolves it.
	ErrMethodIDCollision = errors.New("grainc: method id collision")
	// ErrNameCollision reports two elements of the contracts whose
	// generated Go identifiers would be the same in one Go package, such
	// as methods get and Get of one service, or a message SRef beside a
	// service S; renaming either resolves it.
	ErrNameCollision = errors.New("grainc: name collision")
	// ErrOptions reports unusable Options.
	ErrOptions = errors.New("grainc: invalid options")
)

// Options says what to generate and where the sources are.
type Options struct {
	// Files are the proto files to generate code for, named as imports
	// name them: slash-separated and relative to an import path.
	Files []string

	// ImportPaths are searched in order for proto files, like protoc's -I.
	// An entry is a directory, or PREFIX=DIR to serve the files whose
	// import path starts with PREFIX/ from DIR; the latter lets a file be
	// compiled under a path that differs from where it lives, as
	// granary/options.proto does. Empty means the current directory.
	ImportPaths []string

	// Parameter is the plugin parameter as protoc-gen-go takes it, for
	// example "paths=source_relative".
	Parameter string

	// Open opens a file found on an import path. Nil means os.Open; tests
	// supply sources from memory.
	Open func(name string) (io.ReadCloser, error)
}

// Generate compiles opts.Files and returns the generated files keyed by the
// path each should be written to. With paths=source_relative a file is
// placed next to the proto it came from, found through the import path
// that supplied it; otherwise it is placed at its generated name, relative
// to the current directory, as protoc --go_out=. would place it.
func Generate(opts Options) (map[string][]byte, error) {
	req, src, err := compile(opts)
	if err != nil {
		return nil, err
	}
	gen, err := newPlugin(req)
	if err != nil {
		return nil, err
	}
	pb, pbResp, err := generatePB(gen, req)
	if err != nil {
		return nil, err
	}

	codecs := wireCodecs(gen)
	for _, f := range gen.Files {
		if f.Generate {
			generateWireFile(gen, f, codecs)
		}
	}
	// The grain code is checked against the .pb.go files' declarations, so
	// it comes last.
	grains, err := checkGrains(gen, boundedExtension(gen), pb)
	if err != nil {
		return nil, err
	}
	for _, f := range gen.Files {
		if f.Generate && len(f.Services) > 0 {
			generateGrainFile(gen, f, grains[f])
		}
	}
	resp := gen.Response()
	if resp.Error != nil {
		return nil, fmt.Errorf("grainc: %s", resp.GetError())
	}
	resp.File = append(pbResp.File, resp.File...)

	sourceRelative := strings.Contains(","+opts.Parameter+",", ",paths=source_relative,")
	out := make(map[string][]byte, len(resp.File))
	for _, rf := range resp.File {
		name := filepath.FromSlash(rf.GetName())
		if sourceRelative {
			if name, err = besideSource(gen, src, rf.GetName()); err != nil {
				return nil, err
			}
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%w: two generated files share the path %s", ErrOptions, name)
		}
		out[name] = []byte(rf.GetContent())
	}
	return out, nil
}

// Compile compiles opts.Files into the request a protoc plugin receives
// (opts.Parameter is its parameter), for generators other than Generate's
// to run on: the proto sources are found as Generate finds them.
func Compile(opts Options) (*pluginpb.CodeGeneratorRequest, error) {
	req, _, err := compile(opts)
	return req, err
}

// compile is Compile, also returning the resolver that found the sources.
func compile(opts Options) (*pluginpb.CodeGeneratorRequest, *sourceResolver, error) {
	if len(opts.Files) == 0 {
		return nil, nil, fmt.Errorf("%w: no proto files given", ErrOptions)
	}
	roots, err := parseImportPaths(opts.ImportPaths)
	if err != nil {
		return nil, nil, err
	}
	files := make([]string, len(opts.Files))
	for i, name := range opts.Files {
		if files[i], err = cleanProtoPath(name); err != nil {
			return nil, nil, err
		}
	}

	src := &sourceResolver{roots: roots, open: opts.Open, found: make(map[string]string)}
	compiler := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(src),
		// Comments of services and methods carry over to generated code.
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := compiler.Compile(context.Background(), files...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCompile, err)
	}
	return &pluginpb.CodeGeneratorRequest{
		FileToGenerate: files,
		Parameter:      &opts.Parameter,
		// CompilerVersion stays unset on purpose: the header then names no
		// compiler version that could differ between machines.
		ProtoFile: topologicalProtos(compiled),
	}, src, nil
}

// newPlugin returns the plugin that generates granary's own files for req.
func newPlugin(req *pluginpb.CodeGeneratorRequest) (*protogen.Plugin, error) {
	gen, err := protogen.Options{}.New(req)
	if err != nil {
		// Typically a file without a go_package option.
		return nil, fmt.Errorf("grainc: %w", err)
	}
	return gen, nil
}

// generatePB runs protoc-gen-go on the files being generated and on the
// other files of their Go packages, whose declarations the grain code
// must not clash with either. It returns each file's .pb.go by file, and
// protoc-gen-go's response holding the .pb.go of the files being generated.
func generatePB(gen *protogen.Plugin, req *pluginpb.CodeGeneratorRequest) (map[*protogen.File][]byte, *pluginpb.CodeGeneratorResponse, error) {
	packages := make(map[protogen.GoImportPath]bool)
	for _, f := range gen.Files {
		if f.Generate {
			packages[f.GoImportPath] = true
		}
	}
	pbReq := proto.Clone(req).(*pluginpb.CodeGeneratorRequest)
	pbReq.FileToGenerate = nil
	for _, f := range gen.Files {
		if packages[f.GoImportPath] {
			pbReq.FileToGenerate = append(pbReq.FileToGenerate, f.Desc.Path())
		}
	}
	resp, err := RunPlugin(ProtocGenGo(), pbReq)
	if err != nil {
		return nil, nil, err
	}
	pb := make(map[*protogen.File][]byte)
	kept := resp.File[:0]
	for _, rf := range resp.File {
		// Besides x.pb.go, the hybrid API adds x_protoopaque.pb.go, which
		// declares the same names under another build tag.
		f := generatedFrom(gen, rf.GetName(), func(f *protogen.File) bool { return packages[f.GoImportPath] })
		if f == nil {
			return nil, nil, fmt.Errorf("grainc: protoc-gen-go wrote %s, which comes from no file asked for", rf.GetName())
		}
		if rf.GetName() == f.GeneratedFilenamePrefix+".pb.go" {
			pb[f] = []byte(rf.GetContent())
		}
		if f.Generate {
			kept = append(kept, rf)
		}
	}
	resp.File = kept
	return pb, resp, nil
}

// generatedFrom returns the file, of those asked for, whose generated files
// include name: the one with the longest prefix of name, or nil.
func generatedFrom(gen *protogen.Plugin, name string, asked func(*protogen.File) bool) *protogen.File {
	var from *protogen.File
	for _, f := range gen.Files {
		if asked(f) && strings.HasPrefix(name, f.GeneratedFilenamePrefix) && (from == nil || len(f.GeneratedFilenamePrefix) > len(from.GeneratedFilenamePrefix)) {
			from = f
		}
	}
	return from
}

// besideSource returns where a source-relative output belongs: in the
// directory of the proto file that produced it.
func besideSource(gen *protogen.Plugin, src *sourceResolver, name string) (string, error) {
	// Source-relative names keep the proto's directory.
	var proto string
	if f := generatedFrom(gen, name, func(f *protogen.File) bool { return f.Generate }); f != nil {
		proto = f.Desc.Path()
	}
	disk, ok := src.location(proto)
	if !ok {
		return "", fmt.Errorf("%w: %s is built in, not read from an import path; map its directory with -I %s=DIR to regenerate it",
			ErrOptions, proto, path.Dir(proto))
	}
	return filepath.Join(filepath.Dir(disk), path.Base(name)), nil
}

// topologicalProtos lists the compiled files and all their dependencies,
// each after everything it imports, as protoc lists them for a plugin.
func topologicalProtos(files linker.Files) []*descriptorpb.FileDescriptorProto {
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
		imports := fd.Imports()
		for i := 0; i < imports.Len(); i++ {
			add(imports.Get(i).FileDescriptor)
		}
		out = append(out, protodesc.ToFileDescriptorProto(fd))
	}
	for _, f := range files {
		add(f)
	}
	return out
}

// importRoot is one entry of Options.ImportPaths.
type importRoot struct {
	prefix string // import path prefix without the trailing slash; "" for all
	dir    string
}

func parseImportPaths(paths []string) ([]importRoot, error) {
	if len(paths) == 0 {
		return []importRoot{{dir: "."}}, nil
	}
	roots := make([]importRoot, 0, len(paths))
	for _, p := range paths {
		prefix, dir, mapped := strings.Cut(p, "=")
		if !mapped {
			prefix, dir = "", p
		}
		prefix = strings.Trim(prefix, "/")
		if dir == "" || (mapped && prefix == "") {
			return nil, fmt.Errorf("%w: import path %q: want DIR or PREFIX=DIR", ErrOptions, p)
		}
		roots = append(roots, importRoot{prefix: prefix, dir: dir})
	}
	return roots, nil
}

// cleanProtoPath checks that name is a relative, slash-separated import
// path, since that is what a generated file registers.
func cleanProtoPath(name string) (string, error) {
	clean := path.Clean(filepath.ToSlash(name))
	if path.IsAbs(clean) || filepath.IsAbs(name) || clean == ".." || strings.HasPrefix(clean, "../") || !strings.HasSuffix(clean, ".proto") {
		return "", fmt.Errorf("%w: %q: want a .proto path relative to an import path", ErrOptions, name)
	}
	return clean, nil
}

// sourceResolver finds proto sources on the import paths, then falls back
// to the built-in granary/options.proto. It records where each file was
// found so that outputs can be placed beside their sources.
type sourceResolver struct {
	roots []importRoot
	open  func(name string) (io.ReadCloser, error)

	mu    sync.Mutex // the compiler resolves files concurrently
	found map[string]string
}

func (r *sourceResolver) FindFileByPath(name string) (protocompile.SearchResult, error) {
	for _, root := range r.roots {
		rel := name
		if root.prefix != "" {
			var ok bool
			if rel, ok = strings.CutPrefix(name, root.prefix+"/"); !ok {
				continue
			}
		}
		disk := filepath.Join(root.dir, filepath.FromSlash(rel))
		f, err := r.openFile(disk)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return protocompile.SearchResult{}, err
		}
		r.mu.Lock()
		r.found[name] = disk
		r.mu.Unlock()
		return protocompile.SearchResult{Source: f}, nil
	}
	if name == granarypb.OptionsProtoPath {
		return protocompile.SearchResult{Source: strings.NewReader(granarypb.OptionsProto())}, nil
	}
	dirs := make([]string, len(r.roots))
	for i, root := range r.roots {
		dirs[i] = root.dir
		if root.prefix != "" {
			dirs[i] = root.prefix + "=" + root.dir
		}
	}
	return protocompile.SearchResult{}, fmt.Errorf("%q is on no import path (searched %s): %w", name, strings.Join(dirs, ", "), fs.ErrNotExist)
}

func (r *sourceResolver) openFile(name string) (io.ReadCloser, error) {
	if r.open != nil {
		return r.open(name)
	}
	return os.Open(name)
}

// location returns where on disk the proto file name was read from.
func (r *sourceResolver) location(name string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	disk, ok := r.found[name]
	return disk, ok
}
