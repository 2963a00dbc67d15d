// Package lint holds tests that enforce the architecture: the engine
// packages stay pure (no IO, no clock, no goroutines, no randomness).
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
	for _, dir := range []string{"../../nfa", "../../nfa/expr", "../../watermark", "../../cluster/meta"} {
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
