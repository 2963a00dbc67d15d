package shard

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/cepcluster/cep/nfa"
)

// The shard and the offline engine (nfa.Runner, what `cepctl run`
// drives) run one event pipeline: fed the same events read at the same
// ingest times, a shard owning every key group writes the records and
// dead letters the runner prints, in the same order. The input passes
// every exit both have: matches, timeouts, late events, times refused at
// the end of the range, against the ingest time and against the source's
// event time, by one pattern or by both (one dead letter listing both).
func TestShardAgreesWithOfflineRunner(t *testing.T) {
	specs := []string{ // by name, the order a shard runs them in
		`{"name":"ab","source":"src","key":"e.k","time":"e.ts","within":"10s",
		  "stages":[{"name":"a","where":"e.t == 'A'"},{"name":"b","where":"e.t == 'B'","contiguity":"followedBy"}]}`,
		`{"name":"cd","source":"src","key":"e.k","time":"e.ts","within":"5s","maxFutureSkew":"1h",
		  "stages":[{"name":"c","where":"e.t == 'C'"},{"name":"d","where":"e.t == 'D'","contiguity":"followedBy"}]}`,
	}
	const t0 = int64(1_764_633_600_000) // 2025-12-02T00:00:00Z
	const hour, day = int64(3_600_000), int64(24 * 3_600_000)
	entries := []struct {
		ingest int64
		events []Event
	}{
		{t0, []Event{
			ev(1, "x", "A", t0+1000),
			ev(2, "x", "B", t0+2000),        // ab: a match
			ev(3, "y", "A", t0+3000),        // ab: times out
			ev(4, "x", "C", t0+4000),        //
			ev(5, "x", "D", t0+4500),        // cd: a match, once y's C comes
			ev(6, "z", "A", t0+hour+hour/2), // cd: past maxFutureSkew of the ingest time
			ev(7, "w", "A", math.MaxInt64),  // both: the end of the range
			ev(8, "x", "A", t0+500),         // both: late
			ev(9, "v", "C", t0+day),         // cd: a day ahead of the ingest time
			ev(10, "u", "C", math.MinInt64), // both: the start of the range
			ev(11, "u", "A", t0+day+hour),   // ab: past the ingest time by more than a day
			ev(12, "y", "C", t0+10000),      // ab: late; cd: completes x's match
		}},
		{t0 + day, []Event{
			ev(13, "x", "A", t0+day+1000),
			ev(14, "x", "B", t0+day+2000), // ab: a match
			ev(15, "x", "C", t0+day+3000), // cd: a day ahead of the source's event time
			ev(16, "q", "A", t0+day+9*hour),
		}},
	}

	s := NewState(0, 15, 16) // every key group: one watermark, as offline
	var patterns []*nfa.Pattern
	for _, spec := range specs {
		s.Apply(&Batch{Ops: []Op{deployOp(spec, 1, PolicyReset)}})
		p, err := nfa.CompileBytes([]byte(spec))
		if err != nil {
			t.Fatal(err)
		}
		patterns = append(patterns, p)
	}
	r := nfa.NewRunner(patterns...)
	var wantRecs, wantDead []string
	for _, e := range entries {
		eo := eventsOp(e.events...)
		eo.Ingest = e.ingest
		s.Apply(&Batch{Ops: []Op{eo}})

		r.IngestTime = func() int64 { return e.ingest }
		for _, ev := range e.events {
			recs, err := r.Line(ev.Data)
			if err != nil {
				t.Fatal(err)
			}
			for i := range recs {
				b, _ := recs[i].AppendJSON(nil)
				wantRecs = append(wantRecs, string(b))
			}
			if d := r.DeadLetters(); len(d) > 0 {
				wantDead = append(wantDead, asShardDeadLetter(d))
			}
		}
	}

	var gotRecs, gotDead []string
	for _, o := range s.Outbox() {
		switch o.Subject {
		case "cep.out.ab", "cep.out.cd":
			gotRecs = append(gotRecs, idField.ReplaceAllString(string(o.Payload), ""))
		case DeadLetterSubject("src"):
			gotDead = append(gotDead, string(o.Payload))
		default:
			t.Fatalf("record on %s: %s", o.Subject, o.Payload)
		}
	}
	if a, b := strings.Join(gotRecs, "\n"), strings.Join(wantRecs, "\n"); a != b {
		t.Fatalf("shard records:\n%s\noffline:\n%s", a, b)
	}
	if a, b := strings.Join(gotDead, "\n"), strings.Join(wantDead, "\n"); a != b {
		t.Fatalf("shard dead letters:\n%s\noffline:\n%s", a, b)
	}

	// and what they agree on is what the input asks for
	types := map[string]int{}
	for _, rec := range gotRecs {
		var x struct{ Type, Pattern string }
		json.Unmarshal([]byte(rec), &x)
		types[x.Pattern+" "+x.Type]++
	}
	if want := map[string]int{"ab match": 2, "ab timeout": 2, "ab late": 2, "cd match": 1, "cd late": 1}; !equalCounts(types, want) {
		t.Errorf("records %v, want %v:\n%s", types, want, strings.Join(gotRecs, "\n"))
	}
	var reasons []string
	for _, d := range gotDead {
		var x struct {
			Position uint64
			Pattern  string
			Refusals []refusal
		}
		json.Unmarshal([]byte(d), &x)
		reasons = append(reasons, strings.Repeat("+", len(x.Refusals))+x.Pattern)
	}
	if got, want := strings.Join(reasons, " "), "cd ++ab cd ++ab ++ab cd cd cd cd"; got != want {
		t.Errorf("dead letters by pattern %q, want %q:\n%s", got, want, strings.Join(gotDead, "\n"))
	}
	if c := s.Counters(); c.DeadLetters != uint64(len(wantDead)) || c.Late != 3 || c.Events != 16 {
		t.Errorf("counters %+v", c)
	}
}

// asShardDeadLetter is the dead letter a shard publishes for an event the
// runner's patterns refused: one for the event, with the first refusal's
// pattern and reason and, for several, all of them.
func asShardDeadLetter(d []nfa.DeadLetter) string {
	rec := struct {
		Source   string          `json:"source"`
		Pattern  string          `json:"pattern,omitempty"`
		Position uint64          `json:"position"`
		Reason   string          `json:"reason"`
		Refusals []refusal       `json:"refusals,omitempty"`
		Data     json.RawMessage `json:"data,omitempty"`
	}{Source: d[0].Source, Pattern: d[0].Pattern, Position: d[0].Position, Reason: d[0].Reason, Data: d[0].Data}
	if len(d) > 1 {
		for _, x := range d {
			rec.Refusals = append(rec.Refusals, refusal{Pattern: x.Pattern, Reason: x.Reason})
		}
	}
	b, _ := json.Marshal(rec)
	return string(b)
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
