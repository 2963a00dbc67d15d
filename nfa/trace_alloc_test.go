package nfa_test

import (
	"testing"

	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/nfa/expr"
)

// With no tracer, a step allocates nothing more than it did: a key whose
// partial match waits while other events pass (the general step, every
// partial match visited) allocates nothing per event, and a tracer set
// and removed again leaves it so.
func TestTraceOffAllocatesNothing(t *testing.T) {
	p, err := nfa.CompileBytes([]byte(`
name: p
key: e.k
time: e.ts
within: 1h
stages:
  - name: a
    where: e.t == "A"
  - name: b
    contiguity: followedBy
    where: e.t == "B" && e.v > 1
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"never traced", "traced, then not"} {
		m := nfa.NewMatcher(p)
		if name != "never traced" {
			m.SetTracer(func(*nfa.TraceEntry) {})
			m.SetTracer(nil)
		}
		nfa.DisableSeq(m) // the general step: the one the tracer reports from
		ts := int64(0)
		feed := func(typ string) {
			ts++
			m.EventAt("x", ts, nfa.Input{Data: expr.Event{"k": "x", "t": typ, "ts": ts, "v": int64(0)}, Raw: []byte(`{}`)})
		}
		feed("A")
		for range 100 { // warm the buffers
			feed("C")
		}
		// EventAt is given the time: the event's own ts is not read
		in := nfa.Input{Data: expr.Event{"k": "x", "t": "C", "v": int64(0)}, Raw: []byte(`{}`)}
		allocs := testing.AllocsPerRun(1000, func() {
			ts++
			m.EventAt("x", ts, in)
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per event, want 0", name, allocs)
		}
		if pm, _ := m.KeyState("x"); pm != 1 {
			t.Fatalf("%s: %d partial matches, want the one waiting for b", name, pm)
		}
	}
}
