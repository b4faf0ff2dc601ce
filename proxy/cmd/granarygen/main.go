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

	"github.com/granary-go/granary/internal/grainc"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "granarygen:", err)
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
	flags := flag.NewFlagSet("granarygen", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var imports importPaths
	flags.Var(&imports, "I", "search `dir` for imports, or serve import path prefix/ from dir with prefix=dir (repeatable; default .)")
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

	params := []string{"paths=" + *paths}
	if *module != "" {
		params = append(params, "module="+*module)
	}
	out, err := grainc.Generate(grainc.Options{
		Files:       flags.Args(),
		ImportPaths: imports,
		Parameter:   strings.Join(params, ","),
	})
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if err := writeIfChanged(name, out[name]); err != nil {
			return err
		}
	}
	return nil
}

// writeIfChanged writes content to name unless the file already holds it,
// so that regenerating unchanged code leaves timestamps and caches alone.
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
