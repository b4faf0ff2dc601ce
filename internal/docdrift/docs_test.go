package docdrift

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// root is the module's root, from this package's directory.
const root = "../.."

// module is the module's path.
const module = "github.com/granary-go/granary"

// otherPackages are the packages outside the module that snippets may name,
// by the name they are named with.
var otherPackages = map[string]string{
	"connect": "connectrpc.com/connect",
	"context": "context",
	"errors":  "errors",
	"fmt":     "fmt",
	"grpc":    "google.golang.org/grpc",
	"http":    "net/http",
	"log":     "log",
	"os":      "os",
	"redis":   "github.com/redis/go-redis/v9",
	"slog":    "log/slog",
	"testing": "testing",
	"time":    "time",
	"tls":     "crypto/tls",
	"x509":    "crypto/x509",
}

// pkg is a package of the module, or one of otherPackages.
type pkg struct {
	name, path string
	internal   bool
}

// world is every package the tests know, with an importer reading the
// export data the go command wrote for each.
type world struct {
	byName map[string][]pkg // the module's packages and otherPackages
	fset   *token.FileSet
	imp    types.Importer
}

var loadWorld = sync.OnceValues(func() (*world, error) {
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Name}}\t{{.Export}}\t{{.Module}}", "./..."}
	for _, path := range otherPackages {
		args = append(args, path)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return nil, fmt.Errorf("go list -export: %w: %s", err, stderr)
	}
	w := &world{byName: make(map[string][]pkg), fset: token.NewFileSet()}
	exports := make(map[string]string)
	lines := bufio.NewScanner(strings.NewReader(string(out)))
	for lines.Scan() {
		f := strings.Split(lines.Text(), "\t")
		if len(f) != 4 {
			continue
		}
		path, name, export := f[0], f[1], f[2]
		exports[path] = export
		inModule := path == module || strings.HasPrefix(path, module+"/")
		if inModule && name != "main" {
			w.byName[name] = append(w.byName[name], pkg{name: name, path: path, internal: strings.Contains(path, "/internal/")})
		}
	}
	for name, path := range otherPackages {
		w.byName[name] = append(w.byName[name], pkg{name: name, path: path})
	}
	w.imp = importer.ForCompiler(w.fset, "gc", func(path string) (io.ReadCloser, error) {
		export, ok := exports[path]
		if !ok || export == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(export)
	})
	return w, nil
})

func theWorld(t *testing.T) *world {
	t.Helper()
	w, err := loadWorld()
	require.NoError(t, err)
	return w
}

// block is a fenced go block of a page.
type block struct {
	page   string // docs/name.md
	line   int    // of the block's first line of code
	info   string // what follows ```go on the fence
	marker string // the <!-- ... --> line before the fence, if any
	code   string
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.page, b.line) }

// pages returns the docs pages by their path from the module's root.
func pages(t *testing.T) map[string]string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, names)
	out := make(map[string]string)
	for _, name := range names {
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		out["docs/"+filepath.Base(name)] = string(src)
	}
	return out
}

// goBlocks returns the fenced go blocks of every page.
func goBlocks(t *testing.T) []block {
	t.Helper()
	var blocks []block
	for page, src := range pages(t) {
		lines := strings.Split(src, "\n")
		for i := 0; i < len(lines); i++ {
			info, ok := strings.CutPrefix(lines[i], "```go")
			if !ok || (info != "" && info[0] != ' ') {
				continue
			}
			b := block{page: page, line: i + 2, info: strings.TrimSpace(info)}
			if i > 0 && strings.HasPrefix(strings.TrimSpace(lines[i-1]), "<!--") {
				b.marker = strings.TrimSpace(lines[i-1])
			}
			end := i + 1
			for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
				end++
			}
			require.Less(t, end, len(lines), "%s: a go block is not closed", b)
			b.code = strings.Join(lines[i+1:end], "\n")
			blocks = append(blocks, b)
			i = end
		}
	}
	slices.SortFunc(blocks, func(a, b block) int { return strings.Compare(a.String(), b.String()) })
	return blocks
}

var (
	fragmentMarker    = regexp.MustCompile(`^<!-- fragment:(.*)-->$`)
	notCompiledMarker = regexp.MustCompile(`^<!-- not compiled: .+ -->$`)
	// qualified matches pkg.Name: a lower-case package name, an exported name.
	qualified = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)`)
)

// source returns the file to compile for b: b itself when it is a file,
// else b wrapped in a function of the fragment's parameters, importing the
// public packages it names.
func (w *world) source(t *testing.T, b block) (string, bool) {
	t.Helper()
	if strings.HasPrefix(strings.TrimSpace(b.code), "package ") {
		return fmt.Sprintf("//line %s:%d\n%s\n", b.page, b.line, b.code), true
	}
	m := fragmentMarker.FindStringSubmatch(b.marker)
	if m == nil {
		t.Errorf("%s: a go block that is not a file needs a <!-- fragment: params --> line before its fence (or <!-- not compiled: why -->)", b)
		return "", false
	}
	params := strings.TrimSpace(m[1])
	var imports []string
	seen := make(map[string]bool)
	for _, q := range qualified.FindAllStringSubmatch(params+"\n"+b.code, -1) {
		name := q[1]
		if seen[name] {
			continue
		}
		seen[name] = true
		for _, p := range w.byName[name] {
			if !p.internal {
				imports = append(imports, fmt.Sprintf("%s %q", name, p.path))
			}
		}
	}
	slices.Sort(imports)
	return fmt.Sprintf("package snippet\n\nimport (\n%s\n)\n\nfunc _(%s) error {\n//line %s:%d\n%s\n\treturn nil\n}\n",
		strings.Join(imports, "\n"), params, b.page, b.line, b.code), true
}

// TestDocsSnippetsCompile type-checks every go block of docs/*.md against
// the code: a snippet that names a function, type, field or method that no
// longer exists, or an internal package, fails here.
func TestDocsSnippetsCompile(t *testing.T) {
	w := theWorld(t)
	compiled := 0
	for _, b := range goBlocks(t) {
		switch {
		case b.info != "" && strings.HasPrefix(b.info, "title="):
			continue // a file of the getting-started module: package newcomer builds it
		case notCompiledMarker.MatchString(b.marker):
			continue
		}
		src, ok := w.source(t, b)
		if !ok {
			continue
		}
		file, err := parser.ParseFile(w.fset, "snippet.go", src, parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		var errs []string
		conf := types.Config{Importer: w.imp, Error: func(err error) {
			// Soft errors are names declared and not used, and imports not
			// used: a snippet shows a step, not a whole program.
			if te, ok := err.(types.Error); ok && te.Soft {
				return
			}
			errs = append(errs, err.Error())
		}}
		_, _ = conf.Check("snippet", w.fset, []*ast.File{file}, nil)
		for _, e := range errs {
			t.Errorf("%s", e)
		}
		compiled++
	}
	require.NotZero(t, compiled)
}

// TestDocsNameOnlyIdentifiersThatExist checks every pkg.Name the pages
// write, in prose and in code, where pkg is one of the module's packages:
// Name must be declared at the top level of that package.
func TestDocsNameOnlyIdentifiersThatExist(t *testing.T) {
	w := theWorld(t)
	checked := 0
	for page, src := range pages(t) {
		for i, line := range strings.Split(src, "\n") {
			for _, at := range qualified.FindAllStringSubmatchIndex(line, -1) {
				if at[0] > 0 && line[at[0]-1] == '.' {
					continue // part of a protobuf name: granary.examples.counter.Counter
				}
				name, ident := line[at[2]:at[3]], line[at[4]:at[5]]
				var found bool
				var candidates []pkg
				for _, p := range w.byName[name] {
					if !strings.HasPrefix(p.path, module) {
						continue
					}
					candidates = append(candidates, p)
					tp, err := w.imp.Import(p.path)
					require.NoError(t, err)
					if tp.Scope().Lookup(ident) != nil {
						found = true
					}
				}
				if len(candidates) == 0 {
					continue
				}
				checked++
				if !found {
					t.Errorf("%s:%d: %s.%s: %s declares no %s", page, i+1, name, ident, candidates[0].path, ident)
				}
			}
		}
	}
	require.NotZero(t, checked)
}
