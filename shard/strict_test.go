package shard

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/cepcluster/cep/internal/schema"
	"github.com/cepcluster/cep/keygroup"
)

// src's declared fields: k and t strings, ts an integer, note optional.
var strictFields = schema.Schema{
	{Path: "k", Type: "string"}, {Path: "note", Type: "string", Optional: true},
	{Path: "t", Type: "string"}, {Path: "ts", Type: "integer"},
}

func evData(pos uint64, k, data string) Event {
	return Event{Pos: pos, Block: keygroup.BlockOf(keygroup.OfKey(k, 16), 16), Data: []byte(data)}
}

// The events of a strict source that do not fit its fields are
// dead-lettered with a reason naming the field, and the pattern sees only
// the others: its records are those of a shard that is not strict given
// only the events that fit (picked by hand). StrictOp survives the log's
// encoding and a snapshot; a StrictOp without fields ends the check.
func TestStrictSourceDeadLettersWhatDoesNotFit(t *testing.T) {
	good := []Event{ev(1, "x", "A", 10), ev(3, "y", "A", 12), evData(5, "x", `{"k":"x","t":"B","ts":20,"note":"n"}`), ev(7, "y", "B", 25)}
	bad := []struct {
		e      Event
		reason string
	}{
		{evData(2, "x", `{"k":"x","t":"B"}`), `source src is strict: field "ts" is missing (schema: integer)`},
		{evData(4, "y", `{"k":"y","t":"B","ts":"15"}`), `source src is strict: field "ts" is string, not integer`},
		{evData(6, "x", `{"k":"x","t":"A","ts":21,"note":3}`), `source src is strict: field "note" is integer, not string`},
	}
	all := []Event{good[0], bad[0].e, good[1], bad[1].e, good[2], bad[2].e, good[3]}

	strictOp := StrictOp{Source: "src", Fields: strictFields}
	enc := (&Batch{Ops: []Op{strictOp, deployOp(abSpec, 1, PolicyReset)}}).Encode(nil)
	setup, err := DecodeBatch(enc)
	if err != nil || !reflect.DeepEqual(setup.Ops[0], Op(strictOp)) {
		t.Fatalf("StrictOp through the log's encoding: %v %+v", err, setup.Ops)
	}
	s := NewState(0, 15, 16)
	s.Apply(setup)
	s.Apply(&Batch{Ops: []Op{eventsOp(all...)}})

	ref := NewState(0, 15, 16)
	ref.Apply(&Batch{Ops: []Op{deployOp(abSpec, 1, PolicyReset)}})
	ref.Apply(&Batch{Ops: []Op{eventsOp(good...)}})

	var records, dead []OutRecord
	for _, r := range s.Outbox() {
		if r.Subject == DeadLetterSubject("src") {
			dead = append(dead, r)
		} else {
			records = append(records, r)
		}
	}
	if len(records) == 0 || payloadsOf(records) != payloadsOf(ref.Outbox()) {
		t.Fatalf("the strict shard's records\n%s\nthe reference's (fitting events only)\n%s", payloadsOf(records), payloadsOf(ref.Outbox()))
	}
	if len(dead) != len(bad) {
		t.Fatalf("%d dead letters, want %d: %s", len(dead), len(bad), payloadsOf(dead))
	}
	for i, d := range dead {
		var rec struct {
			Reason   string `json:"reason"`
			Position uint64 `json:"position"`
			Pattern  string `json:"pattern"`
		}
		if err := json.Unmarshal(d.Payload, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Reason != bad[i].reason || rec.Position != bad[i].e.Pos || rec.Pattern != "" {
			t.Errorf("dead letter %d: %s, want reason %q at position %d", i, d.Payload, bad[i].reason, bad[i].e.Pos)
		}
	}
	if c := s.Counters(); c.DeadLetters != 3 || c.Events != 7 {
		t.Errorf("counters %+v", c)
	}

	// a restored replica checks alike
	r := restore(t, 0, 15, snap(t, s, "strict"))
	if !reflect.DeepEqual(r.Strict("src"), strictFields) {
		t.Fatalf("restored strict fields %+v", r.Strict("src"))
	}
	r.Apply(&Batch{Ops: []Op{eventsOp(evData(8, "z", `{"k":"z","t":"A"}`))}})
	if out := r.Outbox(); len(out) != len(s.Outbox())+1 || !strings.Contains(string(out[len(out)-1].Payload), `field \"ts\" is missing`) {
		t.Fatalf("the restored replica let a misfit through: %s", payloadsOf(out))
	}
	// no longer strict: the event reaches the pattern (and fails its time)
	r.Apply(&Batch{Ops: []Op{StrictOp{Source: "src"}, eventsOp(evData(9, "z", `{"k":"z","t":"A"}`))}})
	if r.Strict("src") != nil {
		t.Fatal("a StrictOp without fields left the source strict")
	}
	if out := r.Outbox(); !strings.Contains(string(out[len(out)-1].Payload), `"reason":"time e.ts`) {
		t.Fatalf("after the source is no longer strict: %s", out[len(out)-1].Payload)
	}
	// a shard without strict sources writes no section for them
	if plain := snap(t, ref, "plain"); strings.Contains(string(plain), strictSection) {
		t.Fatal("a snapshot without strict sources has their section")
	}
}

// An event of a strict source that does not fit is dead-lettered by the
// shard re-keying it, not forwarded into the derived source.
func TestStrictSourceCheckedWhenForwarded(t *testing.T) {
	const derived = "src.kt"
	dep := deployOp(`{"name":"byt","key":"e.t","time":"e.ts","stages":[{"name":"a","where":"e.t == \"A\""}]}`, 1, PolicyReset)
	dep.Reads = []string{derived}
	s := NewState(0, 15, 16)
	s.Apply(&Batch{Ops: []Op{StrictOp{Source: "src", Fields: strictFields}, dep}})
	s.Apply(&Batch{Ops: []Op{ForwardOp{Source: "src", Target: derived, Events: []Event{
		ev(1, "x", "A", 1), evData(2, "x", `{"k":"x","t":7,"ts":2}`), ev(3, "y", "A", 3),
	}}}})
	out := s.Outbox()
	if len(out) != 3 || out[0].ID != ForwardID(derived, 1) || out[2].ID != ForwardID(derived, 3) ||
		out[1].Subject != DeadLetterSubject("src") || !strings.Contains(string(out[1].Payload), `source src is strict: field \"t\" is integer, not string`) {
		t.Fatalf("outbox: %s", payloadsOf(out))
	}
}

func payloadsOf(rs []OutRecord) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%s %s\n", r.Subject, r.Payload)
	}
	return b.String()
}
