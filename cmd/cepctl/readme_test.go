package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cepcluster/cep/nfa"
)

// The README shows `cepctl run` on the examples with their output: each
// command it shows prints exactly the JSON block that follows it.
func TestReadmeRunExamples(t *testing.T) {
	t.Chdir("../..")
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	shown := regexp.MustCompile("(?s)```sh\ngo run ./cmd/cepctl (run [^\n]*)\n```.*?```json\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(shown) < 2 {
		t.Fatalf("the README shows %d `cepctl run` commands with their output, want the pattern's and the query's", len(shown))
	}
	for _, s := range shown {
		out, errOut, code := run(t, "", strings.Fields(s[1])...)
		if code != 0 || out != s[2] {
			t.Errorf("cepctl %s (exit %d, stderr %q) prints\n%s\nthe README shows\n%s", s[1], code, errOut, out, s[2])
		}
	}
}

// The documents under docs/ (and the README, should it have any) show
// their examples as fenced blocks labelled after the language: "yaml
// pattern" (or "json pattern") or "sql query",
// then "json input" (the input lines), then "json output" (what `cepctl
// run` prints), "text error" (a rejected pattern: its one-line error) and/or
// "text stderr" (what it writes to stderr). Flags for `cepctl run` may
// follow the label of the pattern or query block
// ("```yaml pattern --final-watermark=false"). Every example is run and
// its output compared byte for byte.
func TestReadmeDocsRunExamples(t *testing.T) {
	t.Chdir("../..")
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	// labelled examples in the README are run the same way
	files = append(files, "README.md")
	// the documents that are made of examples must keep them
	want := map[string]int{"docs/patterns.md": 45, "docs/match-recognize.md": 20, "docs/output.md": 4}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		exs, err := docExamples(string(b))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if n := want[f]; len(exs) < n {
			t.Errorf("%s has %d runnable examples, want at least %d", f, len(exs), n)
		}
		for _, ex := range exs {
			t.Run(filepath.Base(f)+":"+ex.line, func(t *testing.T) { ex.check(t) })
		}
	}
	for f := range want {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// docExample is one example of a document.
type docExample struct {
	line                 string // line of the pattern block, for messages
	sql                  bool
	doc, flags, input    string
	output, err, stderr  string
	hasOutput, hasStderr bool
	hasErr               bool
}

var fenceRE = regexp.MustCompile("(?ms)^```([^\n]*)\n(.*?)^```[ \t]*$")

// docExamples reads the labelled blocks of a document into examples.
func docExamples(md string) ([]*docExample, error) {
	var exs []*docExample
	var cur *docExample
	for _, m := range fenceRE.FindAllStringSubmatchIndex(md, -1) {
		info := strings.Fields(md[m[2]:m[3]])
		body := md[m[4]:m[5]]
		line := strings.Count(md[:m[0]], "\n") + 1
		if len(info) < 2 {
			continue // a block that is not part of an example
		}
		label := info[1]
		switch label {
		case "pattern", "query":
			cur = &docExample{line: strconv.Itoa(line), sql: label == "query", doc: body, flags: strings.Join(info[2:], " ")}
			exs = append(exs, cur)
			continue
		case "input", "output", "error", "stderr":
		default:
			// a misspelt label would leave its example unchecked
			return nil, fmt.Errorf("line %d: unknown example label %q (want pattern, query, input, output, error or stderr)", line, label)
		}
		if cur == nil {
			return nil, fmt.Errorf("line %d: a %q block before any pattern or query", line, label)
		}
		switch label {
		case "input":
			cur.input = body
		case "output":
			cur.output, cur.hasOutput = body, true
		case "error":
			cur.err, cur.hasErr = strings.TrimSpace(body), true
		case "stderr":
			cur.stderr, cur.hasStderr = body, true
		}
	}
	for _, ex := range exs {
		if !ex.hasOutput && !ex.hasErr && !ex.hasStderr {
			return nil, fmt.Errorf("line %s: a pattern or query without an output, error or stderr block", ex.line)
		}
		if ex.hasErr && ex.hasOutput {
			return nil, fmt.Errorf("line %s: an example with both an error and an output", ex.line)
		}
	}
	return exs, nil
}

func (ex *docExample) check(t *testing.T) {
	name, flag := "pattern.yaml", "-p"
	if ex.sql {
		name, flag = "query.sql", "--sql"
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(ex.doc), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"run", flag, path, "-i", "-"}, strings.Fields(ex.flags)...)
	out, errOut, code := run(t, ex.input, args...)
	// messages name the file as the reader would have it
	errOut = strings.ReplaceAll(errOut, path, name)
	if ex.hasErr {
		if code == 0 || strings.TrimSpace(errOut) != ex.err {
			t.Errorf("cepctl run (exit %d) writes to stderr\n%s\nthe document shows the error\n%s", code, errOut, ex.err)
		}
		return
	}
	if code != 0 {
		t.Errorf("cepctl run exits %d: %s", code, errOut)
	}
	if ex.hasOutput && out != ex.output {
		t.Errorf("cepctl run prints\n%s\nthe document shows\n%s", out, ex.output)
	}
	if !ex.hasOutput && out != "" {
		t.Errorf("cepctl run prints\n%s\nthe document shows no output", out)
	}
	if ex.hasStderr && errOut != ex.stderr {
		t.Errorf("cepctl run writes to stderr\n%s\nthe document shows\n%s", errOut, ex.stderr)
	}
	if !ex.hasStderr && errOut != "" {
		t.Errorf("cepctl run writes to stderr\n%s\nthe document shows nothing there", errOut)
	}
}

// Every field a pattern document accepts has its row in the reference's
// tables, so a new field cannot go undocumented.
func TestReadmeDocsEveryPatternField(t *testing.T) {
	t.Chdir("../..")
	b, err := os.ReadFile("docs/patterns.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, v := range []any{nfa.Spec{}, nfa.Stage{}} {
		typ := reflect.TypeOf(v)
		for i := 0; i < typ.NumField(); i++ {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			if !strings.Contains(doc, "\n| `"+name+"` |") {
				t.Errorf("docs/patterns.md has no table row for the %s field %q", typ.Name(), name)
			}
		}
	}
}

// The README's quick start shows `cepctl pattern explain` on the example
// with its output.
func TestReadmeExplainExample(t *testing.T) {
	t.Chdir("../..")
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	shown := regexp.MustCompile("(?s)```sh\nbin/cepctl (pattern explain [^\n]*)\n```\n\n```text\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(shown) == 0 {
		t.Fatal("the README shows no `cepctl pattern explain` with its output")
	}
	for _, s := range shown {
		r := cepctlEnv(t, nil, "", strings.Fields(s[1])...)
		if r.code != 0 || r.stdout != s[2] {
			t.Errorf("cepctl %s (exit %d, stderr %q) prints\n%s\nthe README shows\n%s", s[1], r.code, r.stderr, r.stdout, s[2])
		}
	}
}

// The README's restore walkthrough (and the other savepoint restores it
// shows) gives cepctl flags it takes: each `savepoint restore` line parses,
// with the server the walkthrough names, and every --positions shown means
// a mapping.
func TestReadmeSavepointRestores(t *testing.T) {
	t.Chdir("../..")
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	server := ""
	if m := regexp.MustCompile(`(?m)^B="--server (\S+)"$`).FindSubmatch(readme); m != nil {
		server = string(m[1])
	}
	lines := regexp.MustCompile(`(?m)^bin/cepctl (.*savepoint restore .*?)(?:\s+#.*)?$`).FindAllSubmatch(readme, -1)
	positions := 0
	for _, l := range lines {
		args := strings.Fields(strings.ReplaceAll(strings.ReplaceAll(string(l[1]), "$B", "--server "+server), "'", ""))
		got, err := parse(t, parseEnv{}, "savepoint", newSavepointRestoreCmd, args...)
		if err != nil {
			t.Errorf("README: cepctl %s: %v", l[1], err)
			continue
		}
		if strings.Contains(string(l[1]), "$B") && (server == "" || got.Server != "http://"+server && got.Server != server) {
			t.Errorf("README: cepctl %s: server %q, the walkthrough's is %q", l[1], got.Server, server)
		}
		if got.Positions != "" {
			positions++
			if m, _, err := positionMapping(got.Positions); err != nil || m == 0 {
				t.Errorf("README: --positions %s: %v", got.Positions, err)
			}
		}
	}
	if len(lines) < 3 || positions == 0 {
		t.Fatalf("the README shows %d savepoint restores, %d with --positions: the walkthrough is missing", len(lines), positions)
	}
}
