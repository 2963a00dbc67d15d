package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/internal/testutil"
)

// The page-driving helpers TestConsoleInABrowser makes for its browser.
type (
	runFunc      func(what string, actions ...chromedp.Action[chromedp.Void])
	evalFunc     func(what, expr string, out any, opts ...chromedp.EvaluateOption)
	waitForFunc  func(what, expr string)
	labelledFunc func(page string)
	clickFunc    func(sel, text string)
)

// pageTime is a time as the console shows it (ui.tsx fmtMs).
func pageTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000") + " UTC"
}

// inspected is what the page shows of a key's inside, or what the API's
// answer should look like there.
type inspected struct {
	Key, PMCount, BufCount string
	PMs                    []inspectedPM
	Buffered               [][]string
}

type inspectedPM struct {
	Head   string
	Events [][]string
}

func plural(n uint64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func firstShown(n int, count uint64) string {
	if uint64(n) < count {
		return fmt.Sprintf(" (the first %d shown)", n)
	}
	return ""
}

// wantInspected is how the page should show the API's answer.
func wantInspected(x *cepv1.InspectKeyResponse) inspected {
	w := inspected{
		Key:      x.Key,
		PMCount:  plural(x.PartialMatchCount, "partial match", "partial matches") + firstShown(len(x.PartialMatches), x.PartialMatchCount),
		BufCount: plural(x.BufferedEventCount, "event", "events") + " waiting for the watermark" + firstShown(len(x.BufferedEvents), x.BufferedEventCount),
		PMs:      []inspectedPM{},
		Buffered: [][]string{},
	}
	for i, pm := range x.PartialMatches {
		state := pm.State
		if pm.Stage != pm.State {
			state += " (stage " + pm.Stage + ")"
		}
		deadline := "none"
		if pm.HasDeadline {
			deadline = pageTime(pm.DeadlineMs)
		}
		p := inspectedPM{Head: fmt.Sprintf("#%d state %s, start %s, window deadline %s", i+1, state, pageTime(pm.StartMs), deadline), Events: [][]string{}}
		for _, e := range pm.Events {
			p.Events = append(p.Events, []string{e.Stage, pageTime(e.TimeMs), fmt.Sprint(e.Sequence), string(e.Json)})
		}
		w.PMs = append(w.PMs, p)
	}
	for _, e := range x.BufferedEvents {
		w.Buffered = append(w.Buffered, []string{pageTime(e.TimeMs), fmt.Sprint(e.Sequence), string(e.Json)})
	}
	return w
}

const readInspection = `(() => {
	const x = document.querySelector(".inspection");
	if (!x) return null;
	const rows = t => t ? [...t.querySelectorAll("tbody tr")].map(r => [...r.cells].map(c => c.textContent)) : [];
	const buf = x.querySelector(":scope > .buffered");
	return {
		Key: x.querySelector(".ikey").textContent,
		PMCount: x.querySelector(":scope > .pm-count").textContent,
		BufCount: x.querySelector(":scope > .buffered-count").textContent,
		PMs: [...x.querySelectorAll(":scope > .pm")].map(p => ({Head: p.querySelector(".pm-head").textContent.replace(/\s+/g, " ").trim(), Events: rows(p)})),
		Buffered: rows(buf),
	};
})()`

// inspectKey asks the pattern page for acc-3's inside and compares it with
// the API's answer for the same key: after the README's events, acc-3's
// two events wait for the watermark; once a later event moves it past
// them, they are a partial match's. The node may still be applying the
// events: the page and the API are asked again until they agree on an
// answer that holds what is waited for.
func inspectKey(t *testing.T, ctx context.Context, bin, url string, patternc cepv1connect.PatternServiceClient, run runFunc, eval evalFunc, waitFor waitForFunc, labelled labelledFunc, shot func(name string)) {
	t.Helper()
	run("the key field", chromedp.WaitVisible(chromedp.CSS("#inspect-key")), chromedp.SendKeys(chromedp.CSS("#inspect-key"), "acc-3"))
	labelled("pattern, inspecting")
	agree := func(what string, holds func(*cepv1.InspectKeyResponse) bool) {
		t.Helper()
		testutil.Eventually(t, 60*time.Second, func() error {
			run("inspect acc-3", chromedp.Click(chromedp.CSS(`.inspect button[type=submit]`)))
			waitFor("acc-3's inside", `document.querySelector(".inspection .ikey") && document.querySelector(".inspection .ikey").textContent == "acc-3"`)
			var got inspected
			eval("read acc-3's inside", readInspection, &got)
			res, err := patternc.InspectKey(ctx, connect.NewRequest(&cepv1.InspectKeyRequest{Name: "login-fail-logout", Key: "acc-3"}))
			if err != nil {
				return err
			}
			if !holds(res.Msg) {
				return fmt.Errorf("the API's answer for acc-3 does not hold %s yet: %v", what, res.Msg)
			}
			if want := wantInspected(res.Msg); !reflect.DeepEqual(got, want) {
				return fmt.Errorf("the page shows\n%+v\nthe API's answer is\n%+v", got, want)
			}
			return nil
		})
	}
	agree("two waiting events", func(x *cepv1.InspectKeyResponse) bool { return len(x.BufferedEvents) == 2 })
	later := filepath.Join(t.TempDir(), "later.jsonl")
	if err := os.WriteFile(later, []byte(`{"account":"acc-4","type":"LOGIN","ts":10000}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cepctl(t, bin, url, "A", "publish", "--source", "bank", "-f", later)
	agree("a partial match with both events", func(x *cepv1.InspectKeyResponse) bool {
		return len(x.PartialMatches) > 0 && len(x.PartialMatches[0].Events) == 2 && len(x.BufferedEvents) == 0
	})
	var top bool
	eval("scroll to the inspection", `(document.querySelector(".inspect").scrollIntoView(), true)`, &top)
	shot("inspect.png")
}

// sourcesAndDeadLetters checks the sources page against ListSources, and
// that a dead letter published while it is open appears with the reason
// the API's tail of dead letters gives; leaving closes the stream.
func sourcesAndDeadLetters(t *testing.T, ctx context.Context, bin, url string, nl *netLog, sourcec cepv1connect.SourceServiceClient, matchc cepv1connect.MatchServiceClient, run runFunc, eval evalFunc, waitFor waitForFunc, labelled labelledFunc, shot func(name string)) {
	t.Helper()
	run("sources", chromedp.Navigate(url+"/ui/#/sources"))
	waitFor("the sources table", `[...document.querySelectorAll("caption")].some(c => c.textContent == "Sources")`)
	waitFor("the dead letters followed", `document.querySelector(".dl-state") && document.querySelector(".dl-state").textContent.startsWith("Following")`)
	labelled("sources")
	list, err := sourcec.ListSources(ctx, connect.NewRequest(&cepv1.ListSourcesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var want [][]string
	for _, s := range list.Msg.Sources {
		schema := "none declared"
		if len(s.Fields) > 0 {
			var fs []string
			for _, f := range s.Fields {
				opt := ""
				if f.Optional {
					opt = "?"
				}
				fs = append(fs, f.Path+": "+f.Type+opt)
			}
			schema = strings.Join(fs, ", ")
		}
		key := s.Key
		if key == "" {
			key = "the subject's last token"
		}
		want = append(want, []string{s.Name, key, s.Stream, strings.Join(s.Subjects, ", "), schema})
	}
	if len(want) == 0 || want[0][0] != "bank" || want[0][1] != "e.account" {
		t.Fatalf("the API lists the sources %q, want bank keyed by e.account", want)
	}
	var rows [][]string
	eval("read the sources", `[...[...document.querySelectorAll("table")].find(t => t.caption.textContent == "Sources").tBodies[0].rows].map(r => [...r.cells].map(c => c.textContent))`, &rows)
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("the sources page shows\n%q\nListSources has\n%q", rows, want)
	}

	// an event without the pattern's time field is refused
	const refused = `{"account":"acc-5","type":"LOGIN"}`
	events := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(events, []byte(refused+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cepctl(t, bin, url, "A", "publish", "--source", "bank", "-f", events)
	waitFor("the dead letter", fmt.Sprintf(`[...document.querySelectorAll("code.dl-data")].some(c => c.textContent == %q)`, refused))
	tail, err := matchc.Tail(ctx, connect.NewRequest(&cepv1.TailRequest{DeadLetters: true, Start: cepv1.TailStart_TAIL_START_ALL, StopAtEnd: true}))
	if err != nil {
		t.Fatal(err)
	}
	var dead [][]string // newest first, as the page
	for tail.Receive() {
		var d struct {
			Source, Pattern, Reason string
			Data                    json.RawMessage
		}
		if err := json.Unmarshal(tail.Msg().Json, &d); err != nil {
			t.Fatalf("a dead letter: %v: %s", err, tail.Msg().Json)
		}
		var data bytes.Buffer
		if len(d.Data) > 0 {
			if err := json.Compact(&data, d.Data); err != nil {
				t.Fatal(err)
			}
		}
		dead = append([][]string{{d.Source, d.Pattern, d.Reason, data.String()}}, dead...)
	}
	if tail.Err() != nil || len(dead) != 1 || dead[0][2] == "" {
		t.Fatalf("the API's dead letters: %q, %v", dead, tail.Err())
	}
	var shown [][]string
	eval("read the dead letters", `[...[...document.querySelectorAll("table")].find(t => t.caption.textContent.startsWith("Latest dead letters")).tBodies[0].rows].map(r => [...r.cells].slice(1).map(c => c.textContent))`, &shown)
	if !reflect.DeepEqual(shown, dead) {
		t.Errorf("the page shows the dead letters\n%q\nthe API's tail\n%q", shown, dead)
	}
	if dead[0][0] != "bank" || dead[0][1] != "login-fail-logout" || dead[0][3] != refused {
		t.Errorf("the dead letter %q is not the refused event's", dead[0])
	}
	shot("sources.png")
	// filtered by source: bank's are all of them
	var ok bool
	eval("filter by bank", `(s => { s.value = "bank"; s.dispatchEvent(new Event("change", {bubbles: true})); return true })(document.querySelector("#dl-source"))`, &ok)
	waitFor("bank's dead letter", fmt.Sprintf(`document.querySelector(".dl-state").textContent.startsWith("Following") && [...document.querySelectorAll("td.dl-reason")].map(c => c.textContent).join("|") == %q`, dead[0][2]))

	// leaving the page closes the stream, in the browser and on the node
	run("leave the sources", chromedp.Navigate(url+"/ui/#/"))
	testutil.Eventually(t, 30*time.Second, func() error {
		if _, open := nl.requests("/cep.v1.MatchService/Tail"); open != 0 {
			return fmt.Errorf("the browser still has %d tails open", open)
		}
		if n := streamsActive(t, url); n != 0 {
			return fmt.Errorf("the node still serves %v tails", n)
		}
		return nil
	})
}

// createSavepoint creates a savepoint from the page, as an operator, after
// the confirmation, and checks the list against ListSavepoints.
func createSavepoint(t *testing.T, ctx context.Context, spc cepv1connect.SavepointServiceClient, run runFunc, eval evalFunc, waitFor waitForFunc, click clickFunc, labelled labelledFunc, shot func(name string)) {
	t.Helper()
	run("savepoints", chromedp.Click(chromedp.CSS(`nav a[href="#/savepoints"]`)))
	waitFor("no savepoint yet", `[...document.querySelectorAll("p")].some(p => p.textContent == "No savepoint is recorded.")`)
	var target string
	eval("the default target", `document.querySelector("#sp-target").value`, &target)
	if target != "dir://console" {
		t.Errorf("the target field starts as %q, want dir://console", target)
	}
	labelled("savepoints")
	click("button", "Create savepoint")
	waitFor("the confirmation", `[...document.querySelectorAll("button")].some(b => b.textContent == "Create it")`)
	if l, err := spc.ListSavepoints(ctx, connect.NewRequest(&cepv1.ListSavepointsRequest{})); err != nil || len(l.Msg.Savepoints) != 0 {
		t.Fatalf("before the confirmation the API lists %v, %v", l, err)
	}
	click("button", "Create it")
	waitFor("created", `!!document.querySelector("[role=status]") && document.querySelector("[role=status]").textContent.includes("Created")`)
	l, err := spc.ListSavepoints(ctx, connect.NewRequest(&cepv1.ListSavepointsRequest{}))
	if err != nil || len(l.Msg.Savepoints) != 1 {
		t.Fatalf("the API lists %v, %v; want the one created", l, err)
	}
	sp := l.Msg.Savepoints[0]
	if !strings.HasPrefix(sp.Location, "dir://console#") {
		t.Errorf("the savepoint is at %s, not the default target", sp.Location)
	}
	waitFor("it is listed", fmt.Sprintf(`[...document.querySelectorAll("tbody th")].some(c => c.textContent == %q)`, sp.Id))
	shot("savepoints.png")
	var status string
	eval("the status", `document.querySelector("[role=status]").textContent`, &status)
	if !strings.Contains(status, sp.Id) {
		t.Errorf("the page says %q, the savepoint is %s", status, sp.Id)
	}
	var row []string
	eval("read the row", `[...document.querySelector("tbody tr").cells].map(c => c.textContent)`, &row)
	if len(row) < 4 || row[1] != sp.Location || row[3] != fmt.Sprint(sp.ShardCount) {
		t.Errorf("the savepoint's row %q, the API's %v", row, sp)
	}
}

// savepointsAsReader: a reader sees the list and is offered no creation
// and no restore.
func savepointsAsReader(t *testing.T, ctx context.Context, url string, spc cepv1connect.SavepointServiceClient, run runFunc, eval evalFunc, waitFor waitForFunc) {
	t.Helper()
	l, err := spc.ListSavepoints(ctx, connect.NewRequest(&cepv1.ListSavepointsRequest{}))
	if err != nil || len(l.Msg.Savepoints) == 0 {
		t.Fatalf("the API lists %v, %v", l, err)
	}
	run("savepoints as a reader", chromedp.Navigate(url+"/ui/#/savepoints"))
	waitFor("the savepoint listed", fmt.Sprintf(`[...document.querySelectorAll("tbody th")].some(c => c.textContent == %q)`, l.Msg.Savepoints[0].Id))
	var offered bool
	eval("look for create", `!!document.querySelector("#sp-target") || [...document.querySelectorAll("button")].some(b => /create|restore/i.test(b.textContent + b.getAttribute("aria-label")))`, &offered)
	if offered {
		t.Error("a reader is offered to create or restore a savepoint")
	}
}
