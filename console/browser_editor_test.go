package console_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
)

// setSpec types a whole document into the editor at once (as a paste).
func setSpec(t *testing.T, eval evalFunc, sel, text string) {
	t.Helper()
	var ok bool
	eval("type into "+sel, fmt.Sprintf(`(t => { t.value = %s; t.dispatchEvent(new Event("input", {bubbles: true})); return true })(document.querySelector(%q))`, mustJSON(text), sel), &ok)
}

// editorErrorsAtTheirLine validates broken patterns in the deploy page's
// editor, a document and a SQL query, each broken at a place the test
// knows (the line and column of what it misspelt), and checks that the
// page shows the API's message under that line of the text, with the
// caret at the column, and moves the editor's selection to it.
func editorErrorsAtTheirLine(t *testing.T, ctx context.Context, url string, patternc cepv1connect.PatternServiceClient, run runFunc, eval evalFunc, waitFor waitForFunc, click clickFunc, shot func(name string)) {
	t.Helper()
	goAround, err := os.ReadFile("../examples/go-around.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, spec, name, broken string }{
		{"a document", "name: console-bad\nsource: bank\nkey: e.account\nstages:\n- name: login\n  where: e.type == \"LOGIN\"\n- name: failed\n  where: e.type == \"PAYMENT_FAILED\"\n  times: [3, 2]\n", "", "times"},
		{"a document's misspelt field", "name: console-bad\nsource: bank\nkey: e.account\nstages:\n- name: login\n  wher: e.type == \"LOGIN\"\n", "", "wher"},
		{"a SQL query", strings.Replace(string(goAround), "AND C.vertical_rate > 2.0", "AND C.vertcal_rate > 2.0", 1), "console-bad", "vertcal_rate"},
	} {
		line, col := 0, 0
		lines := strings.Split(c.spec, "\n")
		for i, l := range lines {
			if j := strings.Index(l, c.broken); j >= 0 {
				line, col = i+1, j+1
				break
			}
		}
		v, err := patternc.ValidatePattern(ctx, connect.NewRequest(&cepv1.ValidatePatternRequest{Spec: c.spec, Name: c.name}))
		if err != nil || v.Msg.Valid {
			t.Fatalf("%s: validate: %v %v", c.what, v, err)
		}
		msg := v.Msg.Error.GetMessage()
		run("the editor", chromedp.Navigate(url+"/ui/#/deploy"), chromedp.WaitVisible(chromedp.CSS("#spec")))
		setSpec(t, eval, "#spec", c.spec)
		setSpec(t, eval, "#pname", c.name)
		click("button", "Validate")
		waitFor(c.what+": the error at its line", `!!document.querySelector(".spec-lines .line.bad")`)
		var shown struct {
			Line          string
			Text, At, Msg string
			Start, End    int
			Focused       bool
		}
		eval("read the error", `(() => { const b = document.querySelector(".spec-lines .line.bad"); const ta = document.querySelector("#spec");
			return {Line: b.dataset.line, Text: b.querySelector("code").textContent, At: b.nextElementSibling.querySelector("code").textContent,
				Msg: document.querySelector(".spec-problem .error").textContent, Start: ta.selectionStart, End: ta.selectionEnd, Focused: document.activeElement == ta} })()`, &shown)
		if shown.Line != fmt.Sprint(line) || shown.Text != lines[line-1] {
			t.Errorf("%s: the page marks line %s %q, the fault is on line %d %q", c.what, shown.Line, shown.Text, line, lines[line-1])
		}
		if want := strings.Repeat(" ", col-1) + "^ " + msg; shown.At != want {
			t.Errorf("%s: under the line the page shows %q, want %q", c.what, shown.At, want)
		}
		if !strings.Contains(shown.Msg, fmt.Sprintf("line %d, column %d", line, col)) || !strings.Contains(shown.Msg, msg) {
			t.Errorf("%s: the page says %q, want line %d, column %d and %q", c.what, shown.Msg, line, col, msg)
		}
		shot(fmt.Sprintf("editor-error-%d.png", line))
		start := 0
		for _, l := range lines[:line-1] {
			start += len(l) + 1
		}
		if !shown.Focused || shown.Start != start || shown.End != start+len(lines[line-1]) {
			t.Errorf("%s: the editor selects %d–%d (focused %v), the line is %d–%d", c.what, shown.Start, shown.End, shown.Focused, start, start+len(lines[line-1]))
		}
	}
	// the page is left as it was found, for what the test does next
	setSpec(t, eval, "#spec", "")
	setSpec(t, eval, "#pname", "")
	if _, err := patternc.GetPattern(ctx, connect.NewRequest(&cepv1.GetPatternRequest{Name: "console-bad"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("validating deployed something: %v", err)
	}
}

// patternStatsShown checks the pattern list's counters against
// GetPatternStats (itself checked against the shards' leaders in
// test/integration), its matches against the records the tail had, and
// that the row has its rate's sparkline.
func patternStatsShown(t *testing.T, ctx context.Context, patternc cepv1connect.PatternServiceClient, eval evalFunc, waitFor waitForFunc, name string, matched int) {
	t.Helper()
	st, err := patternc.GetPatternStats(ctx, connect.NewRequest(&cepv1.GetPatternStatsRequest{Name: name}))
	if err != nil || len(st.Msg.Patterns) != 1 {
		t.Fatalf("GetPatternStats: %v %v", st, err)
	}
	p := st.Msg.Patterns[0]
	if p.Matches != uint64(matched) || len(st.Msg.MissingShards) != 0 {
		t.Errorf("GetPatternStats counts %d matches (shards missing: %v), the tail had %d", p.Matches, st.Msg.MissingShards, matched)
	}
	want := map[string]string{"Matches": fmt.Sprint(p.Matches), "Timeouts": fmt.Sprint(p.Timeouts), "Late": fmt.Sprint(p.Late),
		"Dead letters": fmt.Sprint(p.DeadLetters), "Partial matches": fmt.Sprint(p.PartialMatches), "Condition errors": fmt.Sprint(p.ConditionErrors)}
	row := fmt.Sprintf(`[...[...document.querySelectorAll("table")].find(t => t.caption.textContent.startsWith("Deployed patterns")).tBodies[0].rows].find(r => r.cells[0].textContent == %q)`, name)
	var shown map[string]string
	eval("read the counters", fmt.Sprintf(`(() => { const r = %s; const h = [...r.closest("table").tHead.rows[0].cells].map(c => c.textContent); return Object.fromEntries(h.map((l, i) => [l, r.cells[i].textContent.replace(/^⚠ /, "")])) })()`, row), &shown)
	for k, v := range want {
		if shown[k] != v {
			t.Errorf("the list shows %s %q, GetPatternStats %s", k, shown[k], v)
		}
	}
	// two polls make a rate: the line is drawn and its label says it
	waitFor("the rate's sparkline", fmt.Sprintf(`(r => !!r.querySelector("td.rate svg.spark polyline") && r.querySelector("td.rate svg.spark").getAttribute("aria-label").startsWith("Matches per second of %s"))(%s)`, name, row))
}

// restoreSavepoint restores the savepoint createSavepoint wrote, from the
// page, after its confirmation: a pattern deployed since is gone from the
// API's list afterwards (a restore replaces the cluster's patterns with
// the savepoint's), and nothing changed before the confirmation.
func restoreSavepoint(t *testing.T, ctx context.Context, patternc cepv1connect.PatternServiceClient, spc cepv1connect.SavepointServiceClient, eval evalFunc, waitFor waitForFunc, click clickFunc, labelled labelledFunc, shot func(name string)) {
	t.Helper()
	l, err := spc.ListSavepoints(ctx, connect.NewRequest(&cepv1.ListSavepointsRequest{}))
	if err != nil || len(l.Msg.Savepoints) == 0 {
		t.Fatalf("the API lists %v, %v", l, err)
	}
	sp := l.Msg.Savepoints[0]
	since := "name: console-since\nsource: bank\nkey: e.account\nstages:\n- name: login\n  where: e.type == \"LOGIN\"\n"
	if _, err := patternc.DeployPattern(ctx, connect.NewRequest(&cepv1.DeployPatternRequest{Spec: since})); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		t.Helper()
		ps, err := patternc.ListPatterns(ctx, connect.NewRequest(&cepv1.ListPatternsRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range ps.Msg.Patterns {
			out = append(out, p.Name)
		}
		return out
	}
	var saved []string
	for _, p := range sp.PatternVersions {
		saved = append(saved, p.Name)
	}
	click("button", "Restore…")
	waitFor("the confirmation", fmt.Sprintf(`[...document.querySelectorAll("button")].some(b => b.textContent == "Restore %s")`, sp.Id))
	var choices []string
	eval("the position choices", `[...document.querySelectorAll("#restore-positions option")].map(o => o.textContent.split(":")[0])`, &choices)
	if want := []string{"refuse the restore (the default)", "keep", "from-start", "from-end", "from-time"}; !slices.Equal(choices, want) {
		t.Errorf("the restore offers positions %q, want %q (cepctl savepoint restore --positions)", choices, want)
	}
	labelled("restore")
	shot("restore.png")
	if got := names(); !slices.Contains(got, "console-since") {
		t.Fatalf("before the confirmation the patterns are %q", got)
	}
	click("button", "Restore "+sp.Id)
	waitFor("restored", `[...document.querySelectorAll("[role=status]")].some(s => s.textContent.includes("Restored"))`)
	if got := names(); !slices.Equal(got, saved) {
		t.Errorf("after the restore the API lists patterns %q, the savepoint has %q", got, saved)
	}
	var status string
	eval("the status", `[...document.querySelectorAll("[role=status]")].find(s => s.textContent.includes("Restored")).textContent`, &status)
	if !strings.Contains(status, sp.Id) || !strings.Contains(status, fmt.Sprintf("into %d shard", sp.ShardCount)) {
		t.Errorf("the page says %q; restored %s into %d shards", status, sp.Id, sp.ShardCount)
	}
}
