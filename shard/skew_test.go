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
	op.Deploy.Sources = []string{"src"}
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
