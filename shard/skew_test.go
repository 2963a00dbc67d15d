package shard

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/snapshot"
)

var idField = regexp.MustCompile(`,"id":"[0-9a-f]+"`)

// Event times that are refused (far ahead of the source's event time, or
// at either end of int64) are dead-lettered by a shard exactly as the
// offline engine (nfa.Runner, what `cepctl run` drives) reports them, and
// the records of the other events are the same too: the shard's watermark
// did not jump. Before, the event at MaxInt64 was taken and every later
// event came out late.
func TestFarFutureEventsAsOffline(t *testing.T) {
	const spec = `{"name":"skew","source":"src","key":"e.k","time":"e.ts","within":"10s",
	 "stages":[{"name":"a","where":"e.t == 'A'"},{"name":"b","where":"e.t == 'B'","contiguity":"followedBy"}]}`
	day := nfa.DefaultMaxFutureSkew
	events := []Event{
		ev(1, "x", "A", 1000),
		ev(2, "y", "A", math.MaxInt64),
		ev(3, "x", "B", 2000),
		ev(4, "y", "A", 2000+day+1), // a day and a millisecond ahead
		ev(5, "z", "A", math.MinInt64),
		ev(6, "z", "A", 3000),
		ev(7, "z", "B", 4000),
		ev(8, "w", "C", 20000),
	}
	s := NewState(0, 15, 16) // all key groups: one watermark, as offline
	op := deployOp(spec, 1, PolicyReset)
	op.Sources = []string{"src"}
	s.Apply(&Batch{Ops: []Op{op}})
	s.Apply(&Batch{Ops: []Op{eventsOp(events[:3]...)}})
	// a replica restored from a snapshot taken here refuses the same
	// events: the bound depends on the replicated state alone
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf, snapshot.Header{ID: "s", Kind: snapshot.KindRaftSnapshot, ClusterID: "c", CreatedIndex: 1, Shards: 1}); err != nil {
		t.Fatal(err)
	}
	sr, err := snapshot.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	restored, err := RestoreState([]*snapshot.Reader{sr}, 0, 15)
	if err != nil {
		t.Fatal(err)
	}
	s.Apply(&Batch{Ops: []Op{eventsOp(events[3:]...)}})
	restored.Apply(&Batch{Ops: []Op{eventsOp(events[3:]...)}})
	if a, b := strings.Join(payloads(s), "\n"), strings.Join(payloads(restored), "\n"); a != b {
		t.Fatalf("restored replica's outbox:\n%s\nthe original's:\n%s", b, a)
	}

	var gotRecs, gotDead []string
	for _, r := range s.Outbox() {
		switch r.Subject {
		case "cep.out.skew":
			gotRecs = append(gotRecs, idField.ReplaceAllString(string(r.Payload), ""))
		case DeadLetterSubject("src"):
			gotDead = append(gotDead, string(r.Payload))
		default:
			t.Fatalf("record on %s: %s", r.Subject, r.Payload)
		}
	}

	p, err := nfa.CompileBytes([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	r := nfa.NewRunner(p)
	var wantRecs, wantDead []string
	for _, e := range events {
		recs, err := r.Line(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		for i := range recs {
			b, _ := recs[i].AppendJSON(nil)
			wantRecs = append(wantRecs, string(b))
		}
		for _, d := range r.DeadLetters() {
			b, _ := json.Marshal(d)
			wantDead = append(wantDead, string(b))
		}
	}
	if len(wantDead) != 3 || !strings.Contains(wantDead[0], "maxFutureSkew = 24h0m0s") || !strings.Contains(wantDead[1], "more than maxFutureSkew") {
		t.Fatalf("offline dead letters:\n%s", strings.Join(wantDead, "\n"))
	}
	if len(wantRecs) != 2 || strings.Contains(strings.Join(wantRecs, ""), `"late"`) {
		t.Fatalf("offline records (want two matches):\n%s", strings.Join(wantRecs, "\n"))
	}
	if a, b := strings.Join(gotRecs, "\n"), strings.Join(wantRecs, "\n"); a != b {
		t.Fatalf("shard records:\n%s\noffline:\n%s", a, b)
	}
	if a, b := strings.Join(gotDead, "\n"), strings.Join(wantDead, "\n"); a != b {
		t.Fatalf("shard dead letters:\n%s\noffline:\n%s", a, b)
	}
	if wm, want := s.Patterns()[0].Watermark, r.Matchers()[0].CurrentWatermark(); wm != want || wm != 20000-1 {
		t.Fatalf("shard watermark %d, offline %d, want 19999", wm, want)
	}
	if c := s.Counters(); c.DeadLetters != 3 || c.Late != 0 {
		t.Fatalf("counters %+v", c)
	}
}

// Thirty events each 23h59m after the one before cannot carry a shard's
// event time a month ahead: each is measured against the ingest time the
// leader logged in the entry, which no event moves, so only the first
// step (within maxFutureSkew of the wall clock) is taken and every later
// one is dead-lettered naming that bound; a day later the real events
// match instead of coming out late (before, the watermark stood 30 days
// ahead). The shard decides exactly as the offline engine given the same
// ingest times.
func TestEventTimeRatchetRefusedAsOffline(t *testing.T) {
	const spec = `{"name":"skew","source":"src","key":"e.k","time":"e.ts","within":"10s",
	 "stages":[{"name":"a","where":"e.t == 'A'"},{"name":"b","where":"e.t == 'B'","contiguity":"followedBy"}]}`
	const t0 = int64(1_764_633_600_000) // 2025-12-02T00:00:00Z
	day := int64(24 * 60 * 60_000)
	step := day - 60_000 // 23h59m
	var attack []Event
	for i := range 31 {
		attack = append(attack, ev(uint64(i+1), "r", "C", t0+int64(i)*step))
	}
	// a day later, in wall time
	real := []Event{ev(32, "x", "A", t0+day+1000), ev(33, "x", "B", t0+day+2000), ev(34, "w", "C", t0+day+20000)}
	entries := []struct {
		events []Event
		ingest int64
	}{{attack, t0}, {real, t0 + day}}

	s := NewState(0, 15, 16)
	op := deployOp(spec, 1, PolicyReset)
	op.Sources = []string{"src"}
	s.Apply(&Batch{Ops: []Op{op}})
	for _, e := range entries {
		eo := eventsOp(e.events...)
		eo.Ingest = e.ingest
		logged, err := DecodeBatch((&Batch{Ops: []Op{eo}}).Encode(nil))
		if err != nil || logged.Ops[0].(EventsOp).Ingest != e.ingest {
			t.Fatalf("the ingest time does not survive the log: %v, %+v", err, logged)
		}
		s.Apply(logged)
	}

	var gotRecs, gotDead []string
	for _, r := range s.Outbox() {
		switch r.Subject {
		case "cep.out.skew":
			gotRecs = append(gotRecs, idField.ReplaceAllString(string(r.Payload), ""))
		case DeadLetterSubject("src"):
			gotDead = append(gotDead, string(r.Payload))
		}
	}
	if len(gotRecs) != 1 || !strings.Contains(gotRecs[0], `"type":"match"`) {
		t.Fatalf("records after the ratchet, want x's match and nothing late:\n%s", strings.Join(gotRecs, "\n"))
	}
	if len(gotDead) != 29 || !strings.Contains(gotDead[0], "ahead of the time it was read at (ingest time 1764633600000), more than maxFutureSkew = 24h0m0s") {
		t.Fatalf("%d dead letters, want 29 naming the ingest bound:\n%s", len(gotDead), strings.Join(gotDead, "\n"))
	}

	p, err := nfa.CompileBytes([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	r := nfa.NewRunner(p)
	var wantRecs, wantDead []string
	for _, e := range entries {
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
			for _, d := range r.DeadLetters() {
				d.Position = ev.Pos
				b, _ := json.Marshal(d)
				wantDead = append(wantDead, string(b))
			}
		}
	}
	if a, b := strings.Join(gotRecs, "\n"), strings.Join(wantRecs, "\n"); a != b {
		t.Fatalf("shard records:\n%s\noffline:\n%s", a, b)
	}
	if a, b := strings.Join(gotDead, "\n"), strings.Join(wantDead, "\n"); a != b {
		t.Fatalf("shard dead letters:\n%s\noffline:\n%s", a, b)
	}
}
