package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cepcluster/cep/nfa"
)

// readExample reads a file of examples/.
func readExample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// --trace writes to stderr and leaves the records on stdout as they are
// without it; the trace is what nfa.TraceLines writes for the same input.
func TestRunTraceKeepsRecordsApart(t *testing.T) {
	p := filepath.Join("..", "..", "examples", "login-fail-logout.yaml")
	in := readExample(t, "events.jsonl")
	plain, errPlain, code := run(t, in, "run", "-p", p, "--now", "0")
	if code != 0 {
		t.Fatal(errPlain)
	}
	traced, trace, code := run(t, in, "run", "-p", p, "--now", "0", "--trace")
	if code != 0 {
		t.Fatal(trace)
	}
	if traced != plain {
		t.Errorf("records with --trace:\n%s\nwithout:\n%s", traced, plain)
	}
	pat, err := nfa.CompileBytes([]byte(readExample(t, "login-fail-logout.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	var lines [][]byte
	for _, l := range strings.Split(strings.TrimSpace(in), "\n") {
		lines = append(lines, []byte(l))
	}
	if err := nfa.TraceLines(nfa.DefaultConfig(), []*nfa.Pattern{pat}, lines, true, nfa.NewTraceWriter(&want, false), nil); err != nil {
		t.Fatal(err)
	}
	if trace != want.String() {
		t.Errorf("cepctl run --trace wrote:\n%s\nnfa.TraceLines:\n%s", trace, want.String())
	}
	for _, s := range []string{"event acc-1", "login", "failed:0", "logout", "$endState$", "matched", "within ran out at 305000"} {
		if !strings.Contains(trace, s) {
			t.Errorf("the trace lacks %q:\n%s", s, trace)
		}
	}
}

// --trace-out writes JSON lines (--trace-format json) to a file, and
// --trace-key and --trace-pattern keep only what they name.
func TestRunTraceJSONFiltered(t *testing.T) {
	p := filepath.Join("..", "..", "examples", "login-fail-logout.yaml")
	out := filepath.Join(t.TempDir(), "trace.jsonl")
	_, errOut, code := run(t, readExample(t, "events.jsonl"), "run", "-p", p, "--now", "0",
		"--trace-out", out, "--trace-format", "json", "--trace-key", "acc-3", "--trace-pattern", "login-fail-logout")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e nfa.TraceEntry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		if e.Key != "acc-3" || e.Pattern != "login-fail-logout" {
			t.Errorf("an entry of another key or pattern: %s", l)
		}
		if e.Kind != nfa.TraceCheck {
			kinds = append(kinds, string(e.Kind))
		}
	}
	// acc-3: two events held, then processed, its partial match started,
	// extended, and dropped when its window ran out
	if got := strings.Join(kinds, " "); got != "held held event start event extend time drop" {
		t.Errorf("entries %s", got)
	}
}

// Bad trace flags are refused with a line saying which and why.
func TestRunTraceBadFlags(t *testing.T) {
	p := filepath.Join("..", "..", "examples", "login-fail-logout.yaml")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--trace", "--trace-format", "yaml"}, `--trace-format "yaml": use text or json`},
		{[]string{"--trace-pattern", "nope"}, `--trace-pattern "nope": no pattern of that name runs (login-fail-logout)`},
		{[]string{"--trace-out", filepath.Join(t.TempDir(), "no", "such", "dir")}, "--trace-out: open"},
	} {
		_, errOut, code := run(t, "", append([]string{"run", "-p", p}, tc.args...)...)
		if code == 0 || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q, want one line with %q", tc.args, code, errOut, tc.want)
		}
	}
}

// A MATCH_RECOGNIZE query is traced too: its DEFINE conditions appear as
// written.
func TestRunTraceSQL(t *testing.T) {
	q := write(t, "q.sql", `SELECT * FROM events MATCH_RECOGNIZE (
  PARTITION BY account ORDER BY ts
  MEASURES A.ts AS a_ts, B.ts AS b_ts
  PATTERN (A B)
  DEFINE A AS type = 'LOGIN', B AS type = 'LOGOUT'
)`)
	in := `{"account":"x","type":"LOGIN","ts":1}
{"account":"x","type":"LOGOUT","ts":2}
`
	out, trace, code := run(t, in, "run", "--sql", q, "--now", "0", "--trace")
	if code != 0 {
		t.Fatal(trace)
	}
	if !strings.Contains(out, `"type":"match"`) {
		t.Fatalf("no match: %s", out)
	}
	for _, s := range []string{"type = 'LOGIN'", "type = 'LOGOUT'", "matched"} {
		if !strings.Contains(trace, s) {
			t.Errorf("the trace lacks %q:\n%s", s, trace)
		}
	}
}

// --key and -o json say what --trace-key and --trace-format json say: the
// same trace, byte for byte.
func TestRunTraceShortFlags(t *testing.T) {
	t.Chdir("../..")
	_, long, code := run(t, "", "run", "-p", "examples/login-fail-logout.yaml", "-i", "examples/events.jsonl", "--trace-key", "acc-3", "--trace-format", "json")
	if code != 0 || !strings.Contains(long, `"key":"acc-3"`) {
		t.Fatalf("the long flags: exit %d, %q", code, long)
	}
	_, short, code := run(t, "", "run", "-p", "examples/login-fail-logout.yaml", "-i", "examples/events.jsonl", "--key", "acc-3", "-o", "json")
	if code != 0 || short != long {
		t.Errorf("--key acc-3 -o json: exit %d\n%s\nwant\n%s", code, short, long)
	}
}
