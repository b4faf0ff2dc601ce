package grainc

import (
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// ImportPaths collects repeated -I flags into Options.ImportPaths; it is a
// flag.Value.
type ImportPaths []string

func (p *ImportPaths) String() string { return strings.Join(*p, ",") }

// Set implements flag.Value.
func (p *ImportPaths) Set(v string) error {
	*p = append(*p, v)
	return nil
}

// WriteChanged writes the generated files under dir in name order,
// leaving alone those that already hold their content, so that
// regenerating unchanged code leaves timestamps and build caches alone.
func WriteChanged(dir string, out map[string][]byte) error {
	for _, name := range slices.Sorted(maps.Keys(out)) {
		if err := writeIfChanged(filepath.Join(dir, name), out[name]); err != nil {
			return err
		}
	}
	return nil
}

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

// ModuleLayout names files, given relative to dir, as buf lays out the
// files of a module: by their path from the root of the Go module that
// holds dir (the nearest directory up from dir with a go.mod), found
// through an import path at that root. A file then registers with protobuf
// under that path, examples/counter/counter.proto say, not under its bare
// name, so two packages of a program may each hold a counter.proto. It
// returns false when no go.mod is above dir.
func ModuleLayout(dir string, files []string) (names []string, importPaths []string, ok bool, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, false, err
	}
	root, up := abs, 0
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			return nil, nil, false, nil
		}
		root, up = parent, up+1
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return nil, nil, false, err
	}
	names = make([]string, len(files))
	for i, f := range files {
		clean, err := cleanProtoPath(f)
		if err != nil {
			return nil, nil, false, err
		}
		names[i] = path.Join(filepath.ToSlash(rel), clean)
	}
	// The root is named relative to dir so that outputs placed beside their
	// sources are named relative to dir too.
	rootPath := filepath.Join(dir, strings.Repeat(".."+string(filepath.Separator), up))
	return names, []string{rootPath}, true, nil
}
