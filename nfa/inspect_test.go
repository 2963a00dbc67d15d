package nfa_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/nfa"
)

// What InspectKey lists of a key is what the engine does with it: once
// no event waits for the watermark, advancing time to each deadline it
// shows times out exactly the partial matches it listed with that
// deadline, each with the events it showed, by stage, and the start it
// showed (and nothing else). Its counts are KeyState's, its first n
// partial matches those of the whole list. On sequences run per start
// event and on branching patterns; the timeouts without a skip strategy
// (one prunes partial matches as held-back matches leave, instead of
// timing them out).
func TestInspectKeyEqualsTimeouts(t *testing.T) {
	timedOut := 0
	checkCovering(t, func() bool { return timedOut > 0 }, func(t *rapid.T) {
		var s *nfa.Spec
		var lines [][]byte
		if rapid.Bool().Draw(t, "seq") {
			s, lines = genSeqSpec(t), genManyKeysInput(t)
		} else {
			s, lines = genBranchingSpec(t, "noSkip", "skipToNext", "skipPastLastEvent"), genInput(t)
		}
		// under a skip strategy, only the counts and the limit are
		// checked: completed matches held back are listed too
		skip := s.Skip != "" && s.Skip != "noSkip"
		p := compileOrSkip(t, s)
		kinds := map[string]nfa.StateKind{}
		for _, st := range p.Automaton().States {
			kinds[st.Name] = st.Kind
		}
		m := nfa.NewMatcher(p)
		runLines(t, m, lines)
		keys := []string{"x", "y", "z"}
		for _, k := range keys {
			v := m.InspectKey(k, 0)
			pm, held := m.KeyState(k)
			if v.PartialCount != pm || len(v.Partial) != pm || len(v.Buffered) != v.BufferedCount || v.BufferedCount > held {
				t.Fatalf("key %s: %d of %d partial matches, %d of %d buffered; KeyState %d, %d", k, len(v.Partial), v.PartialCount,
					len(v.Buffered), v.BufferedCount, pm, held)
			}
			if first := m.InspectKey(k, 2); !slices.EqualFunc(first.Partial, v.Partial[:min(2, len(v.Partial))], samePartial) ||
				first.PartialCount != v.PartialCount || len(first.Buffered) > 2 {
				t.Fatalf("key %s: limit 2 lists %d partial matches, not the first of %d", k, len(first.Partial), len(v.Partial))
			}
		}
		if skip {
			return
		}
		m.Finish(false) // every event waiting for the watermark is processed
		want := map[string][]string{}
		var deadlines []int64
		for _, k := range keys {
			v := m.InspectKey(k, 0)
			if v.BufferedCount != 0 {
				t.Fatalf("key %s: %d events buffered after Finish(false)", k, v.BufferedCount)
			}
			for _, pv := range v.Partial {
				if !pv.HasDeadline || kinds[pv.State] != nfa.StateNormal {
					continue
				}
				want[k] = append(want[k], timeoutOf(pv.Start, pv.Deadline, pv.Events))
				deadlines = append(deadlines, pv.Deadline)
			}
		}
		slices.Sort(deadlines)
		got := map[string][]string{}
		for _, d := range slices.Compact(deadlines) {
			for _, r := range m.Watermark(d) {
				if r.Type != "timeout" {
					continue
				}
				var evs []nfa.EventView
				for _, se := range r.Events {
					for _, raw := range se.Events {
						evs = append(evs, nfa.EventView{Stage: se.Stage, Raw: raw})
					}
				}
				got[r.Key] = append(got[r.Key], timeoutOf(r.Start, r.TimeoutAt, evs))
				timedOut++
			}
		}
		for _, k := range keys {
			slices.Sort(want[k])
			slices.Sort(got[k])
			if !slices.Equal(want[k], got[k]) {
				t.Fatalf("key %s: inspect showed partial matches timing out as\n%s\nthe engine timed out\n%s", k,
					strings.Join(want[k], "\n"), strings.Join(got[k], "\n"))
			}
		}
	})
	if timedOut == 0 {
		t.Fatal("no partial match timed out: the test checks nothing")
	}
}

// timeoutOf is a timed-out partial match as text: start, deadline, and
// its events grouped by stage in the order of their first event (as a
// timeout record lists them).
func timeoutOf(start, at int64, evs []nfa.EventView) string {
	var stages []string
	by := map[string][]json.RawMessage{}
	for _, e := range evs {
		if _, ok := by[e.Stage]; !ok {
			stages = append(stages, e.Stage)
		}
		by[e.Stage] = append(by[e.Stage], json.RawMessage(e.Raw))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "start %d at %d:", start, at)
	for _, s := range stages {
		j, _ := json.Marshal(by[s])
		fmt.Fprintf(&b, " %s=%s", s, j)
	}
	return b.String()
}

func samePartial(a, b nfa.PartialView) bool {
	return a.State == b.State && a.Start == b.Start && a.Deadline == b.Deadline && a.HasDeadline == b.HasDeadline &&
		timeoutOf(0, 0, a.Events) == timeoutOf(0, 0, b.Events)
}

// A key with 100,000 partial matches (each login waits for a logout):
// InspectKey with limit 100 lists the 100 that started first, in start
// order, each with its one event, and counts them all.
func TestInspectKeyBounded(t *testing.T) {
	p, err := nfa.CompileBytes([]byte(`name: waits
key: e.k
time: e.ts
within: 1h
stages:
  - name: login
    where: e.t == "LOGIN"
  - name: logout
    contiguity: followedBy
    where: e.t == "LOGOUT"
`))
	if err != nil {
		t.Fatal(err)
	}
	m := nfa.NewMatcher(p)
	const n = 100_000
	for i := range n {
		raw := fmt.Appendf(nil, `{"k":"acc-3","t":"LOGIN","ts":%d}`, i)
		in, _, _, err := nfa.ParseLine(raw)
		if err != nil {
			t.Fatal(err)
		}
		in.Raw = raw
		if _, err := m.Event(in); err != nil {
			t.Fatal(err)
		}
	}
	m.Finish(false)
	v := m.InspectKey("acc-3", 100)
	if v.PartialCount != n || len(v.Partial) != 100 {
		t.Fatalf("%d partial matches listed of %d, want 100 of %d", len(v.Partial), v.PartialCount, n)
	}
	for i, pm := range v.Partial {
		if pm.Start != int64(i) || len(pm.Events) != 1 || pm.Events[0].Time != int64(i) || pm.State != "logout" || pm.Deadline != int64(i)+3_600_000 {
			t.Fatalf("partial match %d: %+v, want the login at %d waiting for a logout until %d", i, pm, i, int64(i)+3_600_000)
		}
	}
}
