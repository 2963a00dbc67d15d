package lint

import (
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite README.md's dependency picture from the imports")

const (
	module     = "github.com/cepcluster/cep"
	depsBegin  = "<!-- imports: begin (go test ./internal/lint -run TestReadmeDependencies -update) -->"
	depsEnd    = "<!-- imports: end -->"
	readmePath = "../../README.md"
)

// projectImports returns, for every package of the module outside tests,
// generated code and internal/testutil, the module's packages its non-test
// files import, both by path relative to the module.
func projectImports(t *testing.T) map[string][]string {
	out := map[string][]string{}
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("../..", path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin" || rel == "api/gen" || strings.HasPrefix(rel, "test/")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		if _, ok := out[pkg]; !ok {
			out[pkg] = nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, module+"/") {
				continue
			}
			p = strings.TrimPrefix(p, module+"/")
			if strings.HasPrefix(p, "api/gen") {
				p = "api/gen"
			}
			if !slices.Contains(out[pkg], p) {
				out[pkg] = append(out[pkg], p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out["api/gen"] = nil // generated from api/proto: drawn as one package
	return out
}

// depsPicture draws the imports as one line a package, the packages that
// depend on nothing of the project first, each line after those it imports.
func depsPicture(imports map[string][]string) string {
	var b strings.Builder
	b.WriteString("```text\n")
	pkgs := make([]string, 0, len(imports))
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	depth := map[string]int{}
	var level func(p string, seen map[string]bool) int
	level = func(p string, seen map[string]bool) int {
		if d, ok := depth[p]; ok {
			return d
		}
		if seen[p] {
			return 0 // a cycle cannot compile; drawn flat
		}
		seen[p] = true
		d := 0
		for _, q := range imports[p] {
			d = max(d, level(q, seen)+1)
		}
		depth[p] = d
		return d
	}
	for _, p := range pkgs {
		level(p, map[string]bool{})
	}
	slices.SortStableFunc(pkgs, func(a, b string) int { return depth[a] - depth[b] })
	width := 0
	for _, p := range pkgs {
		width = max(width, len(p))
	}
	for _, p := range pkgs {
		deps := slices.Sorted(slices.Values(imports[p]))
		if len(deps) == 0 {
			fmt.Fprintf(&b, "%s\n", p)
			continue
		}
		fmt.Fprintf(&b, "%-*s  → %s\n", width, p, strings.Join(deps, ", "))
	}
	b.WriteString("```\n")
	return b.String()
}

// The README's picture of the packages is the imports as they are: a
// package moved or an import added changes it, and this test says how.
func TestReadmeDependencies(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	i, j := strings.Index(s, depsBegin), strings.Index(s, depsEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md has no %q … %q block", depsBegin, depsEnd)
	}
	want := depsPicture(projectImports(t))
	got := s[i+len(depsBegin)+1 : j]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(readmePath, []byte(s[:i+len(depsBegin)+1]+want+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's package picture differs from the imports; run go test ./internal/lint -run TestReadmeDependencies -update, or fix the imports. Want:\n%s", want)
}
