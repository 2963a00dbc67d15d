package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// cepctl bench runs patterns over the input as cepctl run does: every run
// reports the records cepctl run prints for the same patterns and input,
// and the bytes of their JSON lines. (Its times are not checked: they are
// what it measures.)
func TestBenchCountsWhatRunPrints(t *testing.T) {
	p := write(t, "p.yaml", loginPattern)
	var in strings.Builder
	for i := range 400 {
		// each user in turn: login, two failures, logout, something else
		fmt.Fprintf(&in, `{"user":"u%d","type":%q,"ts":%d}`+"\n", i/5%7, []string{"LOGIN", "FAIL", "FAIL", "LOGOUT", "OTHER"}[i%5], 1000+100*i)
		if i == 200 {
			in.WriteString(`{"$watermark": 20000}` + "\n\n")
		}
	}
	in.WriteString(`{"user":"v","type":"LOGIN","ts":99000}` + "\n") // times out at the end
	out, errOut, code := run(t, in.String(), "run", "-p", p)
	if code != 0 {
		t.Fatalf("run: %d %s", code, errOut)
	}
	records := strings.Count(out, "\n")
	if records < 10 {
		t.Fatalf("run printed %d records: the input should produce more", records)
	}
	path := write(t, "in.jsonl", in.String())
	out, errOut, code = run(t, "", "bench", "-p", p, "-i", path, "--repeat", "3")
	if code != 0 {
		t.Fatalf("bench: %d %s", code, errOut)
	}
	runLine := regexp.MustCompile(`(?m)^(run [123]|median|best): +\S+, [\d,]+ lines/s, [\d.]+ µs/line, [\d.]+ allocations/line; ([\d,]+) records \(([\d,]+) bytes of JSON\)$`)
	m := runLine.FindAllStringSubmatch(out, -1)
	if len(m) != 5 || !strings.HasPrefix(out, "input:   "+path+": 403 lines") {
		t.Fatalf("bench printed\n%s", out)
	}
	for _, l := range m {
		if l[2] != group(uint64(records)) {
			t.Fatalf("%s: %s records, cepctl run prints %d", l[1], l[2], records)
		}
	}
	runOut, _, _ := run(t, in.String(), "run", "-p", p)
	if m[0][3] != group(uint64(len(runOut))) {
		t.Fatalf("%s bytes of JSON, cepctl run prints %d", m[0][3], len(runOut))
	}
}

// A MATCH_RECOGNIZE query (its columns checked against the input's first
// event) is benchmarked too: the README's example, with the records
// cepctl run prints.
func TestBenchQuery(t *testing.T) {
	args := []string{"--sql", "../../examples/v-shape.sql", "-i", "../../examples/ticker.jsonl"}
	runOut, errOut, code := run(t, "", append([]string{"run"}, args...)...)
	if code != 0 || runOut == "" {
		t.Fatalf("run: %d %s", code, errOut)
	}
	out, errOut, code := run(t, "", append([]string{"bench", "--repeat", "1"}, args...)...)
	want := fmt.Sprintf("; %d records (%s bytes of JSON)", strings.Count(runOut, "\n"), group(uint64(len(runOut))))
	if code != 0 || strings.Count(out, want) != 3 {
		t.Fatalf("bench: exit %d %s\n%s\nwant lines ending %q", code, errOut, out, want)
	}
}

// --cpuprofile writes a profile of the runs (gzip-compressed protobuf, what
// go tool pprof reads).
func TestBenchCPUProfile(t *testing.T) {
	p := write(t, "p.yaml", loginPattern)
	in := write(t, "in.jsonl", `{"user":"a","type":"LOGIN","ts":1}`+"\n")
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	if _, errOut, code := run(t, "", "bench", "-p", p, "-i", in, "--repeat", "1", "--cpuprofile", prof); code != 0 {
		t.Fatalf("bench: %d %s", code, errOut)
	}
	b, err := os.ReadFile(prof)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile %d bytes, %v", len(b), err)
	}
}

// Bad input or options: one line, a non-zero exit, before any run.
func TestBenchRefuses(t *testing.T) {
	p := write(t, "p.yaml", loginPattern)
	bad := write(t, "bad.jsonl", `{"user":"a","type":"LOGIN","ts":1}`+"\nnot json\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "-i", bad}, "give at least one pattern"},
		{[]string{"bench", "-p", p, "-i", bad, "--repeat", "0"}, "--repeat must be at least 1"},
		{[]string{"bench", "-p", p, "-i", bad}, "line 2"},
		{[]string{"bench", "-p", p, "-i", bad + ".missing"}, "read input"},
	} {
		out, errOut, code := run(t, "", c.args...)
		if code == 0 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || strings.Contains(out, "run 1") {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want a line with %q", c.args, code, errOut, out, c.want)
		}
	}
}
