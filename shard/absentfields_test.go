package shard

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/cepcluster/cep/keygroup"
)

// A field a pattern reads that no event has is counted per event until
// one has it, for a condition (where it is also a condition error) and
// for a query's column (where it reads NULL and nothing else tells):
// the counts agree with a count over the events themselves.
func TestAbsentFields(t *testing.T) {
	s := NewState(0, 15, 16)
	spec := `{"name":"amounts","key":"e.k","time":"e.ts","stages":[{"name":"a","where":"e.t == \"A\""},{"name":"b","where":"e.amout > 1"}]}`
	query := `SELECT * FROM src MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES LAST(DOWN.ts) AS t
	  PATTERN (START DOWN{2,} UP) DEFINE DOWN AS DOWN.prcie < PREV(DOWN.price)) AS v`
	s.Apply(&Batch{Ops: []Op{deployOp(spec, 1, PolicyReset),
		&Deploy{Name: "v", Version: 1, Spec: []byte(query), Sources: []string{"src"}, Subject: "cep.out.v"}}})

	payloads := []string{
		`{"k":"x","t":"A","ts":1,"price":3}`,
		`{"k":"x","t":"B","ts":2,"price":2}`,
		`{"k":"y","t":"A","ts":3,"amount":5}`,
	}
	var events []Event
	for i, p := range payloads {
		events = append(events, Event{Pos: uint64(i + 1), Block: keygroup.BlockOf(keygroup.OfKey(fmt.Sprint(p[7]), 16), 16), Data: []byte(p)})
	}
	s.Apply(&Batch{Ops: []Op{eventsOp(events...)}})
	got := map[string][]AbsentField{}
	for _, p := range s.PatternFailures() {
		got[p.Name] = p.AbsentFields
	}
	// none of the events has amout or prcie; every one has the others
	want := map[string][]AbsentField{
		"amounts": {{Path: "amout", Events: 3}},
		"v":       {{Path: "prcie", Events: 3}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("absent fields %+v, want %+v", got, want)
	}

	// once an event has it, the field is no longer absent
	s.Apply(&Batch{Ops: []Op{eventsOp(Event{Pos: 4, Block: events[0].Block, Data: []byte(`{"k":"x","t":"A","ts":4,"prcie":1,"amout":1}`)})}})
	for _, p := range s.PatternFailures() {
		if len(p.AbsentFields) != 0 {
			t.Errorf("%s: absent %+v after an event with the fields", p.Name, p.AbsentFields)
		}
	}
}
