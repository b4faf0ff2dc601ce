// Command connectgen generates the Go code of a Connect service (gRPC and
// HTTP/JSON from one handler) with Go alone: it compiles the proto files
// in process (bufbuild/protocompile), writes the .pb.go with the protobuf
// module's own generator in process, and the .connect.go with
// protoc-gen-connect-go, the Connect project's generator, which is a main
// package and so cannot be linked in: it is run by `go run` at the
// version go.mod pins, fed the compiled request on its standard input as
// protoc would feed it. No protoc binary is involved. The service code is
// written as NAME_connect.pb.go (protoc-gen-connect-go names it
// NAME.connect.go), so that it is known as generated code by its name.
//
//	connectgen [-I dir | -I prefix=dir]... [-module prefix] [-out dir] file.proto...
//
// Outputs go to their import-path-based names (protoc's paths=import)
// with the -module prefix stripped, under -out (the current directory by
// default). It runs the plugin with the go command from the current
// directory, so run it inside the module whose go.mod pins connect.
// Files whose content is unchanged are not rewritten. The usual way to run
// it is a //go:generate directive beside the proto.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "connectgen:", err)
		os.Exit(1)
	}
}

// importPaths collects repeated -I flags.
type importPaths []string

func (p *importPaths) String() string { return strings.Join(*p, ",") }

func (p *importPaths) Set(v string) error {
	*p = append(*p, v)
	return nil
}

func run(args []string, stderr io.Writer) error {
	flags := flag.NewFlagSet("connectgen", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var imports importPaths
	flags.Var(&imports, "I", "search `dir` for imports, or serve import path prefix/ from dir with prefix=dir (repeatable; default .)")
	module := flags.String("module", "", "strip this Go import path `prefix` from output names")
	outDir := flags.String("out", ".", "write outputs under `dir`")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() == 0 {
		return errors.New("no proto files given")
	}
	out, err := generate(options{files: flags.Args(), importPaths: imports, module: *module})
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if err := writeIfChanged(filepath.Join(*outDir, name), out[name]); err != nil {
			return err
		}
	}
	return nil
}

// writeIfChanged writes content to name unless the file already holds it.
func writeIfChanged(name string, content []byte) error {
	old, err := os.ReadFile(name)
	if err == nil && bytes.Equal(old, content) {
		return nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	return os.WriteFile(name, content, 0o644)
}
