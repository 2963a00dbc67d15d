package nfa_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/cepcluster/cep/nfa"
)

// Each check of the pipeline refuses with its own kind and reason, in
// order, and a refusal before the bounds on state changes nothing; one
// at a bound on state moves only the watermark, and a late event passes
// the bounds to its late record.
func TestOfferRefusals(t *testing.T) {
	p := mustCompile(t, skewPattern)
	cfg := nfa.DefaultConfig()
	cfg.MaxKeys, cfg.MaxStateBytes = 1, 50
	m := nfa.NewMatcherWith(p, cfg)
	offer := func(in nfa.Input, owns func(string) (bool, string)) ([]nfa.Record, *nfa.Refusal) {
		t.Helper()
		before, _ := m.MarshalBinary()
		a, ref := m.Admit(&nfa.Arrival{In: in, Ingest: nfa.NoIngestTime, Owns: owns})
		if after, _ := m.MarshalBinary(); string(after) != string(before) {
			t.Fatalf("Admit changed the state")
		}
		if !a.Moves() {
			return nil, ref
		}
		return m.Take(&a), ref
	}

	if _, ref := nfa.DecodeInput([]byte(`{"k":"x","pad":"`+strings.Repeat("x", 100)+`"}`), 64); ref == nil || ref.Kind != nfa.RefusedDecode || !ref.Malformed() || !strings.Contains(ref.Reason, "MaxEventBytes = 64") {
		t.Fatalf("over the byte bound: %+v", ref)
	}
	if _, ref := nfa.DecodeInput([]byte(`[1]`), 0); ref == nil || ref.Kind != nfa.RefusedDecode || ref.Pattern != "" {
		t.Fatalf("not an object: %+v", ref)
	}
	if _, ref := offer(nfa.Input{Data: map[string]any{"t": "A", "ts": int64(1)}, Raw: []byte(`{}`)}, nil); ref == nil || ref.Kind != nfa.RefusedKey || !ref.Malformed() || ref.Pattern != "skew" {
		t.Fatalf("no key: %+v", ref)
	}
	refuseAll := func(key string) (bool, string) { return false, "not here: " + key }
	if _, ref := offer(ev("x", "A", 1000), refuseAll); ref == nil || ref.Kind != nfa.RefusedOwner || ref.Reason != "not here: x" || ref.Malformed() {
		t.Fatalf("refused by its owner: %+v", ref)
	}
	skipAll := func(string) (bool, string) { return false, "" }
	if recs, ref := offer(ev("x", "A", 1000), skipAll); ref != nil || recs != nil {
		t.Fatalf("skipped: %v %+v", recs, ref)
	}
	if _, ref := offer(nfa.Input{Data: map[string]any{"k": "x", "t": "A", "ts": "soon"}, Raw: []byte(`{}`)}, nil); ref == nil || ref.Kind != nfa.RefusedTimeExpr || !ref.Malformed() {
		t.Fatalf("no time: %+v", ref)
	}
	var te *nfa.TimeError
	if _, ref := offer(ev("x", "A", math.MinInt64), nil); ref == nil || ref.Kind != nfa.RefusedTime || !errors.As(ref, &te) || ref.Malformed() {
		t.Fatalf("out of range: %+v", ref)
	}

	if recs, ref := offer(ev("x", "A", 1000), nil); ref != nil || len(recs) != 0 || m.Keys() != 1 {
		t.Fatalf("taken: %v %+v", recs, ref)
	}
	// a second key past maxKeys: refused, its time observed
	if _, ref := offer(ev("y", "A", 5000), nil); ref == nil || ref.Kind != nfa.RefusedKeys || !strings.Contains(ref.Reason, "maxKeys = 1") || m.CurrentWatermark() != 4999 {
		t.Fatalf("a new key past maxKeys: %+v, watermark %d", ref, m.CurrentWatermark())
	}
	// the key held: over maxStateBytes with what x holds
	if _, ref := offer(ev("x", "B", 6000), nil); ref == nil || ref.Kind != nfa.RefusedStateBytes || !strings.Contains(ref.Reason, "maxStateBytes = 50") || m.CurrentWatermark() != 5999 {
		t.Fatalf("past maxStateBytes: %+v, watermark %d", ref, m.CurrentWatermark())
	}
	// late: no state taken, so no bound applies
	if recs, ref := offer(ev("y", "A", 10), nil); ref != nil || len(recs) != 1 || recs[0].Type != "late" {
		t.Fatalf("late past the bounds: %v %+v", recs, ref)
	}
	// Event is Offer without an ingest time: its error is the refusal
	var ref *nfa.Refusal
	if _, err := m.Event(ev("z", "A", 7000)); !errors.As(err, &ref) || ref.Kind != nfa.RefusedKeys {
		t.Fatalf("Event's error %v", err)
	}
}

// The offline runner stops at a malformed line and dead-letters an event
// refused by a pattern's bounds, as a shard does, going on with the rest.
func TestRunnerDeadLettersBounds(t *testing.T) {
	cfg := nfa.DefaultConfig()
	cfg.MaxKeys = 1
	r := nfa.NewRunnerWith(cfg, mustCompile(t, skewPattern))
	for _, l := range []string{`{"k":"x","t":"A","ts":1000}`, `{"k":"y","t":"A","ts":2000}`} {
		if _, err := r.Line([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	if d := r.DeadLetters(); len(d) != 1 || d[0].Source != "logins" || d[0].Position != 2 || !strings.Contains(d[0].Reason, "maxKeys = 1") {
		t.Fatalf("dead letters %+v", d)
	}
	var ie *nfa.InputError
	if _, err := r.Line([]byte(`{"t":"A","ts":3000}`)); !errors.As(err, &ie) || ie.Line != 3 || !strings.HasPrefix(ie.Err.Error(), "pattern skew: ") {
		t.Fatalf("a line without a key: %v", err)
	}
}
