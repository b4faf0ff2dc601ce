// Command connectgen generates the Go code of a Connect service (gRPC and
// HTTP/JSON from one handler) with Go alone: it compiles the proto files
// in process (bufbuild/protocompile), writes the .pb.go with protoc-gen-go
// and the .connect.go with protoc-gen-connect-go, the Connect project's
// generator. Both are main packages (protoc-gen-go's generator is internal
// to the protobuf module), so they cannot be linked in: each is run by
// `go run` at the version go.mod pins, fed the compiled request on its
// standard input as protoc would feed it. No protoc binary is involved. The service code is
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
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/granary-go/granary/internal/grainc"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "connectgen:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	flags := flag.NewFlagSet("connectgen", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var imports grainc.ImportPaths
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
	return grainc.WriteChanged(*outDir, out)
}
