// Package lint holds tests that enforce the architecture: the engine
// packages stay pure (no IO, no clock, no goroutines, no randomness), and
// the matcher's test knobs are set by tests only.
package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var forbiddenImports = []string{
	"net", "os", "os/exec", "math/rand", "math/rand/v2", "syscall", "unsafe",
	"github.com/hashicorp/raft", "github.com/nats-io", "connectrpc.com",
}

// allowedImports are the exceptions, by file: the metadata FSM adapter
// names raft's FSM types (raft.Log, raft.FSMSnapshot, raft.SnapshotSink),
// nothing of its transport or stores.
var allowedImports = map[string][]string{
	"../../cluster/meta/fsm.go": {"github.com/hashicorp/raft"},
}

// The engine packages may not do IO, read the clock, use randomness or start
// goroutines: whatever a Raft FSM applies must depend only on the log.
// The time package is allowed for durations and timestamp values, not for
// reading the clock.
func TestEnginePackagesArePure(t *testing.T) {
	for _, dir := range []string{"../../nfa", "../../nfa/expr", "../../nfa/sql", "../../nfa/sqleval", "../../watermark", "../../keygroup", "../../cluster/meta", "../../cluster/plan"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		if len(files) == 0 {
			t.Fatalf("no Go files in %s", dir)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			checkFile(t, f)
		}
	}
}

func checkFile(t *testing.T, path string) {
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		for _, bad := range forbiddenImports {
			if (p == bad || strings.HasPrefix(p, bad+"/")) && !slices.Contains(allowedImports[filepath.ToSlash(path)], p) {
				t.Errorf("%s imports %s", fset.Position(imp.Pos()), p)
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.GoStmt:
			t.Errorf("%s: go statement", fset.Position(x.Pos()))
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && id.Name == "time" && (x.Sel.Name == "Now" || x.Sel.Name == "Since" || x.Sel.Name == "Until" || x.Sel.Name == "Sleep" || x.Sel.Name == "After" || x.Sel.Name == "NewTimer" || x.Sel.Name == "NewTicker") {
				t.Errorf("%s: time.%s reads the clock", fset.Position(x.Pos()), x.Sel.Name)
			}
		}
		return true
	})
}

// nonTestFiles calls fn with every Go file of the module that is not a
// test, parsed with its comments dropped, and the file's directory.
func nonTestFiles(t *testing.T, fn func(path, dir string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		fn(path, filepath.ToSlash(filepath.Dir(path)), fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Test helpers stay out of what ships: only tests import internal/testutil.
func TestTestutilOnlyInTests(t *testing.T) {
	nonTestFiles(t, func(path, dir string, _ *token.FileSet, f *ast.File) {
		if dir == "../../internal/testutil" {
			return
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/cepcluster/cep/internal/testutil" {
				t.Errorf("%s imports %s", path, p)
			}
		}
	})
}

// The Matcher's test knobs (nfa's testKnobs: fast paths switched off to
// check them against the reference) are set only by tests: an engine file
// that set one would run the reference in production, slower and with no
// test failing. The engine may bump the counts (x.test.n++) and
// NewMatcher gives passFrom its default.
func TestNFATestKnobsAreSetOnlyByTests(t *testing.T) {
	files, _ := filepath.Glob("../../nfa/*.go")
	if len(files) == 0 {
		t.Fatal("no Go files in ../../nfa")
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.AssignStmt:
				for _, l := range x.Lhs {
					if sel, ok := l.(*ast.SelectorExpr); ok {
						if in, ok := sel.X.(*ast.SelectorExpr); ok && in.Sel.Name == "test" {
							t.Errorf("%s: sets the test knob %s", fset.Position(l.Pos()), sel.Sel.Name)
						}
					}
				}
			case *ast.CompositeLit:
				if id, ok := x.Type.(*ast.Ident); ok && id.Name == "testKnobs" {
					for _, e := range x.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); !ok || kv.Key.(*ast.Ident).Name != "passFrom" {
							t.Errorf("%s: sets a test knob", fset.Position(e.Pos()))
						}
					}
				}
			}
			return true
		})
	}
}

// A node's and a shard's test knobs (cluster.Testing, shard.Testing:
// faults and shortened timings) are set by tests only: no command or
// package outside the two names them (cluster hands its own knobs on to
// its shards).
func TestConfigKnobsOnlyInTests(t *testing.T) {
	nonTestFiles(t, func(_, dir string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Testing" {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			if id.Name == "cluster" || id.Name == "shard" && dir != "../../cluster" {
				t.Errorf("%s: %s.Testing outside tests", fset.Position(sel.Pos()), id.Name)
			}
			return true
		})
	})
}
