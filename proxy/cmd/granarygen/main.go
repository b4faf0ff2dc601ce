package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/granary-go/granary/internal/grainc"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "granarygen:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	flags := flag.NewFlagSet("granarygen", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var imports grainc.ImportPaths
	flags.Var(&imports, "I", "search `dir` for imports, or serve import path prefix/ from dir with prefix=dir (repeatable; default: the module's root, files named from it)")
	paths := flags.String("paths", "import", "output placement: import or source_relative, as protoc-gen-go's paths parameter")
	module := flags.String("module", "", "with -paths=import, strip this module `prefix` from output names")
	flags.Usage = func() {
		fmt.Fprintln(stderr, "usage: granarygen [-I dir | -I prefix=dir]... [-paths=source_relative] file.proto...")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() == 0 {
		flags.Usage()
		return errors.New("no proto files given")
	}

	files := flags.Args()
	if len(imports) == 0 {
		names, roots, ok, err := grainc.ModuleLayout(".", files)
		if err != nil {
			return err
		}
		if ok {
			files, imports = names, roots
		}
	}

	params := []string{"paths=" + *paths}
	if *module != "" {
		params = append(params, "module="+*module)
	}
	out, err := grainc.Generate(grainc.Options{
		Files:       files,
		ImportPaths: imports,
		Parameter:   strings.Join(params, ","),
	})
	if err != nil {
		return err
	}
	return grainc.WriteChanged(".", out)
}
