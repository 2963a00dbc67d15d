package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/internal/testutil"
)

// fakeCatalog is a cluster's patterns behind the fake API: a spec names
// its pattern on a "name: X" line and is invalid when it says "broken";
// every call but Validate is recorded.
type fakeCatalog struct {
	running map[string]*cepv1.Pattern
	calls   []string
	// failDeploy names a pattern whose deploy fails.
	failDeploy string
}

var specNameRE = regexp.MustCompile(`(?m)^name: (\S+)`)

func newFakeCatalog(t *testing.T, running ...*cepv1.Pattern) (*fakeCatalog, string) {
	c := &fakeCatalog{running: map[string]*cepv1.Pattern{}}
	for _, p := range running {
		c.running[p.Name] = p
	}
	url := startAPI(t, api.Backends{Patterns: &fakePatterns{
		ValidateFunc: func(_ context.Context, r *cepv1.ValidatePatternRequest) (*cepv1.ValidatePatternResponse, error) {
			if strings.Contains(r.Spec, "broken") {
				return &cepv1.ValidatePatternResponse{Error: &cepv1.SpecError{Message: `stage "a": field "where": broken`}}, nil
			}
			name := r.Name
			if m := specNameRE.FindStringSubmatch(r.Spec); name == "" && m != nil {
				name = m[1]
			}
			return &cepv1.ValidatePatternResponse{Valid: true, Name: name}, nil
		},
		GetFunc: func(_ context.Context, r *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error) {
			c.calls = append(c.calls, "get "+r.Name)
			p := c.running[r.Name]
			if p == nil || p.State == cepv1.PatternState_PATTERN_STATE_DELETING {
				return nil, fmt.Errorf("pattern %q: %w", r.Name, api.ErrNotFound)
			}
			return &cepv1.GetPatternResponse{Pattern: p}, nil
		},
		ListFunc: func(context.Context, *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error) {
			c.calls = append(c.calls, "list")
			res := &cepv1.ListPatternsResponse{}
			for _, p := range c.running {
				res.Patterns = append(res.Patterns, p)
			}
			sort.Slice(res.Patterns, func(i, j int) bool { return res.Patterns[i].Name < res.Patterns[j].Name })
			return res, nil
		},
		DeployFunc: func(_ context.Context, r *cepv1.DeployPatternRequest) (*cepv1.DeployPatternResponse, error) {
			name := r.Name
			if name == "" {
				name = specNameRE.FindStringSubmatch(r.Spec)[1]
			}
			c.calls = append(c.calls, "deploy "+name)
			if name == c.failDeploy {
				return nil, fmt.Errorf("source \"nope\" does not exist: %w", api.ErrFailedPrecondition)
			}
			p := samplePattern(name, 1, cepv1.PatternState_PATTERN_STATE_ACTIVE)
			p.Spec = r.Spec
			c.running[name] = p
			return &cepv1.DeployPatternResponse{Pattern: p}, nil
		},
		UpdateFunc: func(_ context.Context, r *cepv1.UpdatePatternRequest) (*cepv1.UpdatePatternResponse, error) {
			name := r.Name
			if name == "" {
				name = specNameRE.FindStringSubmatch(r.Spec)[1]
			}
			c.calls = append(c.calls, "update "+name+" "+enumName(r.Policy, "UPDATE_POLICY_"))
			p := c.running[name]
			p.Spec, p.Version = r.Spec, p.Version+1
			if len(r.Records) > 0 {
				p.Records = r.Records
			}
			return &cepv1.UpdatePatternResponse{Pattern: p}, nil
		},
		DeleteFunc: func(_ context.Context, r *cepv1.DeletePatternRequest) (*cepv1.DeletePatternResponse, error) {
			c.calls = append(c.calls, "delete "+r.Name)
			p := c.running[r.Name]
			delete(c.running, r.Name)
			return &cepv1.DeletePatternResponse{Pattern: p}, nil
		},
	}})
	return c, url
}

// takeCalls returns the calls made since the last take.
func (c *fakeCatalog) takeCalls() []string {
	calls := c.calls
	c.calls = nil
	return calls
}

// runningPattern is a pattern running name with spec.
func runningPattern(name string, version uint64, spec string) *cepv1.Pattern {
	p := samplePattern(name, version, cepv1.PatternState_PATTERN_STATE_ACTIVE)
	p.Spec = spec
	return p
}

// specOf is a small pattern document named name.
func specOf(name string) string {
	return "name: " + name + "\nsource: logins\nstages:\n  - name: a\n    where: e.type == \"LOGIN\"\n"
}

// writeTree writes files (path relative to the returned directory →
// content).
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// wantCalls fails the test unless got are want.
func wantCalls(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s called\n  %q\nwant\n  %q", what, got, want)
	}
}

// wantOut fails the test unless out is the lines want.
func wantOut(t *testing.T, what, out string, want ...string) {
	t.Helper()
	if w := strings.Join(want, "\n") + "\n"; out != w {
		t.Errorf("%s printed\n%s\nwant\n%s", what, out, w)
	}
}

// A directory gives its pattern files, not the hidden ones nor others
// (a pattern's test file beside it among them), in lexical order; -R adds those of its subdirectories that are not
// hidden.
func TestPatternApplyDirectory(t *testing.T) {
	cat, url := newFakeCatalog(t)
	dir := writeTree(t, map[string]string{
		"b.yml":              specOf("b"),
		"a.yaml":             specOf("a"),
		"Q.SQL":              "SELECT * FROM logins MATCH_RECOGNIZE (PATTERN (A) DEFINE A AS true)",
		".hidden.yaml":       specOf("hidden"),
		"notes.txt":          "not a pattern",
		"a.test.yaml":        "pattern: a.yaml\ncases: []\n",
		"sub/c.json":         specOf("c"),
		"sub/deeper/d.yaml":  specOf("d"),
		".git/e.yaml":        specOf("e"),
		"sub/.cache/f.yaml":  specOf("f"),
		"sub/deeper/g.jsonl": "not a pattern",
	})
	wantOut(t, "apply -f DIR", cepctl(t, url, "pattern", "apply", "-f", dir).mustOK(t).stdout,
		"deployed pattern q version 1 (sources logins, output subject cep.out.q)",
		"deployed pattern a version 1 (sources logins, output subject cep.out.a)",
		"deployed pattern b version 1 (sources logins, output subject cep.out.b)")
	wantCalls(t, "apply -f DIR", cat.takeCalls(), "get q", "deploy q", "get a", "deploy a", "get b", "deploy b")

	wantOut(t, "apply -f DIR -R", cepctl(t, url, "pattern", "apply", "-f", dir, "-R").mustOK(t).stdout,
		"pattern q unchanged at version 1",
		"pattern a unchanged at version 1",
		"pattern b unchanged at version 1",
		"deployed pattern c version 1 (sources logins, output subject cep.out.c)",
		"deployed pattern d version 1 (sources logins, output subject cep.out.d)")
	wantCalls(t, "apply -f DIR -R", cat.takeCalls(), "get q", "get a", "get b", "get c", "deploy c", "get d", "deploy d")
}

// Every file is validated before anything changes: an invalid one, or
// two naming the same pattern, fail the apply with a line per problem and
// nothing is asked of the cluster but the validations.
func TestPatternApplyChecksEveryFileFirst(t *testing.T) {
	cat, url := newFakeCatalog(t)
	dir := writeTree(t, map[string]string{
		"a.yaml": specOf("a"),
		"b.yaml": specOf("b") + "# broken\n",
		"c.yaml": specOf("c"),
		"d.yaml": "broken",
	})
	r := cepctl(t, url, "pattern", "apply", "-f", dir).mustFail(t, "nothing was applied")
	wantOut(t, "apply of invalid files (stderr)", r.stderr,
		"cepctl: "+filepath.Join(dir, "b.yaml")+`: stage "a": field "where": broken`,
		"cepctl: "+filepath.Join(dir, "d.yaml")+`: stage "a": field "where": broken`,
		"cepctl: nothing was applied")
	if r.stdout != "" {
		t.Errorf("apply of invalid files printed %q", r.stdout)
	}
	wantCalls(t, "apply of invalid files", cat.takeCalls())

	dup := writeTree(t, map[string]string{"a.yaml": specOf("a"), "x.yaml": specOf("x"), "sub/again.yaml": specOf("x"), "sub/b.yaml": specOf("b")})
	r = cepctl(t, url, "pattern", "apply", "-f", dup, "-R").mustFail(t, "nothing was applied")
	wantOut(t, "apply of two files naming a pattern (stderr)", r.stderr,
		"cepctl: "+filepath.Join(dup, "x.yaml")+": pattern x is also in "+filepath.Join(dup, "sub", "again.yaml"),
		"cepctl: nothing was applied")
	wantCalls(t, "apply of two files naming a pattern", cat.takeCalls())

	// a file given twice is taken once
	cepctl(t, url, "pattern", "apply", "-f", dir+"/c.yaml", "-f", filepath.Join(dir, ".", "c.yaml")).mustOK(t)
	wantCalls(t, "apply of one file given twice", cat.takeCalls(), "get c", "deploy c")

	empty := writeTree(t, map[string]string{"sub/a.yaml": specOf("a"), "README.md": "patterns"})
	wantOut(t, "apply of an empty directory (stderr)", cepctl(t, url, "pattern", "apply", "-f", empty, "--prune").mustFail(t).stderr,
		"cepctl: "+empty+": no pattern files (.yaml, .yml, .json, .sql) (-R takes those of its subdirectories)",
		"cepctl: nothing was applied")
	wantOut(t, "apply of a missing file (stderr)", cepctl(t, url, "pattern", "apply", "-f", filepath.Join(dir, "nope")).mustFail(t).stderr,
		"cepctl: read pattern: open "+filepath.Join(dir, "nope")+": no such file or directory",
		"cepctl: nothing was applied")
	wantCalls(t, "apply of an empty directory", cat.takeCalls())

	// --name names one pattern
	cepctl(t, url, "pattern", "apply", "-f", dup, "--name", "y").mustFail(t, "--name names one pattern, and the paths give 2 files")
	cepctl(t, url, "pattern", "apply", "-f", filepath.Join(dup, "a.yaml"), "--name", "y", "--dry-run").mustOK(t)
	wantCalls(t, "apply --name", cat.takeCalls(), "get y")
}

// --prune deletes exactly the running patterns that no file names (not
// those being deleted), after the applies; not after a failed apply.
func TestPatternApplyPrune(t *testing.T) {
	deleting := runningPattern("going", 4, specOf("going"))
	deleting.State = cepv1.PatternState_PATTERN_STATE_DELETING
	cat, url := newFakeCatalog(t,
		runningPattern("a", 2, specOf("a")),
		runningPattern("b", 3, specOf("b")),
		runningPattern("old", 5, specOf("old")),
		runningPattern("older", 1, specOf("older")),
		deleting)
	dir := writeTree(t, map[string]string{"a.yaml": specOf("a"), "b.yaml": specOf("b") + "# changed\n", "c.yaml": specOf("c")})

	wantOut(t, "apply --prune", cepctl(t, url, "pattern", "apply", "-f", dir, "--prune", "--policy", "reset").mustOK(t).stdout,
		"pattern a unchanged at version 2",
		"updated pattern b to version 4 (policy reset, state active)",
		"deployed pattern c version 1 (sources logins, output subject cep.out.c)",
		"deleted pattern old (not in the files)",
		"deleted pattern older (not in the files)")
	wantCalls(t, "apply --prune", cat.takeCalls(), "get a", "get b", "update b reset", "get c", "deploy c", "list", "delete old", "delete older")

	wantOut(t, "apply --prune again", cepctl(t, url, "pattern", "apply", "-f", dir, "--prune").mustOK(t).stdout,
		"pattern a unchanged at version 2",
		"pattern b unchanged at version 4",
		"pattern c unchanged at version 1")
	wantCalls(t, "apply --prune again", cat.takeCalls(), "get a", "get b", "get c", "list")

	// a single FILE is the whole of what should run too
	cepctl(t, url, "pattern", "apply", filepath.Join(dir, "a.yaml"), "--prune", "--dry-run").mustOK(t)
	wantCalls(t, "apply FILE --prune --dry-run", cat.takeCalls(), "get a", "list")

	// a failed apply: the others are applied, nothing is pruned
	cat.running["old"] = runningPattern("old", 5, specOf("old"))
	cat.failDeploy = "d"
	dir2 := writeTree(t, map[string]string{"a.yaml": specOf("a") + "# v3\n", "d.yaml": specOf("d"), "e.yaml": specOf("e")})
	r := cepctl(t, url, "pattern", "apply", "-f", dir2, "--prune").mustFail(t, "nothing was pruned, as an apply failed")
	wantOut(t, "a failed apply --prune", r.stdout,
		"updated pattern a to version 3 (policy drain, state active)",
		"deployed pattern e version 1 (sources logins, output subject cep.out.e)")
	wantOut(t, "a failed apply --prune (stderr)", r.stderr,
		"cepctl: "+filepath.Join(dir2, "d.yaml")+`: source "nope" does not exist: api: failed precondition`,
		"cepctl: nothing was pruned, as an apply failed")
	wantCalls(t, "a failed apply --prune", cat.takeCalls(), "get a", "update a drain", "get d", "deploy d", "get e", "deploy e")
}

// --dry-run asks for validations, Get and List only, and says what apply
// would do; -o json lists it.
func TestPatternApplyDryRun(t *testing.T) {
	cat, url := newFakeCatalog(t,
		runningPattern("a", 2, specOf("a")),
		runningPattern("b", 3, specOf("b")),
		runningPattern("old", 5, specOf("old")))
	dir := writeTree(t, map[string]string{"a.yaml": specOf("a"), "b.yaml": specOf("b") + "# changed\n", "c.sql": "SELECT 1"})

	wantOut(t, "apply --dry-run", cepctl(t, url, "pattern", "apply", "-f", dir, "--prune", "--dry-run").mustOK(t).stdout,
		"pattern a unchanged at version 2",
		"would update pattern b to version 4 (policy drain) from "+filepath.Join(dir, "b.yaml"),
		"would deploy pattern c from "+filepath.Join(dir, "c.sql"),
		"would delete pattern old (version 5, not in the files)")
	wantCalls(t, "apply --dry-run", cat.takeCalls(), "get a", "get b", "get c", "list")

	out := cepctl(t, url, "pattern", "apply", "-f", dir, "--prune", "--dry-run", "-o", "json", "--records", "match,late").mustOK(t).stdout
	var got []appliedPattern
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("apply --dry-run -o json: %v\n%s", err, out)
	}
	want := []appliedPattern{
		{Name: "a", File: filepath.Join(dir, "a.yaml"), Action: "unchanged", Version: 2},
		{Name: "b", File: filepath.Join(dir, "b.yaml"), Action: "update", Version: 4},
		{Name: "c", File: filepath.Join(dir, "c.sql"), Action: "deploy", Version: 1},
		{Name: "old", Action: "delete", Version: 5},
	}
	if !slices.Equal(got, want) {
		t.Errorf("apply --dry-run -o json: %+v, want %+v", got, want)
	}
	if !strings.Contains(out, `"file": ""`) {
		t.Errorf("a deletion's file is not listed as empty:\n%s", out)
	}
	wantCalls(t, "apply --dry-run -o json", cat.takeCalls(), "get a", "get b", "get c", "list")

	out = cepctl(t, url, "pattern", "apply", "-f", dir, "--dry-run", "-o", "yaml", "--records", "timeout").mustOK(t).stdout
	if !strings.Contains(out, "- action: update\n  file: "+filepath.Join(dir, "a.yaml")+"\n  name: a\n  version: 3\n") {
		t.Errorf("apply --dry-run -o yaml with other records:\n%s", out)
	}
	wantCalls(t, "apply --dry-run -o yaml", cat.takeCalls(), "get a", "get b", "get c")

	// and without --dry-run, -f lists what was done
	out = cepctl(t, url, "pattern", "apply", "-f", filepath.Join(dir, "b.yaml"), "-o", "json").mustOK(t).stdout
	if err := json.Unmarshal([]byte(out), &got); err != nil || !slices.Equal(got, []appliedPattern{{Name: "b", File: filepath.Join(dir, "b.yaml"), Action: "update", Version: 4}}) {
		t.Errorf("apply -f -o json: %+v, %v\n%s", got, err, out)
	}
	wantCalls(t, "apply -f -o json", cat.takeCalls(), "get b", "update b drain")
}

// pattern diff shows what apply would change as a unified diff and exits
// 0 without differences, 1 with, 2 on an error.
func TestPatternDiff(t *testing.T) {
	cat, url := newFakeCatalog(t,
		runningPattern("a", 2, specOf("a")),
		runningPattern("b", 3, specOf("b")),
		runningPattern("old", 5, "name: old\n"))
	dir := writeTree(t, map[string]string{"a.yaml": specOf("a"), "b.yaml": specOf("b")})

	r := cepctl(t, url, "pattern", "diff", "-f", dir).mustOK(t)
	if r.stdout != "" || r.stderr != "" {
		t.Errorf("diff without differences printed %q, %q", r.stdout, r.stderr)
	}
	wantCalls(t, "diff", cat.takeCalls(), "get a", "get b")

	os.WriteFile(filepath.Join(dir, "b.yaml"), []byte(strings.Replace(specOf("b"), "LOGIN", "LOGOUT", 1)), 0o644)
	os.WriteFile(filepath.Join(dir, "c.yaml"), []byte("name: c\n"), 0o644)
	r = cepctl(t, url, "pattern", "diff", "-f", dir, "--prune")
	if r.code != 1 || r.stderr != "" {
		t.Errorf("diff with differences: exit %d, stderr %q; want 1 and nothing", r.code, r.stderr)
	}
	wantOut(t, "diff --prune", r.stdout,
		"--- running/b (version 3)",
		"+++ "+filepath.Join(dir, "b.yaml"),
		"@@ -2,7 +2,7 @@",
		" source: logins",
		" stages:",
		"   - name: a",
		`-    where: e.type == "LOGIN"`,
		`+    where: e.type == "LOGOUT"`,
		" # output-subject: cep.out.b",
		" # max-partial-matches: 100000",
		" # records: match, late",
		"--- /dev/null",
		"+++ "+filepath.Join(dir, "c.yaml"),
		"@@ -0,0 +1 @@",
		"+name: c",
		"--- running/old (version 5)",
		"+++ /dev/null",
		"@@ -1,4 +0,0 @@",
		"-name: old",
		"-# output-subject: cep.out.old",
		"-# max-partial-matches: 100000",
		"-# records: match, late")
	wantCalls(t, "diff --prune", cat.takeCalls(), "get a", "get b", "get c", "list")

	// the settings given: those of apply with the same flags
	a := filepath.Join(dir, "a.yaml")
	r = cepctl(t, url, "pattern", "diff", a, "--records", "timeout,match", "--output-subject", "cep.out.alerts", "--max-partial-matches", "100000")
	if r.code != 1 {
		t.Errorf("diff of other settings: exit %d, want 1; stderr %q", r.code, r.stderr)
	}
	wantOut(t, "diff of other settings", r.stdout,
		"--- running/a (version 2)",
		"+++ "+a,
		"@@ -3,6 +3,6 @@",
		" stages:",
		"   - name: a",
		`     where: e.type == "LOGIN"`,
		"-# output-subject: cep.out.a",
		"+# output-subject: cep.out.alerts",
		" # max-partial-matches: 100000",
		"-# records: match, late",
		"+# records: match, timeout")
	if r := cepctl(t, url, "pattern", "diff", "-f", a, "--records", "late,match"); r.code != 0 || r.stdout != "" {
		t.Errorf("diff of the same settings: exit %d, %q", r.code, r.stdout)
	}

	// a spec that differs only in its last newline differs
	os.WriteFile(a, []byte(strings.TrimSuffix(specOf("a"), "\n")), 0o644)
	r = cepctl(t, url, "pattern", "diff", "-f", a)
	if r.code != 1 || !strings.Contains(r.stdout, "+\\ No newline at end of the spec\n") {
		t.Errorf("diff of a spec without its last newline: exit %d\n%s", r.code, r.stdout)
	}

	os.WriteFile(filepath.Join(dir, "d.yaml"), []byte("broken"), 0o644)
	r = cepctl(t, url, "pattern", "diff", "-f", dir)
	if r.code != 2 || r.stdout != "" {
		t.Errorf("diff of an invalid file: exit %d, stdout %q; want 2 and nothing", r.code, r.stdout)
	}
	r.mustFail(t, filepath.Join(dir, "d.yaml")+`: stage "a": field "where": broken`)
	cat.takeCalls()
	for _, args := range [][]string{{"--nope"}, {a, a}, {}, {"-f", a, "--records", "x"}} {
		r := cepctl(t, url, append([]string{"pattern", "diff"}, args...)...)
		if r.code != 2 {
			t.Errorf("diff %q: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
	if r := cepctl(t, "http://127.0.0.1:1", "pattern", "diff", "-f", a); r.code != 2 || !strings.Contains(r.stderr, "cannot reach the server") {
		t.Errorf("diff with no server: exit %d, %q", r.code, r.stderr)
	}
	wantCalls(t, "diffs that fail", cat.takeCalls())
}

// Against a real node: a directory applied with --prune is what runs;
// a changed file shows in pattern diff (exit 1) until it is applied
// (exit 0).
func TestPatternApplyDiffAgainstANode(t *testing.T) {
	url := startNode(t)
	testutil.Eventually(t, 30*time.Second, func() error {
		if r := cepctl(t, url, "source", "create", "bank", "--key", "e.account"); r.code != 0 && !strings.Contains(r.stderr, "already") {
			return &testError{r.stderr}
		}
		return nil
	})
	example, err := os.ReadFile("../../examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	other := strings.Replace(string(example), "name: login-fail-logout", "name: login-logout", 1)
	dir := writeTree(t, map[string]string{"login-fail-logout.yaml": string(example), "more/login-logout.yml": other})
	cepctl(t, url, "pattern", "apply", "-f", filepath.Join(dir, "login-fail-logout.yaml")).mustOK(t)
	stray := strings.Replace(string(example), "name: login-fail-logout", "name: stray", 1)
	cepctl(t, url, "pattern", "deploy", writeTemp(t, "stray.yaml", stray)).mustOK(t)

	out := cepctl(t, url, "pattern", "apply", "-f", dir, "-R", "--prune").mustOK(t).stdout
	if !strings.HasPrefix(out, "pattern login-fail-logout unchanged at version 1\ndeployed pattern login-logout version 1 (sources bank") ||
		!strings.HasSuffix(out, "\ndeleted pattern stray (not in the files)\n") {
		t.Errorf("apply -f DIR -R --prune printed\n%s", out)
	}
	if r := cepctl(t, url, "pattern", "diff", "-f", dir, "-R", "--prune"); r.code != 0 || r.stdout != "" {
		t.Fatalf("diff after apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	changed := filepath.Join(dir, "more", "login-logout.yml")
	os.WriteFile(changed, []byte(strings.Replace(other, "within: 5m", "within: 10m", 1)), 0o644)
	r := cepctl(t, url, "pattern", "diff", "-f", dir, "-R", "--prune")
	if r.code != 1 || !strings.Contains(r.stdout, "--- running/login-logout (version 1)\n+++ "+changed+"\n") ||
		!strings.Contains(r.stdout, "\n-within: 5m\n+within: 10m\n") || strings.Contains(r.stdout, "login-fail-logout") {
		t.Errorf("diff of a changed file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wantOut(t, "apply of a changed file", cepctl(t, url, "pattern", "apply", "-f", dir, "-R", "--prune", "--dry-run").mustOK(t).stdout,
		"pattern login-fail-logout unchanged at version 1",
		"would update pattern login-logout to version 2 (policy drain) from "+changed)
	wantOut(t, "apply of a changed file", cepctl(t, url, "pattern", "apply", "-f", dir, "-R", "--prune", "--policy", "migrate").mustOK(t).stdout,
		"pattern login-fail-logout unchanged at version 1",
		"updated pattern login-logout to version 2 (policy migrate, state active)")
	if r := cepctl(t, url, "pattern", "diff", "-f", dir, "-R", "--prune"); r.code != 0 || r.stdout != "" {
		t.Errorf("diff after the apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
