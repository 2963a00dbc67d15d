package shard

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/cepcluster/cep/nfa"
)

// What a shard shows of a key is what a matcher of the pattern holds after
// the key's events, run alone; a replica restored from the shard's
// snapshot shows the same (the view follows from the replicated state),
// and so does an older version draining after an update, under its
// version. A key of another shard's key groups and a pattern the shard
// does not run are errors naming them.
func TestInspectKeyEqualsMatcher(t *testing.T) {
	s := NewState(0, 15, 16)
	s.Apply(&Batch{Ops: []Op{deployOp(abSpec, 1, PolicyReset)}})
	events := []Event{ev(1, "x", "A", 10), ev(2, "x", "A", 20), ev(3, "y", "A", 25), ev(4, "x", "C", 30)}
	s.Apply(&Batch{Ops: []Op{eventsOp(events...)}})

	p, err := nfa.CompileBytes([]byte(abSpec))
	if err != nil {
		t.Fatal(err)
	}
	m := nfa.NewMatcher(p)
	for _, e := range events {
		in, _, _, err := nfa.ParseLine(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		in.Raw, in.Pos = e.Data, e.Pos
		if _, err := m.Event(in); err != nil {
			t.Fatal(err)
		}
	}
	want := m.InspectKey("x", 0)
	if want.PartialCount != 2 {
		t.Fatalf("the matcher holds %d partial matches of x, want 2: the test checks too little", want.PartialCount)
	}
	got, err := s.InspectKey("ab", "x", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 1 || !reflect.DeepEqual(got.View, want) {
		t.Fatalf("shard shows version %d\n%+v\nthe matcher holds\n%+v", got.Version, got.View, want)
	}
	restored := restore(t, 0, 15, snap(t, s, "s"))
	if again, err := restored.InspectKey("ab", "x", 0); err != nil || !reflect.DeepEqual(again.View, want) {
		t.Fatalf("restored replica shows\n%+v (%v)\nwant\n%+v", again.View, err, want)
	}

	s.Apply(&Batch{Ops: []Op{deployOp(strings.Replace(abSpec, `"within":100`, `"within":200`, 1), 2, PolicyDrain)}})
	after, err := s.InspectKey("ab", "x", 0)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != 2 || after.View.PartialCount != 0 || len(after.Draining) != 1 || after.Draining[0].Version != 1 ||
		!reflect.DeepEqual(after.Draining[0].View.Partial, want.Partial) {
		t.Fatalf("after the update: version %d with %d partial matches, draining %+v", after.Version, after.View.PartialCount, after.Draining)
	}

	other := NewState(0, 7, 16)
	other.Apply(&Batch{Ops: []Op{deployOp(abSpec, 1, PolicyReset)}})
	far := keyIn(t, 16, func(kg int) bool { return kg > 7 })
	if _, err := other.InspectKey("ab", far, 0); err == nil || !strings.Contains(err.Error(), far) {
		t.Errorf("a key of another shard: %v", err)
	}
	var np *ErrNoPattern
	if _, err := s.InspectKey("nope", "x", 0); !errors.As(err, &np) || np.Pattern != "nope" {
		t.Errorf("a pattern the shard does not run: %v", err)
	}
}
