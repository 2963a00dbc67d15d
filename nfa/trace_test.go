package nfa_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/internal/conformance"
	"github.com/cepcluster/cep/nfa"
)

// traced is a trace kept: each entry copied (a tracer's entry is valid
// only during the call), its record as JSON.
type traced struct {
	e      nfa.TraceEntry
	record string
	pos    []uint64
}

func collect(out *[]traced) nfa.Tracer {
	return func(e *nfa.TraceEntry) {
		t := traced{e: *e}
		t.e.Event = append(json.RawMessage(nil), e.Event...)
		if e.Record != nil {
			b, err := e.Record.AppendJSON(nil)
			if err != nil {
				panic(err)
			}
			t.record = string(b)
			t.pos = slices.Clone(e.Record.Positions)
		}
		t.e.Record = nil
		*out = append(*out, t)
	}
}

// runTraced runs the input lines through a runner, and returns the
// records (as JSON, with their positions) and the runner's statistics.
func runTraced(t interface{ Fatalf(string, ...any) }, r *nfa.Runner, lines [][]byte, final bool) (recs []nfa.Record, js []string) {
	return runTracedTo(t, r, lines, &final)
}

// runTracedTo is runTraced, which does not end the input when final is nil.
func runTracedTo(t interface{ Fatalf(string, ...any) }, r *nfa.Runner, lines [][]byte, final *bool) (recs []nfa.Record, js []string) {
	add := func(rs []nfa.Record) {
		for i := range rs {
			b, err := rs[i].AppendJSON(nil)
			if err != nil {
				t.Fatalf("%v", err)
			}
			js = append(js, string(b))
			rc := rs[i]
			rc.Positions = slices.Clone(rc.Positions)
			recs = append(recs, rc)
		}
	}
	for _, l := range lines {
		rs, err := r.Line(l)
		if err != nil {
			t.Fatalf("%v", err)
		}
		add(rs)
	}
	if final != nil {
		add(r.Finish(*final))
	}
	return recs, js
}

// explains checks that the trace accounts for every record: a match is a
// partial match's completion whose events, followed through the trace
// from its start (takes, and the branches it came from), are the
// record's, in order; a timeout is a drop of a partial match whose window
// ran out at the record's timeoutAt, holding the record's events (when
// timeouts are records: not for MATCH_RECOGNIZE); a late record is a late
// event. It returns what it could not explain.
func explains(trace []traced, recs []nfa.Record, timeouts bool) error {
	hist := map[string][]uint64{}
	type ended struct {
		kind, key string
		at        int64
		pos       string
	}
	var got []ended
	for _, t := range trace {
		e := &t.e
		switch e.Kind {
		case nfa.TraceStart:
			hist[e.PM] = []uint64{e.Pos}
		case nfa.TraceExtend, nfa.TraceMove:
			h := hist[e.PM]
			if e.From != "" {
				h = slices.Clone(hist[e.From])
			}
			if e.Kind == nfa.TraceExtend {
				h = append(h, e.Pos)
			}
			hist[e.PM] = h
		case nfa.TraceComplete:
			if !slices.Equal(hist[e.PM], t.pos) {
				return fmt.Errorf("%s completed %s, but its trace took the events at %v", e.PM, t.record, hist[e.PM])
			}
			got = append(got, ended{"match", e.Key, 0, fmt.Sprint(t.pos)})
			delete(hist, e.PM)
		case nfa.TraceDrop:
			if timeouts && (e.Reason == nfa.DropWithin || e.Reason == nfa.DropWindow) {
				got = append(got, ended{"timeout", e.Key, e.Deadline, fmt.Sprint(hist[e.PM])})
			}
			delete(hist, e.PM)
		case nfa.TraceLate:
			got = append(got, ended{"late", e.Key, 0, fmt.Sprint([]uint64{e.Pos})})
		}
	}
	var want []ended
	for _, r := range recs {
		switch r.Type {
		case "match":
			want = append(want, ended{"match", r.Key, 0, fmt.Sprint(r.Positions)})
		case "timeout":
			want = append(want, ended{"timeout", r.Key, r.TimeoutAt, fmt.Sprint(r.Positions)})
		case "late":
			want = append(want, ended{"late", r.Key, 0, fmt.Sprint(r.Positions)})
		}
	}
	str := func(l []ended) []string {
		var out []string
		for _, e := range l {
			out = append(out, fmt.Sprintf("%s %s %d %s", e.kind, e.key, e.at, e.pos))
		}
		return out
	}
	if onlyRecs, onlyTrace := multisetDiff(str(want), str(got)); len(onlyRecs)+len(onlyTrace) > 0 {
		return fmt.Errorf("records the trace does not explain: %q; ends in the trace without a record: %q", onlyRecs, onlyTrace)
	}
	return nil
}

// endsOnly checks that the trace has an end for each record: a
// completion for each match, a drop at its deadline for each timeout, a
// late event for each late record.
func endsOnly(trace []traced, recs []nfa.Record) error {
	var want, got []string
	for _, r := range recs {
		switch r.Type {
		case "match":
			want = append(want, "match "+r.Key)
		case "timeout":
			want = append(want, fmt.Sprintf("timeout %s %d", r.Key, r.TimeoutAt))
		case "late":
			want = append(want, "late "+r.Key)
		}
	}
	for _, t := range trace {
		switch e := &t.e; {
		case e.Kind == nfa.TraceComplete:
			got = append(got, "match "+e.Key)
		case e.Kind == nfa.TraceDrop && (e.Reason == nfa.DropWithin || e.Reason == nfa.DropWindow):
			got = append(got, fmt.Sprintf("timeout %s %d", e.Key, e.Deadline))
		case e.Kind == nfa.TraceLate:
			got = append(got, "late "+e.Key)
		}
	}
	if onlyRecs, onlyTrace := multisetDiff(want, got); len(onlyRecs)+len(onlyTrace) > 0 {
		return fmt.Errorf("records without their end in the trace: %q; ends in the trace without a record: %q", onlyRecs, onlyTrace)
	}
	return nil
}

// Tracing changes no record and no statistic, on random patterns and
// inputs, set from the start or from any line on, and a trace from the
// start explains every record.
func TestTraceOnOffSameRecords(t *testing.T) {
	converted := 0 // runs that set the tracer on keys under the sequence step
	checkCovering(t, func() bool { return converted > 0 }, func(t *rapid.T) {
		var p *nfa.Pattern
		var lines [][]byte
		if rapid.Bool().Draw(t, "seqShape") {
			// a sequence of single-event stages (the sequence step)
			p, lines = compileOrSkip(t, genSeqSpec(t)), genManyKeysInput(t)
		} else {
			p = compileOrSkip(t, genSpec(t, rapid.SampledFrom([]string{"noSkip", "skipPastLastEvent", "skipToNext", "skipToFirst:s0", "skipToLast:s1"}).Draw(t, "skip")))
			lines = genInput(t)
		}
		cfg := nfa.DefaultConfig()
		if rapid.IntRange(0, 3).Draw(t, "bounded") == 0 {
			cfg.MaxPartialMatches = rapid.IntRange(1, 4).Draw(t, "maxPartial")
		}
		off, on := nfa.NewRunnerWith(cfg, p), nfa.NewRunnerWith(cfg, p)
		// from the start, or from a line on (a key's state then made
		// without the tracer, under the sequence step as the case may be)
		from := 0
		if rapid.Bool().Draw(t, "lateStart") {
			from = rapid.IntRange(0, len(lines)).Draw(t, "from")
		}
		var trace []traced
		keep := collect(&trace)
		var text, js bytes.Buffer
		tw, jw := nfa.NewTraceWriter(&text, false), nfa.NewTraceWriter(&js, true)
		tracer := func(e *nfa.TraceEntry) { keep(e); tw.Trace(e); jw.Trace(e) }
		if from == 0 {
			on.SetTracer(tracer)
		}
		_, want := runTraced(t, off, lines, true)
		recs0, got := runTracedTo(t, on, lines[:from], nil)
		if from > 0 && nfa.SeqPattern(p) && on.Matchers()[0].Keys() > 0 {
			converted++
		}
		on.SetTracer(tracer)
		recs, got1 := runTraced(t, on, lines[from:], true)
		got = append(got, got1...)
		if !slices.Equal(want, got) {
			t.Fatalf("records differ with tracing:\noff: %q\non:  %q", want, got)
		}
		if a, b := off.Matchers()[0].Stats(), on.Matchers()[0].Stats(); a != b {
			t.Fatalf("statistics differ with tracing: off %+v, on %+v", a, b)
		}
		if from == 0 && len(recs0) == 0 {
			if err := explains(trace, recs, true); err != nil {
				t.Fatal(err)
			}
		} else if err := endsOnly(trace, recs); err != nil {
			// partial matches started before the tracer: what they took
			// is not in the trace, but how they ended is
			t.Fatal(err)
		}
		tw.Flush()
		if n := strings.Count(js.String(), "\n"); n != len(trace) {
			t.Fatalf("%d JSON lines for %d entries", n, len(trace))
		}
	})
	if converted == 0 {
		t.Error("no run set the tracer on keys under the sequence step")
	}
	t.Logf("%d runs set the tracer on keys under the sequence step", converted)
}

// The trace of every runnable conformance case explains its output:
// each expected match is a partial match that took its events in order,
// each timeout a drop at its deadline (the case's records are checked
// against Flink's expectations as TestConformance does).
func TestTraceExplainsConformanceCases(t *testing.T) {
	cases, err := conformance.Load("../testdata/conformance")
	if err != nil {
		t.Fatal(err)
	}
	known := knownDifferences(t)
	ran := 0
	for _, c := range cases {
		if c.Skip || c.Expect.Error != nil || known[c.File] != "" {
			continue
		}
		p, err := compileCase(c)
		if err != nil {
			continue
		}
		t.Run(c.File, func(t *testing.T) {
			r := nfa.NewRunner(p)
			var trace []traced
			r.SetTracer(collect(&trace))
			recs, js := runTraced(t, r, bytes.Split(c.InputLines(), []byte("\n")), c.Final())
			var crs []conformance.Record
			for _, j := range js {
				var cr conformance.Record
				if err := json.Unmarshal([]byte(j), &cr); err != nil {
					t.Fatal(err)
				}
				crs = append(crs, cr)
			}
			if ok, why := c.CheckRecords(crs); !ok {
				t.Fatalf("traced, the case fails: %s", why)
			}
			if err := explains(trace, recs, !c.IsSQL()); err != nil {
				t.Fatal(err)
			}
		})
		ran++
	}
	if ran < 50 {
		t.Fatalf("only %d cases ran", ran)
	}
}

// The trace of the README's quick start names every stage, shows acc-1's
// match taking its four events, and shows why acc-3 did not match: its
// partial match took the login and the failed payment, waited at failed
// (for another failure or the logout) and ran out of its 5 minutes.
func TestTraceQuickStart(t *testing.T) {
	doc, err := os.ReadFile("../examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	input, err := os.ReadFile("../examples/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	p, err := nfa.CompileBytes(doc)
	if err != nil {
		t.Fatal(err)
	}
	r := nfa.NewRunner(p)
	var buf bytes.Buffer
	tw := nfa.NewTraceWriter(&buf, false)
	var trace []traced
	keep := collect(&trace)
	r.SetTracer(func(e *nfa.TraceEntry) { keep(e); tw.Trace(e) })
	recs, _ := runTraced(t, r, bytes.Split(bytes.TrimSpace(input), []byte("\n")), true)
	tw.Flush()
	text := buf.String()
	for _, st := range p.Spec().Stages {
		if !strings.Contains(text, " "+st.Name) {
			t.Errorf("the trace does not name stage %s:\n%s", st.Name, text)
		}
	}
	if err := explains(trace, recs, true); err != nil {
		t.Fatal(err)
	}
	// acc-1: one partial match from the login to the match
	var acc1, acc3 []string
	for _, tr := range trace {
		e := tr.e
		line := fmt.Sprintf("%s %s %s %d", e.Kind, e.PM, e.State, e.Pos)
		if e.Kind == nfa.TraceDrop {
			line = fmt.Sprintf("%s %s %s %s %d", e.Kind, e.PM, e.State, e.Reason, e.Deadline)
		}
		switch {
		case e.PM == "" || e.Kind == nfa.TraceCheck:
		case e.Key == "acc-1":
			acc1 = append(acc1, line)
		case e.Key == "acc-3":
			acc3 = append(acc3, line)
		}
	}
	pm1 := firstPM(trace, "acc-1")
	wantAcc1 := []string{
		"start " + pm1 + " failed:0 1",
		"extend " + pm1 + " failed 3",
		"extend " + pm1 + " failed 5",
		"extend " + pm1 + " $endState$ 6",
		"complete " + pm1 + "  0",
	}
	if !slices.Equal(acc1, wantAcc1) {
		t.Errorf("acc-1's partial matches: %q, want %q", acc1, wantAcc1)
	}
	pm3 := firstPM(trace, "acc-3")
	wantAcc3 := []string{
		"start " + pm3 + " failed:0 7",
		"extend " + pm3 + " failed 8",
		"drop " + pm3 + " failed within 305000", // login at 5000 + 5m
	}
	if !slices.Equal(acc3, wantAcc3) {
		t.Errorf("acc-3's partial matches: %q, want %q", acc3, wantAcc3)
	}
	// waiting at failed for another failure or the logout
	if !regexp.MustCompile(`(?m)^  ` + pm3 + ` +dropped +in failed, waiting for logout or failed +within ran out at 305000$`).MatchString(text) {
		t.Errorf("the trace does not show acc-3's timeout:\n%s", text)
	}
}

func firstPM(trace []traced, key string) string {
	for _, t := range trace {
		if t.e.Key == key && t.e.Kind == nfa.TraceStart {
			return t.e.PM
		}
	}
	return ""
}

// TraceDocument traces a document as TraceLines traces its compiled
// pattern, keeps to the key its writer keeps, and says what is wrong with
// a bad document or line.
func TestTraceDocument(t *testing.T) {
	doc := []byte(`{"name":"ab","key":"e.k","time":"e.ts","stages":[{"name":"a","where":"e.t == \"A\""},{"name":"b","contiguity":"followedBy","where":"e.t == \"B\""}]}`)
	lines := [][]byte{[]byte(`{"k":"x","t":"A","ts":1}`), []byte(`{"k":"y","t":"A","ts":2}`), []byte(`{"k":"x","t":"B","ts":3}`)}
	p, err := nfa.CompileBytes(doc)
	if err != nil {
		t.Fatal(err)
	}
	var want, got bytes.Buffer
	if err := nfa.TraceLines(nfa.DefaultConfig(), []*nfa.Pattern{p}, lines, true, nfa.NewTraceWriter(&want, true), nil); err != nil {
		t.Fatal(err)
	}
	tw := nfa.NewTraceWriter(&got, true)
	tw.Keep = func(e *nfa.TraceEntry) bool { return e.Key == "x" }
	var matches int
	if err := nfa.TraceDocument(nfa.DefaultConfig(), doc, lines, true, tw, func(recs []nfa.Record) error {
		for _, r := range recs {
			if r.Type == "match" {
				matches++
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var x []string
	for _, l := range strings.SplitAfter(want.String(), "\n") {
		if strings.Contains(l, `"key":"x"`) {
			x = append(x, l)
		}
	}
	if got.String() != strings.Join(x, "") || matches != 1 {
		t.Errorf("%d matches, trace of x:\n%s\nwant:\n%s", matches, got.String(), strings.Join(x, ""))
	}
	if err := nfa.TraceDocument(nfa.DefaultConfig(), []byte(`{"name":"bad","stages":[]}`), lines, true, nfa.NewTraceWriter(&got, true), nil); err == nil {
		t.Error("a document without stages traced")
	}
	err = nfa.TraceDocument(nfa.DefaultConfig(), doc, [][]byte{lines[0], []byte(`{"k":`)}, true, nfa.NewTraceWriter(&got, true), nil)
	if ie, ok := err.(*nfa.InputError); !ok || ie.Line != 2 {
		t.Errorf("a bad second line: %v", err)
	}
}
