package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cepcluster/cep/internal/conformance"
)

func write(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = Run(context.Background(), args, strings.NewReader(stdin), &o, &e)
	return o.String(), e.String(), code
}

const loginPattern = `
name: login-fail
key: e.user
time: e.ts
within: 10s
skip: skipPastLastEvent
stages:
  - name: login
    where: e.type == "LOGIN"
  - name: failed
    contiguity: next
    where: e.type == "FAIL"
    oneOrMore: true
    consecutive: true
    greedy: true
  - name: logout
    contiguity: next
    where: e.type == "LOGOUT"
`

func TestRunPrintsMatchesAndTimeouts(t *testing.T) {
	p := write(t, "p.yaml", loginPattern)
	in := `{"user":"a","type":"LOGIN","ts":1000}
{"user":"b","type":"LOGIN","ts":1500}
{"user":"a","type":"FAIL","ts":2000}
{"user":"a","type":"FAIL","ts":3000}
{"user":"a","type":"LOGOUT","ts":4000}
`
	out, errOut, code := run(t, in, "run", "-p", p)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a match and a timeout, got:\n%s", out)
	}
	var match, timeout map[string]any
	json.Unmarshal([]byte(lines[0]), &match)
	json.Unmarshal([]byte(lines[1]), &timeout)
	if match["type"] != "match" || match["key"] != "a" || match["start"] != 1000.0 || match["end"] != 4000.0 {
		t.Errorf("match: %s", lines[0])
	}
	if n := len(match["events"].(map[string]any)["failed"].([]any)); n != 2 {
		t.Errorf("greedy failed stage took %d events, want 2: %s", n, lines[0])
	}
	if timeout["type"] != "timeout" || timeout["key"] != "b" || timeout["timeoutAt"] != 11500.0 {
		t.Errorf("timeout: %s", lines[1])
	}
	// stage order is kept in the JSON
	if !strings.Contains(lines[0], `"events":{"login":`) || strings.Index(lines[0], `"failed"`) > strings.Index(lines[0], `"logout"`) {
		t.Errorf("events not in stage order: %s", lines[0])
	}
}

func TestRunFinalWatermarkFalse(t *testing.T) {
	p := write(t, "p.yaml", loginPattern)
	out, _, code := run(t, `{"user":"b","type":"LOGIN","ts":1500}`+"\n", "run", "-p", p, "--final-watermark=false")
	if code != 0 || strings.TrimSpace(out) != "" {
		t.Fatalf("exit %d, output %q: want nothing", code, out)
	}
}

func TestRunSeveralPatterns(t *testing.T) {
	p1 := write(t, "p1.yaml", loginPattern)
	p2 := write(t, "p2.json", `{"name":"any-login","stages":[{"name":"l","where":"e.type == \"LOGIN\""}]}`)
	out, errOut, code := run(t, `{"user":"a","type":"LOGIN","ts":1}`+"\n", "run", "-p", p1, "-p", p2)
	if code != 0 {
		t.Fatal(errOut)
	}
	if !strings.Contains(out, `"pattern":"any-login"`) || !strings.Contains(out, `"pattern":"login-fail"`) {
		t.Fatalf("want records of both patterns:\n%s", out)
	}
}

// A key past --max-partial-matches: the output lacks the records of the
// partial matches dropped, and a warning on stderr says how many and why;
// with no bound the output is complete and nothing is said.
func TestRunWarnsOfDroppedPartialMatches(t *testing.T) {
	p := write(t, "p.json", `{"name":"pairs","key":"e.user","time":"e.ts","stages":[
		{"name":"a","where":"e.type == \"A\""},
		{"name":"b","contiguity":"followedByAny","where":"e.type == \"B\""}]}`)
	var in strings.Builder
	for i := 1; i <= 25; i++ {
		fmt.Fprintf(&in, `{"user":"u","type":"A","ts":%d}`+"\n", i)
	}
	in.WriteString(`{"user":"u","type":"B","ts":100}` + "\n")
	for _, tc := range []struct {
		bound   string
		matches int
		warning string
	}{
		{"0", 25, ""},
		{"10", 10, "cepctl: warning: pattern pairs: 15 partial matches dropped because a key held more than 10 (--max-partial-matches); records they would have produced are missing\n"},
	} {
		out, errOut, code := run(t, in.String(), "run", "-p", p, "--max-partial-matches", tc.bound)
		if code != 0 {
			t.Fatalf("bound %s: exit %d: %s", tc.bound, code, errOut)
		}
		if n := strings.Count(out, `"type":"match"`); n != tc.matches {
			t.Errorf("bound %s: %d matches, want %d:\n%s", tc.bound, n, tc.matches, out)
		}
		if errOut != tc.warning {
			t.Errorf("bound %s: stderr %q, want %q", tc.bound, errOut, tc.warning)
		}
	}
}

// A condition on a field the events lack (here a typo) fails on every
// event and counts as false: the pattern prints nothing, and stderr says
// why; so does an emitted field that fails.
func TestRunWarnsOfFailedExpressions(t *testing.T) {
	p := write(t, "p.json", `{"name":"big","emit":{"cur":"e.currency"},"stages":[{"name":"a","where":"e.amout > 100"}]}`)
	q := write(t, "q.json", `{"name":"big2","emit":{"cur":"e.currency"},"stages":[{"name":"a","where":"e.amount > 100"}]}`)
	out, errOut, code := run(t, `{"amount":500}`+"\n"+`{"amount":50}`+"\n", "run", "-p", p, "-p", q)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if n := strings.Count(out, "\n"); n != 1 || !strings.Contains(out, `"pattern":"big2"`) || !strings.Contains(out, `"fields":{"cur":null}`) {
		t.Errorf("want big2's one match with a null field, got:\n%s", out)
	}
	want := "cepctl: warning: pattern big: 2 condition evaluations failed and counted as false; the first: e.amout > 100: no such key: amout\n" +
		"cepctl: warning: pattern big2: 1 emitted fields failed and are null; the first: cur: no such key: currency\n"
	if errOut != want {
		t.Errorf("stderr\n%s\nwant\n%s", errOut, want)
	}
}

// Input as editors and shells on Windows write it: a UTF-8 byte order mark
// is skipped (the output is that of the same input without it, from a file
// or stdin); UTF-16 is refused in one line that says so.
func TestRunReadsWindowsText(t *testing.T) {
	p := write(t, "p.yaml", loginPattern)
	in := "{\"user\":\"a\",\"type\":\"LOGIN\",\"ts\":1000}\r\n{\"user\":\"a\",\"type\":\"FAIL\",\"ts\":2000}\r\n{\"user\":\"a\",\"type\":\"LOGOUT\",\"ts\":3000}\r\n"
	want, errOut, code := run(t, in, "run", "-p", p)
	if code != 0 || !strings.Contains(want, `"type":"match"`) {
		t.Fatalf("exit %d, %q, output:\n%s", code, errOut, want)
	}
	bom := "\xef\xbb\xbf" + in
	for _, args := range [][]string{{"-i", write(t, "bom.jsonl", bom)}, {"-i", "-"}} {
		out, errOut, code := run(t, bom, append([]string{"run", "-p", p}, args...)...)
		if code != 0 || out != want {
			t.Errorf("%v: exit %d, %q, output:\n%s\nwant\n%s", args, code, errOut, out, want)
		}
	}
	utf16 := []byte{0xFF, 0xFE}
	for _, r := range in {
		utf16 = append(utf16, byte(r), 0)
	}
	out, errOut, code := run(t, "", "run", "-p", p, "-i", write(t, "utf16.jsonl", string(utf16)))
	if code == 0 || out != "" || !strings.Contains(errOut, "UTF-16") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("UTF-16: exit %d, output %q, stderr %q", code, out, errOut)
	}
}

// --stats counts what the records show: matches, timeouts and late
// events as printed, every event that was not late, and the state left
// (without the final watermark: the partial match of b and its event).
func TestRunStats(t *testing.T) {
	p := write(t, "p.yaml", loginPattern)
	in := `{"user":"a","type":"LOGIN","ts":1000}
{"user":"b","type":"LOGIN","ts":1500}
{"user":"a","type":"FAIL","ts":2000}
{"user":"a","type":"LOGOUT","ts":4000}
{"user":"c","type":"LOGIN","ts":900}
{"user":"c","type":"LOGIN","ts":5000}
`
	for _, tc := range []struct {
		final bool
		want  string
	}{
		{true, "cepctl: pattern login-fail: events 5, late 1, matches 1, timeouts 2; left: 0 partial matches and 0 buffered events on 0 keys\n"},
		{false, "cepctl: pattern login-fail: events 5, late 1, matches 1, timeouts 0; left: 2 partial matches and 2 buffered events on 2 keys\n"},
	} {
		out, errOut, code := run(t, in, "run", "-p", p, "--stats", "--final-watermark="+fmt.Sprint(tc.final))
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		counts := fmt.Sprintf("matches %d, timeouts %d, late %d", strings.Count(out, `"type":"match"`), strings.Count(out, `"type":"timeout"`), strings.Count(out, `"type":"late"`))
		if want := map[bool]string{true: "matches 1, timeouts 2, late 1", false: "matches 1, timeouts 0, late 1"}[tc.final]; counts != want {
			t.Errorf("final=%v: printed %s, want %s:\n%s", tc.final, counts, want, out)
		}
		if errOut != tc.want {
			t.Errorf("final=%v: stderr %q, want %q", tc.final, errOut, tc.want)
		}
	}
}

func TestRunErrors(t *testing.T) {
	good := write(t, "p.yaml", loginPattern)
	bad := write(t, "bad.yaml", "name: x\nstages:\n  - name: a\n    until: e.x == 1\n")
	costly := write(t, "costly.yaml", "name: x\nstages:\n  - name: a\n    times: [1, 19000]\n  - name: b\n")
	costlySQL := write(t, "costly.sql", `SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
  MEASURES FIRST(A.ts) AS f PATTERN (A{1,19000} B) DEFINE A AS t = 'A', B AS t = 'B')`)
	for _, tc := range []struct {
		name, stdin string
		args        []string
		want        string
	}{
		{"rejected pattern", "", []string{"run", "-p", bad}, `stage "a": field "until"`},
		{"over a limit", "", []string{"run", "-p", costly}, `stage "a": field "times": times upper bound is 19000, over the limit MaxQuantifier = 100 (see docs/limits.md)`},
		{"query over a limit", "", []string{"run", "--sql", costlySQL}, `times upper bound is 19000, over the limit MaxQuantifier = 100`},
		{"missing pattern file", "", []string{"run", "-p", "/nonexistent.yaml"}, "read pattern"},
		{"missing input", "", []string{"run", "-p", good, "-i", "/nonexistent.jsonl"}, "read input"},
		{"bad json line", `{"user":"a","type":"LOGIN","ts":1}` + "\n" + `{"user":` + "\n", []string{"run", "-p", good}, "input line 2"},
		{"no time", `{"user":"a","type":"LOGIN"}` + "\n", []string{"run", "-p", good}, "input line 1"},
		{"not an object", `[1,2]` + "\n", []string{"run", "-p", good}, "input line 1"},
		{"no pattern", "", []string{"run"}, "at least one pattern"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := run(t, tc.stdin, tc.args...)
			if code == 0 {
				t.Fatal("exit 0, want an error")
			}
			if strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Errorf("error is not one line: %q", errOut)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("error %q does not contain %q", errOut, tc.want)
			}
		})
	}
}

// Every spec conformance case passes through the cepctl binary, not only
// through the in-process API.
func TestConformanceThroughBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process per case")
	}
	cases, err := conformance.Load("../../testdata/conformance")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]string{}
	if b, err := os.ReadFile("../../testdata/conformance/known-differences.json"); err == nil {
		json.Unmarshal(b, &known)
	}
	pass := 0
	for _, c := range cases {
		if c.Skip {
			continue
		}
		if _, ok := known[c.File]; ok {
			continue
		}
		dir := t.TempDir()
		inf := filepath.Join(dir, "input.jsonl")
		os.WriteFile(inf, c.InputLines(), 0o644)
		args := []string{"run", "-i", inf}
		if c.IsSQL() {
			qf := filepath.Join(dir, "q.sql")
			os.WriteFile(qf, []byte(*c.SQL), 0o644)
			args = append(args, "--sql", qf)
		} else {
			pf := filepath.Join(dir, "pattern.json")
			os.WriteFile(pf, c.Pattern, 0o644)
			args = append(args, "-p", pf)
		}
		if !c.Final() {
			args = append(args, "--final-watermark=false")
		}
		cmd := exec.Command(cepctlBin, args...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ok bool
		var why string
		if err != nil {
			ok, why = c.CheckError(e.String())
		} else if c.Expect.Error != nil {
			ok, why = false, "pattern accepted"
		} else {
			var recs []conformance.Record
			for _, l := range strings.Split(strings.TrimSpace(o.String()), "\n") {
				if l == "" {
					continue
				}
				var r conformance.Record
				if err := json.Unmarshal([]byte(l), &r); err != nil {
					t.Fatalf("%s: non-JSON output %q", c.File, l)
				}
				recs = append(recs, r)
			}
			ok, why = c.CheckRecords(recs)
		}
		if !ok {
			t.Errorf("%s: %s", c.File, why)
		} else {
			pass++
		}
	}
	t.Logf("conformance through cepctl: %d passed", pass)
}

// --records prints only the record types named, as a deployment with
// --records publishes them; the others still count in --stats.
func TestRunRecords(t *testing.T) {
	p := write(t, "p.yaml", loginPattern)
	in := `{"user":"a","type":"LOGIN","ts":1000}
{"user":"b","type":"LOGIN","ts":1500}
{"user":"a","type":"FAIL","ts":2000}
{"user":"a","type":"LOGOUT","ts":4000}
{"user":"c","type":"LOGIN","ts":500}
`
	all, _, code := run(t, in, "run", "-p", p)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, c := range []struct {
		records string
		types   []string
	}{
		{"match", []string{"match"}},
		{"timeout,late", []string{"timeout", "late"}},
		{"match,timeout,late", []string{"match", "timeout", "late"}},
	} {
		out, errOut, code := run(t, in, "run", "-p", p, "--records", c.records, "--stats")
		var want []string
		for _, l := range strings.Split(strings.TrimSpace(all), "\n") {
			for _, typ := range c.types {
				if strings.HasPrefix(l, `{"type":"`+typ+`"`) {
					want = append(want, l)
				}
			}
		}
		if code != 0 || strings.TrimSpace(out) != strings.Join(want, "\n") || !strings.Contains(errOut, "matches 1, timeouts 1") {
			t.Errorf("--records %s (exit %d, stderr %q):\n%s\nwant\n%s", c.records, code, errOut, out, strings.Join(want, "\n"))
		}
	}
	if _, errOut, code := run(t, in, "run", "-p", p, "--records", "alert"); code == 0 || !strings.Contains(errOut, `--records: unknown record type "alert"`) {
		t.Errorf("unknown record type: exit %d, %q", code, errOut)
	}
}
