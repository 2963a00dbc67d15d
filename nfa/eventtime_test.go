package nfa_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/nfa/expr"
	"github.com/cepcluster/cep/watermark"
)

const skewPattern = `{"name":"skew","source":"logins","key":"e.k","time":"e.ts","within":"10s",
 "stages":[{"name":"a","where":"e.t == 'A'"},{"name":"b","where":"e.t == 'B'","contiguity":"followedBy"}]}`

func runSkewLines(t *testing.T, doc string, lines []string) (recs []nfa.Record, dead []nfa.DeadLetter, wm int64) {
	t.Helper()
	p, err := nfa.CompileBytes([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	r := nfa.NewRunner(p)
	for _, l := range lines {
		out, err := r.Line([]byte(l))
		if err != nil {
			t.Fatalf("line %s: %v", l, err)
		}
		for _, rec := range out {
			// the records' lists are reused by the next call
			recs = append(recs, nfa.Record{Type: rec.Type, Key: rec.Key, Positions: append([]uint64(nil), rec.Positions...), Start: rec.Start})
		}
		for _, d := range r.DeadLetters() {
			d.Data = append(json.RawMessage(nil), d.Data...)
			dead = append(dead, d)
		}
	}
	return recs, dead, r.Matchers()[0].CurrentWatermark()
}

// One event at the end of time must not make every later event late: it is
// refused with a reason, and the watermark stays where the other events
// put it (before, it jumped to MaxInt64 − 1 and the match below was late).
func TestEndOfTimeEventIsRefused(t *testing.T) {
	recs, dead, wm := runSkewLines(t, skewPattern, []string{
		`{"k":"x","t":"A","ts":1000}`,
		`{"k":"y","t":"A","ts":9223372036854775807}`,
		`{"k":"x","t":"B","ts":2000}`,
		`{"k":"z","t":"A","ts":3000}`,
	})
	if len(dead) != 1 || dead[0].Position != 2 || dead[0].Pattern != "skew" || dead[0].Source != "logins" {
		t.Fatalf("dead letters %+v, want line 2 only", dead)
	}
	if !strings.Contains(dead[0].Reason, "time 9223372036854775807") || !strings.Contains(dead[0].Reason, "maxFutureSkew = 24h0m0s") {
		t.Fatalf("reason %q does not name the time and the bound", dead[0].Reason)
	}
	if wm != 3000-1 {
		t.Fatalf("watermark %d, want 2999 (the refused event must not move it)", wm)
	}
	var matches, late int
	for _, r := range recs {
		switch r.Type {
		case "match":
			matches++
			if r.Key != "x" || fmt.Sprint(r.Positions) != "[1 3]" {
				t.Fatalf("match %+v, want key x of lines 1 and 3", r)
			}
		case "late":
			late++
		}
	}
	if matches != 1 || late != 0 {
		t.Fatalf("%d matches, %d late records, want 1 and 0: %+v", matches, late, recs)
	}
}

func TestMaxFutureSkewBound(t *testing.T) {
	doc := strings.Replace(skewPattern, `"within":"10s",`, `"within":"10s","maxFutureSkew":"1h","outOfOrderness":"5s",`, 1)
	hour := int64(3600_000)
	_, dead, wm := runSkewLines(t, doc, []string{
		`{"k":"x","t":"A","ts":1000}`,
		fmt.Sprintf(`{"k":"x","t":"A","ts":%d}`, 1000+hour),     // exactly the bound ahead of the latest time: taken
		fmt.Sprintf(`{"k":"x","t":"A","ts":%d}`, 1000+2*hour+1), // 1h + 1ms ahead of it: refused
		fmt.Sprintf(`{"k":"x","t":"A","ts":%d}`, 1000+2*hour),   // taken
	})
	if len(dead) != 1 || dead[0].Position != 3 {
		t.Fatalf("dead letters %+v, want line 3 only", dead)
	}
	want := fmt.Sprintf("pattern skew: time %d is 1h0m0.001s ahead of source logins's event time %d, more than maxFutureSkew = 1h0m0s", 1000+2*hour+1, 1000+hour)
	if !strings.HasPrefix(dead[0].Reason, want) {
		t.Fatalf("reason %q\nwant prefix %q", dead[0].Reason, want)
	}
	if want := 1000 + 2*hour - 5000 - 1; wm != want {
		t.Fatalf("watermark %d, want %d", wm, want)
	}
}

func TestMaxFutureSkewField(t *testing.T) {
	p, err := nfa.CompileBytes([]byte(skewPattern))
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxFutureSkew() != nfa.DefaultMaxFutureSkew || nfa.DefaultMaxFutureSkew != 86400000 {
		t.Fatalf("default %d, constant %d", p.MaxFutureSkew(), nfa.DefaultMaxFutureSkew)
	}
	p, err = nfa.CompileBytes([]byte(strings.Replace(skewPattern, `"within"`, `"maxFutureSkew":"2d","within"`, 1)))
	if err != nil || p.MaxFutureSkew() != 2*86400000 {
		t.Fatalf("2d: %v %v", p, err)
	}
	for _, bad := range []string{`0`, `"0s"`, `-5`, `"soon"`} {
		_, err := nfa.CompileBytes([]byte(strings.Replace(skewPattern, `"within"`, `"maxFutureSkew":`+bad+`,"within"`, 1)))
		if err == nil || !strings.Contains(err.Error(), "maxFutureSkew") && !strings.Contains(err.Error(), "duration") {
			t.Fatalf("maxFutureSkew %s: err %v", bad, err)
		}
	}
}

// Each source of several has its own clock: an event is compared with its
// own source's, so a source that runs ahead does not make another's
// events look far-future, nor is a far-future one of either taken.
func TestMaxFutureSkewPerSource(t *testing.T) {
	doc := `{"name":"two","source":["a","b"],"key":"e.k","time":"e.ts","maxFutureSkew":"1m",
	 "stages":[{"name":"x","where":"e.t == 'A'"},{"name":"y","where":"e.t == 'B'"}]}`
	p, err := nfa.CompileBytes([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	m := nfa.NewMatcher(p)
	ev := func(src string, ts int64) error {
		in := nfa.Input{Data: expr.Event{"k": "k", "t": "A", "ts": ts}}
		got, err := m.TimeFrom(src, in)
		if err != nil {
			return err
		}
		if got != ts {
			t.Fatalf("time %d, want %d", got, ts)
		}
		m.EventFrom(src, "k", ts, in)
		return nil
	}
	if err := ev("a", 1_000_000); err != nil {
		t.Fatal(err)
	}
	if err := ev("b", 10_000); err != nil { // b's first event sets b's clock
		t.Fatal(err)
	}
	if err := ev("b", 10_000+60_001); err == nil || !strings.Contains(err.Error(), "source b's event time 10000") {
		t.Fatalf("b far ahead of b: %v", err)
	}
	if err := ev("a", 1_000_000+60_000); err != nil {
		t.Fatal(err)
	}
}

// Whatever event times arrive — also at the very ends of int64, which
// CheckTime would refuse — the engine never panics, its watermark never
// goes back, and no timeout is dated before the partial match it ends
// (a deadline that wrapped round).
func TestExtremeTimesNeverWrap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := &nfa.Spec{Name: "p", Key: "e.k", Time: "e.ts",
			OutOfOrderness: &nfa.Duration{Millis: rapid.SampledFrom([]int64{0, 1, 1000, math.MaxInt64 / 2, 1e15}).Draw(t, "ooo")},
			Within:         &nfa.Duration{Millis: rapid.SampledFrom([]int64{1, 10, 1000, 1e15}).Draw(t, "within")},
			Stages: []nfa.Stage{{Name: "a", Where: "e.t == 'A'"},
				{Name: "b", Where: "e.t == 'B'", Contiguity: "followedBy", OneOrMore: rapid.Bool().Draw(t, "loop"),
					Window: &nfa.Duration{Millis: rapid.SampledFrom([]int64{1, 5, 1e15}).Draw(t, "window")}},
				{Name: "c", Where: "e.t == 'C'", Contiguity: rapid.SampledFrom([]string{"followedBy", "notFollowedBy"}).Draw(t, "last")}},
		}
		p, err := nfa.Compile(spec)
		if err != nil {
			t.Skip(err)
		}
		m := nfa.NewMatcher(p)
		check := rapid.Bool().Draw(t, "checked")
		times := rapid.SliceOfN(rapid.OneOf(
			rapid.Int64Range(math.MaxInt64-20, math.MaxInt64),
			rapid.Int64Range(math.MinInt64, math.MinInt64+20),
			rapid.Int64Range(-50, 50),
			rapid.Int64(),
		), 1, 40).Draw(t, "times")
		prev := m.CurrentWatermark()
		bounded := func(recs []nfa.Record, at string) {
			for _, r := range recs {
				if r.Type == "timeout" && r.TimeoutAt < r.Start {
					t.Fatalf("%s: timeout at %d before its start %d: a wrapped deadline", at, r.TimeoutAt, r.Start)
				}
			}
			if wm := m.CurrentWatermark(); wm < prev {
				t.Fatalf("%s: watermark went back from %d to %d", at, prev, wm)
			} else {
				prev = wm
			}
		}
		for i, ts := range times {
			typ := []string{"A", "B", "C"}[i%3]
			if rapid.IntRange(0, 9).Draw(t, "wm") == 0 {
				bounded(m.Watermark(ts), fmt.Sprintf("watermark %d", ts))
				continue
			}
			in := nfa.Input{Data: expr.Event{"k": "k", "t": typ, "ts": ts}, Pos: uint64(i + 1)}
			if check {
				if err := m.CheckTime("", ts); err != nil {
					if !nfa.IsTimeError(err) {
						t.Fatalf("not a TimeError: %v", err)
					}
					continue
				}
				if ts > math.MaxInt64-p.MaxFutureSkew() || ts <= math.MinInt64+p.MaxFutureSkew() {
					t.Fatalf("time %d taken, within maxFutureSkew of an end of int64", ts)
				}
			}
			bounded(m.EventAt("k", ts, in), fmt.Sprintf("event %d at %d", i, ts))
		}
		bounded(m.Finish(false), "finish")
		bounded(m.Finish(true), "final watermark")
		if m.CurrentWatermark() != watermark.MaxTime {
			t.Fatalf("final watermark %d", m.CurrentWatermark())
		}
	})
}

// The ingest time bounds an event's time from above by exactly
// maxFutureSkew, whatever the events before moved the source's clock to;
// without one (NoIngestTime) only the source's event time bounds it.
func TestIngestTimeBound(t *testing.T) {
	p, err := nfa.CompileBytes([]byte(skewPattern))
	if err != nil {
		t.Fatal(err)
	}
	m := nfa.NewMatcher(p)
	day := nfa.DefaultMaxFutureSkew
	const ingest = int64(1_764_633_600_000)
	// the clock at ingest + 23h, taken
	if _, err := m.Event(nfa.Input{Data: map[string]any{"k": "r", "t": "C", "ts": ingest + day - 3_600_000}, Pos: 1}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ts, ingest int64
		refused    bool
	}{
		{ingest + day, ingest, false},
		{ingest + day + 1, ingest, true},
		{ingest + day + 1, nfa.NoIngestTime, false}, // 1h ahead of the clock
		{ingest - 365*day, ingest, false},           // the past is the watermark's to judge
		{ingest + day + 1, ingest + 1, false},
	} {
		err := m.CheckTimeAt("", c.ts, c.ingest)
		if refused := err != nil; refused != c.refused || (err != nil && !nfa.IsTimeError(err)) {
			t.Errorf("ts %d ingest %d: %v, want refused %v", c.ts, c.ingest, err, c.refused)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("ahead of the time it was read at (ingest time %d), more than maxFutureSkew = 24h0m0s", c.ingest)) {
			t.Errorf("reason %q does not name the ingest time and the bound", err)
		}
	}
}
