package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/nfa"
)

// aircraftTracks are the events of a go-around (descends below 1500 m,
// keeps descending, climbs twice, climbs above the climb), of a landing,
// and of a go-around that climbs only once, interleaved by time.
func aircraftTracks() []string {
	const t0 = 1717236000000
	tracks := map[string][][3]float64{ // vertical rate, altitude, on the ground
		"3c6444": {{-6, 1600, 0}, {-6, 1450, 0}, {-5, 1300, 0}, {-5, 1150, 0}, {-4, 1100, 0}, {4, 1150, 0}, {5, 1250, 0}, {6, 1400, 0}, {6, 1550, 0}},
		"4b1805": {{-5, 1400, 0}, {-5, 1200, 0}, {-5, 900, 0}, {-4, 500, 0}, {-3, 200, 0}, {0, 0, 1}, {0, 0, 1}},
		"a0b1c2": {{-3, 1400, 0}, {-3, 1300, 0}, {3, 1350, 0}, {1, 1360, 0}, {3, 1450, 0}, {4, 1500, 0}, {5, 1700, 0}, {5, 1900, 0}},
	}
	var out []string
	for i := 0; i < 10; i++ {
		for _, icao := range []string{"3c6444", "4b1805", "a0b1c2"} {
			if p := tracks[icao]; i < len(p) {
				out = append(out, fmt.Sprintf(`{"input":{"icao24":%q,"on_ground":%t,"vertical_rate":%g,"baro_altitude":%g},"record_time":%d}`,
					icao, p[i][2] == 1, p[i][0], p[i][1], t0+int64(i)*10_000))
			}
		}
	}
	return append(out, fmt.Sprintf(`{"$watermark": %d}`, t0+1_000_000))
}

// offlineRecords runs query over the events with the offline engine, as
// pattern name, and returns its records as JSON.
func offlineRecords(t *testing.T, query, name string, events []string) []string {
	t.Helper()
	p, err := nfa.CompileSQL(query, name)
	if err != nil {
		t.Fatalf("%v\n%s", err, query)
	}
	r := nfa.NewRunner(p)
	var out []string
	for _, e := range events {
		recs, err := r.Line([]byte(e))
		if err != nil {
			t.Fatal(err)
		}
		for i := range recs {
			b, _ := recs[i].AppendJSON(nil)
			out = append(out, string(b))
		}
	}
	for _, rec := range r.Finish(true) {
		b, _ := rec.AppendJSON(nil)
		out = append(out, string(b))
	}
	return out
}

// buildGoAround builds examples/go-around.sql in the builder, a part at a
// time as a person would, checks the automaton grows with the steps and a
// misspelt field's error lands on its condition, then checks the query
// the builder wrote gives the example's records on the same events
// (offline), and deploys it.
func buildGoAround(t *testing.T, ctx context.Context, bin, url string, patternc cepv1connect.PatternServiceClient, run runFunc, eval evalFunc, waitFor waitForFunc, click clickFunc, labelled labelledFunc, shot func(name string)) {
	t.Helper()
	cepctl(t, bin, url, "A", "source", "create", "record", "--key", "e.input.icao24")
	run("the builder", chromedp.Navigate(url+"/ui/#/build"))
	waitFor("the builder's form", `!!document.querySelector("#b-name")`)
	// fill sets a control's value as typing or choosing does
	fill := func(sel, v string) {
		t.Helper()
		waitFor(sel, fmt.Sprintf(`!!document.querySelector(%q)`, sel))
		var ok bool
		eval("fill "+sel, fmt.Sprintf(`(e => { e.value = %s; e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); return true })(document.querySelector(%q))`, mustJSON(v), sel), &ok)
	}
	press := func(sel string) {
		t.Helper()
		waitFor(sel, fmt.Sprintf(`!!document.querySelector(%q)`, sel))
		var ok bool
		eval("press "+sel, fmt.Sprintf(`(document.querySelector(%q).click(), true)`, sel), &ok)
	}
	// the automaton's states are named by the steps (B:0, B for B+): those
	// added so far, and no other
	stagesDrawn := func(want ...string) {
		t.Helper()
		waitFor("the automaton of steps "+strings.Join(want, " "), fmt.Sprintf(`(w => { const l = [...document.querySelectorAll(".draft-automaton svg text")].map(t => t.textContent); return w.every(s => l.includes(s)) && !l.some(x => /^[A-D](:\d+)?$/.test(x) && !w.includes(x[0])) })(%s)`, mustJSON(want)))
	}

	// the source's fields, from its latest events, are offered for the
	// columns: the leaf fields of the events published
	events := aircraftTracks()
	file := filepath.Join(t.TempDir(), "tracks.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(events[:len(events)-1], "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cepctl(t, bin, url, "A", "publish", "--source", "record", "-f", file)
	fill("#b-name", "go-around-built")
	fill("#b-source", "record")
	var paths []string
	for _, e := range events[:3] {
		var m map[string]any
		if err := json.Unmarshal([]byte(e), &m); err != nil {
			t.Fatal(err)
		}
		for k, v := range m {
			if in, ok := v.(map[string]any); ok {
				for k2 := range in {
					paths = append(paths, k+"."+k2)
				}
			} else {
				paths = append(paths, k)
			}
		}
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	waitFor("the source's fields offered", fmt.Sprintf(`JSON.stringify([...document.querySelectorAll("#b-source-fields option")].map(o => o.value)) == %q`, mustJSON(paths)))
	for i, c := range [][2]string{{"input.icao24", "icao24"}, {"input.on_ground", "on_ground"}, {"input.vertical_rate", "vertical_rate"}, {"input.baro_altitude", "baro_altitude"}, {"record_time", ""}} {
		press("#b-add-col")
		fill(fmt.Sprintf("#b-col-%d-expr", i), c[0])
		fill(fmt.Sprintf("#b-col-%d-as", i), c[1])
	}
	fill("#b-partition", "icao24")
	fill("#b-order", "record_time")
	type cond struct{ field, op, value, expr string }
	steps := []struct {
		name, quant string
		reluctant   bool
		conds       []cond
	}{
		{"A", "1", false, []cond{{"on_ground", "=", "FALSE", ""}, {"vertical_rate", "<", "-1.0", ""}, {"baro_altitude", "<", "1500", ""}}},
		{"B", "+", false, []cond{{"on_ground", "=", "FALSE", ""}, {"vertical_rate", "<", "-1.0", ""}, {expr: "(LAST(B.baro_altitude, 1) IS NULL OR B.baro_altitude < LAST(B.baro_altitude, 1))"}}},
		{"C", "2+", true, []cond{{"on_ground", "=", "FALSE", ""}, {"vertcal_rate", ">", "2.0", ""}}}, // misspelt: corrected below
		{"D", "1", false, []cond{{"on_ground", "=", "FALSE", ""}, {expr: "D.baro_altitude > LAST(C.baro_altitude)"}}},
	}
	var names []string
	for i, s := range steps {
		if i > 0 {
			press("#b-add-step")
		}
		p := fmt.Sprintf("#b-step-%d", i)
		fill(p+"-name", s.name)
		fill(p+"-quant", s.quant)
		if s.reluctant {
			press(p + "-reluctant")
		}
		for j, c := range s.conds {
			if j > 0 {
				press(p + "-add-cond")
			}
			cp := fmt.Sprintf("%s-cond-%d", p, j)
			if c.expr != "" {
				fill(cp+"-mode", "expr")
				fill(cp+"-expr", c.expr)
				continue
			}
			fill(cp+"-field", c.field)
			fill(cp+"-op", c.op)
			fill(cp+"-value", c.value)
		}
		if s.name == "C" {
			// the misspelt field's error is on its condition, not elsewhere
			waitFor("the error on condition 2 of step C", `(e => !!e && e.textContent.includes("Condition 2 of step C: ") && e.textContent.includes("no field 'vertcal_rate'. Did you mean 'vertical_rate'?"))(document.querySelector("#err-cond-2-1"))`)
			waitFor("the drawing said to be of the last valid query", `[...document.querySelectorAll(".draft-automaton .hint")].some(p => p.textContent.startsWith("Drawn for the last valid version"))`)
			var errs int
			eval("count the errors", `document.querySelectorAll(".field-error").length`, &errs)
			if errs != 1 {
				t.Errorf("%d errors on the form, want the one", errs)
			}
			var invalid string
			eval("the field marked", `document.querySelector("#b-step-2-cond-1-field").getAttribute("aria-invalid") + " " + document.querySelector("#b-step-2-cond-1-field").getAttribute("aria-describedby")`, &invalid)
			if invalid != "true err-cond-2-1" {
				t.Errorf("the misspelt field is marked %q", invalid)
			}
			shot("builder-error.png")
			fill(p+"-cond-1-field", "vertical_rate")
			waitFor("the error gone", `!document.querySelector(".field-error")`)
		}
		names = append(names, s.name)
		if s.name == "B" {
			// B+ last is refused (Flink allows no greedy quantifier
			// there): the error is on the steps until C follows
			waitFor("the error on the steps", `(e => !!e && e.textContent.startsWith("✖ Steps: greedy quantifier '+' on 'B'"))(document.querySelector("#err-pattern"))`)
			continue
		}
		stagesDrawn(names...)
	}
	for i, m := range [][4]string{{"A", "", "icao24", "aircraft"}, {"A", "FIRST", "record_time", "descent_start"}, {"B", "LAST", "baro_altitude", "lowest_altitude"}, {"D", "", "baro_altitude", "altitude_after_climb"}} {
		press("#b-add-measure")
		p := fmt.Sprintf("#b-measure-%d", i)
		fill(p+"-step", m[0])
		fill(p+"-fn", m[1])
		fill(p+"-expr", m[2])
		fill(p+"-as", m[3])
	}
	fill("#b-within-n", "3")
	fill("#b-within-unit", "MINUTE")
	fill("#b-after", "PAST LAST ROW")
	labelled("builder")
	waitFor("the query valid", `!!document.querySelector(".b-valid") && !document.querySelector("#b-deploy").disabled`)
	var built string
	eval("the query", `document.querySelector("#b-sql").value`, &built)

	// an edit of the query the form can write goes into the form; one it
	// cannot leaves the form, until the form's query is taken back
	edit := func(from, to string) {
		t.Helper()
		if !strings.Contains(built, from) {
			t.Fatalf("the query has no %q:\n%s", from, built)
		}
		fill("#b-sql", strings.Replace(built, from, to, 1))
	}
	handEdited := `[...document.querySelectorAll("p")].some(p => p.textContent.includes("Edited by hand"))`
	edit("WITHIN INTERVAL '3' MINUTE", "WITHIN INTERVAL '4' MINUTE")
	waitFor("the window in the form", `document.querySelector("#b-within-n").value == "4"`)
	edit("C.vertical_rate > 2.0", "C.vertical_rate > 2.5")
	waitFor("the condition in the form", `document.querySelector("#b-step-2-cond-1-value").value == "2.5" && document.querySelector("#b-within-n").value == "3"`)
	var hand bool
	eval("no hand edit", handEdited, &hand)
	if hand {
		t.Error("an edit the form can write is said to be by hand")
	}
	fill("#b-sql", built)
	waitFor("the form as built", `document.querySelector("#b-step-2-cond-1-value").value == "2.0"`)
	edit("SELECT *", "-- by hand\nSELECT *")
	waitFor("edited by hand", handEdited)
	click("button", "Back to the form's query")
	waitFor("the form's query again", fmt.Sprintf(`document.querySelector("#b-sql").value == %s && !(%s)`, mustJSON(built), handEdited))
	waitFor("the query valid again", `!!document.querySelector(".b-valid") && !document.querySelector("#b-deploy").disabled`)

	// the same records as the example's on the same events
	example, err := os.ReadFile("../examples/go-around.sql")
	if err != nil {
		t.Fatal(err)
	}
	want := offlineRecords(t, string(example), "go-around", events)
	got := offlineRecords(t, built, "go-around", events)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("the built query's records\n%s\nthe example's\n%s\nthe built query:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), built)
	}

	shot("builder.png")
	press("#b-deploy")
	waitFor("deployed", `!!document.querySelector('[role=status] a[href="#/patterns/go-around-built"]')`)
	p, err := patternc.GetPattern(ctx, connect.NewRequest(&cepv1.GetPatternRequest{Name: "go-around-built"}))
	if err != nil {
		t.Fatal(err)
	}
	if p.Msg.Pattern.Spec != built || p.Msg.Pattern.Format != cepv1.SpecFormat_SPEC_FORMAT_SQL {
		t.Errorf("deployed %v:\n%s\nthe page's query:\n%s", p.Msg.Pattern.Format, p.Msg.Pattern.Spec, built)
	}
}
