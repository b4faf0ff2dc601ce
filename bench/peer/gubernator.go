package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/granary-go/granary/bench"
)

// GubernatorModule is where the gubernator peer's module lives, from the
// repository's root.
const GubernatorModule = "bench/gubernator"

// Gubernator is the closest peer: a peer-to-peer rate-limit cluster with
// an owner per key, two nodes in process. Its module (bench/gubernator)
// is kept apart so that gubernator's dependencies never reach the
// framework's; its binary runs the same harness on the gubernator system
// and writes its report to stdout, which Measure reads.
type Gubernator struct {
	binary string // a built binary, or ""
	module string // the module to build it from, or ""
	built  string // the directory of the binary Measure built, removed by Close
}

var _ bench.Source = (*Gubernator)(nil)

// NewGubernator returns the gubernator peer, which runs binary, or when
// binary is "" builds one from the module in directory module (see
// FindGubernatorModule). With neither, Measure reports it unavailable.
func NewGubernator(binary, module string) *Gubernator {
	return &Gubernator{binary: binary, module: module}
}

// Name returns "gubernator".
func (g *Gubernator) Name() string { return "gubernator" }

// Measure runs the gubernator binary on opts and returns its report. The
// first call builds the binary when NewGubernator was given none.
func (g *Gubernator) Measure(ctx context.Context, opts bench.Options, progress io.Writer) (*bench.Report, error) {
	if g.binary == "" {
		if err := g.build(ctx, progress); err != nil {
			return nil, err
		}
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, g.binary, append(opts.Args(), "--output=-", "--systems="+g.Name())...)
	cmd.Stdout, cmd.Stderr = &out, progress
	runErr := cmd.Run()
	var rep bench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return nil, fmt.Errorf("peer: the gubernator peer's report (exit: %v): %w", runErr, err)
	}
	if runErr != nil && len(rep.Failures) == 0 {
		return nil, fmt.Errorf("peer: the gubernator peer: %w", runErr)
	}
	return &rep, nil
}

// build builds the binary from the module into a directory of its own.
func (g *Gubernator) build(ctx context.Context, progress io.Writer) error {
	if g.module == "" {
		return fmt.Errorf("%w: no binary given (--gubernator) and no %s module found", bench.ErrUnavailable, GubernatorModule)
	}
	dir, err := os.MkdirTemp("", "granary-bench-gubernator-")
	if err != nil {
		return err
	}
	binary := filepath.Join(dir, "gubernator-bench")
	fmt.Fprintf(progress, "bench: building the gubernator peer in %s\n", g.module)
	build := exec.CommandContext(ctx, "go", "build", "-o", binary, ".")
	build.Dir, build.Stdout, build.Stderr = g.module, progress, progress
	if err := build.Run(); err != nil {
		return errors.Join(fmt.Errorf("peer: build the gubernator peer: %w", err), os.RemoveAll(dir))
	}
	g.binary, g.built = binary, dir
	return nil
}

// Close removes the binary Measure built, if it built one.
func (g *Gubernator) Close(context.Context) error {
	if g.built == "" {
		return nil
	}
	err := os.RemoveAll(g.built)
	g.binary, g.built = "", ""
	return err
}

// FindGubernatorModule returns the gubernator peer's module directory in
// the repository around dir (dir or one of its parents holds
// bench/gubernator/go.mod), or "".
func FindGubernatorModule(dir string) string {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for {
		candidate := filepath.Join(dir, filepath.FromSlash(GubernatorModule))
		if _, err := os.Stat(filepath.Join(candidate, "go.mod")); err == nil {
			return candidate
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
