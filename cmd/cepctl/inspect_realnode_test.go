package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/nfa"
)

// The README's quick start, on a real node: once the example events are
// in, `pattern inspect login-fail-logout --key acc-3` prints what the
// README shows after it (acc-3's events waiting for the watermark), and
// after one more event what it shows next (their partial match waiting
// for a logout); each time its -o json holds what the offline engine holds
// for acc-3 after the same events (partial matches with their states,
// starts, deadlines and events by stage; the waiting events; the
// watermark). --limit lists fewer and counts them all.
func TestReadmeInspectQuickStart(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	first := regexp.MustCompile("(?s)```sh\nbin/cepctl (pattern inspect login-fail-logout --key acc-3)\n```\n+```text\n(.*?)```").FindStringSubmatch(string(readme))
	next := regexp.MustCompile("(?s)```sh\necho '([^'\n]*)' \\| bin/cepctl (publish --source bank)\nbin/cepctl (pattern inspect login-fail-logout --key acc-3)\n```\n+```text\n(.*?)```").FindStringSubmatch(string(readme))
	if first == nil || next == nil {
		t.Fatal("the README does not show `bin/cepctl pattern inspect login-fail-logout --key acc-3` with its output, before and after one more event")
	}
	url := quickStartNode(t)
	cepctl(t, url, "publish", "--source", "bank", "-f", "../../examples/events.jsonl").mustOK(t)
	lines := strings.Split(strings.TrimSpace(readFile(t, "../../examples/events.jsonl")), "\n")
	p, err := nfa.CompileBytes([]byte(readFile(t, "../../examples/login-fail-logout.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	check := func(command, shown string) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, func() error {
			if r := cepctl(t, url, strings.Fields(command)...); r.code != 0 || r.stdout != shown {
				return fmt.Errorf("cepctl %s (exit %d, stderr %q) prints\n%s\nthe README shows\n%s", command, r.code, r.stderr, r.stdout, shown)
			}
			return nil
		})
		r := nfa.NewRunner(p)
		for _, l := range lines {
			if _, err := r.Line([]byte(l)); err != nil {
				t.Fatal(err)
			}
		}
		want := r.Matchers()[0].InspectKey("acc-3", 0)
		if want.PartialCount+want.BufferedCount == 0 {
			t.Fatal("the offline engine holds nothing for acc-3: the test checks nothing")
		}
		var got inspectionOut
		if err := json.Unmarshal([]byte(cepctl(t, url, "pattern", "inspect", "login-fail-logout", "--key", "acc-3", "-o", "json").mustOK(t).stdout), &got); err != nil {
			t.Fatal(err)
		}
		if g, w := inspectionSummary(got), offlineSummary(want); g != w {
			t.Errorf("-o json shows\n%s\nthe offline engine holds\n%s", g, w)
		}
		if got.Watermark == nil || *got.Watermark != want.Watermark {
			t.Errorf("watermark %v, the offline engine's %d", got.Watermark, want.Watermark)
		}
		var one inspectionOut
		if err := json.Unmarshal([]byte(cepctl(t, url, "pattern", "inspect", "login-fail-logout", "--key", "acc-3", "--limit", "1", "-o", "json").mustOK(t).stdout), &one); err != nil {
			t.Fatal(err)
		}
		if len(one.BufferedEvents) > 1 || len(one.PartialMatches) > 1 || one.BufferedEventCount != got.BufferedEventCount || one.PartialMatchCount != got.PartialMatchCount {
			t.Errorf("--limit 1 lists %d partial matches of %d, %d events of %d", len(one.PartialMatches), one.PartialMatchCount, len(one.BufferedEvents), one.BufferedEventCount)
		}
	}
	check(first[1], first[2])
	cepctlEnv(t, nil, next[1]+"\n", append([]string{"--server", url}, strings.Fields(next[2])...)...).mustOK(t)
	lines = append(lines, next[1])
	check(next[3], next[4])

	// after an update (drain, the default) version 1 still holds the
	// partial match, listed as the README shows it, under its version
	updated := filepath.Join(t.TempDir(), "lfl.yaml")
	if err := os.WriteFile(updated, []byte(strings.Replace(readFile(t, "../../examples/login-fail-logout.yaml"), "within: 5m", "within: 6m", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	cepctl(t, url, "pattern", "update", updated).mustOK(t)
	out := cepctl(t, url, strings.Fields(next[3])...).mustOK(t).stdout
	held := strings.SplitAfterN(next[4], "\n", 3)[2] // the README's lines after the heading and the watermark
	var indented strings.Builder
	for _, l := range strings.SplitAfter(held, "\n") {
		if l != "" {
			indented.WriteString("  " + l)
		}
	}
	if !strings.Contains(out, "version 2, key acc-3") || !strings.Contains(out, "\n0 partial matches\n") ||
		!strings.HasSuffix(out, "version 1, draining:\n"+indented.String()) {
		t.Errorf("after an update, inspect prints\n%s\nwant version 2 without partial matches, then version 1 draining with\n%s", out, indented.String())
	}

	if r := cepctl(t, url, "__complete", "pattern", "inspect", "").mustOK(t); !strings.Contains(r.stdout, "login-fail-logout\t") {
		t.Errorf("completing pattern inspect: %q", r.stdout)
	}
	cepctl(t, url, "pattern", "inspect", "nope", "--key", "acc-3").mustFail(t, "nope")
	cepctl(t, url, "pattern", "inspect", "login-fail-logout").mustFail(t, "--key")
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func inspectionSummary(x inspectionOut) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d partial matches, %d buffered\n", x.PartialMatchCount, x.BufferedEventCount)
	for _, pm := range x.PartialMatches {
		fmt.Fprintf(&b, "%s start %d deadline %v:", pm.State, pm.Start, deref(pm.Deadline))
		for _, e := range pm.Events {
			fmt.Fprintf(&b, " %s@%d=%s", e.Stage, e.Time, eventLine(e.Event))
		}
		b.WriteString("\n")
	}
	for _, e := range x.BufferedEvents {
		fmt.Fprintf(&b, "buffered @%d=%s\n", e.Time, eventLine(e.Event))
	}
	return b.String()
}

func offlineSummary(v nfa.KeyView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d partial matches, %d buffered\n", v.PartialCount, v.BufferedCount)
	for _, pm := range v.Partial {
		var d any = nil
		if pm.HasDeadline {
			d = pm.Deadline
		}
		fmt.Fprintf(&b, "%s start %d deadline %v:", pm.State, pm.Start, d)
		for _, e := range pm.Events {
			fmt.Fprintf(&b, " %s@%d=%s", e.Stage, e.Time, e.Raw)
		}
		b.WriteString("\n")
	}
	for _, e := range v.Buffered {
		fmt.Fprintf(&b, "buffered @%d=%s\n", e.Time, e.Raw)
	}
	return b.String()
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
