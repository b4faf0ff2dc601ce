package grainc

import (
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"os"
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
