package shard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/snapshot"
)

// outboxCounts counts the records and dead letters in the outbox by
// pattern, from their payloads: the reference the counters must agree
// with while every record type is published and nothing is acknowledged.
func outboxCounts(t *testing.T, s *State) map[string]PatternCounters {
	t.Helper()
	out := map[string]PatternCounters{}
	for _, r := range s.Outbox() {
		var rec struct {
			Type, Pattern, Reason string
			Refusals              []struct{ Pattern string }
		}
		if err := json.Unmarshal(r.Payload, &rec); err != nil {
			t.Fatal(err)
		}
		c := out[rec.Pattern]
		switch {
		case strings.HasPrefix(r.Subject, "cep.deadletter.") && len(rec.Refusals) > 0:
			// one dead letter for several patterns' refusals
			for _, f := range rec.Refusals {
				c := out[f.Pattern]
				c.DeadLetters++
				out[f.Pattern] = c
			}
			continue
		case strings.HasPrefix(r.Subject, "cep.deadletter."):
			c.DeadLetters++
		case rec.Type == "match":
			c.Matches++
		case rec.Type == "timeout":
			c.Timeouts++
		case rec.Type == "late":
			c.Late++
		}
		out[rec.Pattern] = c
	}
	return out
}

func countersOf(s *State) map[string]PatternCounters {
	out := map[string]PatternCounters{}
	for _, c := range s.PatternCounters() {
		out[c.Name] = c.PatternCounters
	}
	return out
}

// The records counted per pattern are those the outbox holds, across an
// update whose draining version produces some too.
func TestPatternCountersAgreeWithOutbox(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		s := NewState(0, 15, 16)
		for _, b := range randomLogD(seed, 60, 5) {
			for i := range b.Ops {
				if d, ok := b.Ops[i].(*Deploy); ok {
					d.Records = 0 // every type, so the outbox shows them all
				}
			}
			s.Apply(b)
		}
		// events without a time: dead letters naming each pattern
		s.Apply(&Batch{Ops: []Op{eventsOp(Event{Pos: 10_000, Block: ev(0, "k1", "A", 0).Block, Data: []byte(`{"k":"k1","t":"A"}`)})}})
		want := outboxCounts(t, s)
		got := countersOf(s)
		var n PatternCounters
		for name, c := range got {
			w := want[name]
			if c.Matches != w.Matches || c.Timeouts != w.Timeouts || c.Late != w.Late || c.DeadLetters != w.DeadLetters {
				t.Errorf("seed %d: %s counts %+v, its records in the outbox %+v", seed, name, c, w)
			}
			n.Matches += c.Matches
			n.Late += c.Late
			n.Timeouts += c.Timeouts
			n.DeadLetters += c.DeadLetters
		}
		// the shard counts dead-lettered events, the patterns refusals:
		// one event's dead letter may carry several patterns' refusals
		deadLetters := 0
		for _, r := range s.Outbox() {
			if strings.HasPrefix(r.Subject, "cep.deadletter.") {
				deadLetters++
			}
		}
		if cnt := s.Counters(); n.Matches != cnt.Matches || n.Timeouts != cnt.Timeouts || n.Late != cnt.Late || cnt.DeadLetters != uint64(deadLetters) || n.DeadLetters < cnt.DeadLetters {
			t.Errorf("seed %d: the patterns' counters add up to %+v, the shard's are %+v (%d dead letters)", seed, n, cnt, deadLetters)
		}
		if n.Matches == 0 || n.Timeouts == 0 || n.Late == 0 || n.DeadLetters == 0 {
			t.Fatalf("seed %d: counts %+v: the log does not exercise every kind", seed, n)
		}
	}
}

// Condition and emit failures are counted as the offline engine counts
// them, and stay counted when the version they happened in has finished
// draining (a matcher's own statistics go with it).
func TestPatternCountersFailuresSurviveDraining(t *testing.T) {
	spec := `{"name":"amounts","key":"e.k","time":"e.ts","within":100,"emit":{"c":"e.currency"},"stages":[{"name":"a","where":"e.amount > 1"},{"name":"b","where":"e.t == \"B\""}]}`
	var lines []string
	var evs []Event
	for i := 1; i <= 40; i++ {
		e := ev(uint64(i), fmt.Sprintf("k%d", i%3), string(rune('A'+i%2)), int64(10*i))
		if i%4 == 0 {
			e.Data = []byte(fmt.Sprintf(`{"k":"k%d","t":"A","amount":5,"ts":%d}`, i%3, 10*i))
		}
		evs = append(evs, e)
		lines = append(lines, string(e.Data))
	}
	p, err := nfa.CompileBytes([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	r := nfa.NewRunner(p)
	for _, l := range lines {
		if _, err := r.Line([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	want := r.Matchers()[0].Stats()
	if want.ConditionErrors == 0 || want.EmitErrors == 0 {
		t.Fatalf("offline %+v: the events do not exercise failures", want)
	}

	s := NewState(0, 15, 16)
	s.Apply(&Batch{Ops: []Op{deployOp(spec, 1, PolicyReset), eventsOp(evs...)}})
	c := countersOf(s)["amounts"]
	if c.ConditionErrors != want.ConditionErrors || c.EmitErrors != want.EmitErrors {
		t.Fatalf("counted %d condition and %d emit errors, the offline engine %d and %d", c.ConditionErrors, c.EmitErrors, want.ConditionErrors, want.EmitErrors)
	}
	// version 2 drains version 1 until its partial matches end
	s.Apply(&Batch{Ops: []Op{deployOp(spec, 2, PolicyDrain), WatermarkOp{Pattern: "amounts", Time: 1 << 40}}})
	if info := s.Patterns()[0]; info.Draining != 0 {
		t.Fatalf("still draining: %+v", info)
	}
	after := countersOf(s)["amounts"]
	if after.ConditionErrors < c.ConditionErrors || after.EmitErrors < c.EmitErrors {
		t.Fatalf("counters went down after the draining version ended: %+v, were %+v", after, c)
	}
}

// A state restored from a snapshot reports the counters of the state it
// was taken from and goes on counting as it does; the shard split off
// starts at zero, as its Counters do; a pattern deleted and deployed again
// starts at zero.
func TestPatternCountersReplicated(t *testing.T) {
	log := randomLog(2, 80)
	orig := NewState(0, 15, 16)
	for _, bt := range log[:40] {
		orig.Apply(bt)
	}
	rest := restore(t, 0, 15, snap(t, orig, "s"))
	for _, bt := range log[40:] {
		orig.Apply(bt)
		rest.Apply(bt)
	}
	a, b := orig.PatternCounters(), rest.PatternCounters()
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("restored %v, want %v", b, a)
	}
	if a[0].Matches == 0 || a[0].PartialMatches == 0 {
		t.Fatalf("counters %+v: the log does not exercise them", a[0])
	}

	s := restore(t, 0, 15, snap(t, orig, "s"))
	s.Apply(&Batch{Ops: []Op{Split{At: 8}}})
	right := s.TakeSplitOff()[0].State
	for _, c := range right.PatternCounters() {
		if c.PatternCounters != (PatternCounters{}) {
			t.Errorf("split-off shard counts %+v for %s", c.PatternCounters, c.Name)
		}
	}
	if got := countersOf(s)["ab"]; got != countersOf(orig)["ab"] {
		t.Errorf("after the split: %+v, want %+v", got, countersOf(orig)["ab"])
	}

	s.Apply(&Batch{Ops: []Op{DeleteOp{Pattern: "ab"}, deployOp(abSpec, 3, PolicyReset)}})
	if got := countersOf(s)["ab"]; got != (PatternCounters{}) {
		t.Errorf("redeployed pattern counts %+v", got)
	}
}

// A snapshot written before the counters were kept restores with zero
// counts; a damaged section is refused, saying which.
func TestPatternCountersSection(t *testing.T) {
	old, err := os.ReadFile("testdata/snapshot-v4.snap")
	if err != nil {
		t.Fatal(err)
	}
	st := restore(t, 0, 15, old)
	if len(st.PatternCounters()) == 0 {
		t.Fatal("the old snapshot restored no pattern")
	}
	for _, c := range st.PatternCounters() {
		if c.PatternCounters != (PatternCounters{}) {
			t.Errorf("%s: %+v from a snapshot without counters", c.Name, c.PatternCounters)
		}
	}

	for _, payload := range [][]byte{{9}, {patternCountersVersion, 5, 1}, append(st.appendPatternCounters(nil), 0)} {
		var buf bytes.Buffer
		sw, err := snapshot.NewWriter(&buf, snapshot.Header{ID: "bad", Kind: snapshot.KindRaftSnapshot, KeyGroups: 16, LastKeyGroup: 15})
		if err != nil {
			t.Fatal(err)
		}
		if err := sw.Named(shardSection, st.appendShardSection(nil)); err != nil {
			t.Fatal(err)
		}
		if err := sw.Named(patternCountersSection, payload); err != nil {
			t.Fatal(err)
		}
		if err := sw.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := snapshot.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := RestoreState([]*snapshot.Reader{r}, 0, 15); err == nil || !strings.Contains(err.Error(), patternCountersSection) {
			t.Errorf("section %x: err %v, want one naming the section", payload, err)
		}
	}
}
