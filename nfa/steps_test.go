package nfa_test

import (
	"slices"
	"testing"

	"github.com/cepcluster/cep/nfa"
)

// combinationsSpec is the attack on the work of one event: after an A,
// every B is taken by each partial match and also skipped by it
// (followedByAny, allowCombinations), so a key's partial matches double
// with each B and each completes a match as long as the key's history.
const combinationsSpec = `{"name": "comb", "key": "e.k", "stages": [
	{"name": "a", "where": "e.t == \"A\""},
	{"name": "b", "contiguity": "followedByAny", "oneOrMore": true, "allowCombinations": true, "where": "e.t == \"B\""}]}`

// One A and forty B's of one key: each B's step stops at MaxStepsPerEvent
// — partial matches visited plus events read into matches — and the key
// then keeps the earlier half of its partial matches. No event produces
// more than the bound's worth of matched events, the key's partial
// matches stop doubling, the bound was reached and counted, and a
// matcher restored from the encoded state in mid-stream produces the
// same records (the cut depends on the state alone).
func TestMaxStepsPerEventBoundsCombinations(t *testing.T) {
	const bound, n = 2000, 40
	p := mustCompile(t, combinationsSpec)
	newM := func() *nfa.Matcher {
		m := nfa.NewMatcher(p)
		configure(m, func(c *nfa.Config) { c.MaxStepsPerEvent = bound })
		return m
	}
	m, ref := newM(), newM()
	for _, x := range []*nfa.Matcher{m, ref} {
		if _, err := x.Event(ev("x", "A", 0)); err != nil {
			t.Fatal(err)
		}
	}
	for j := 1; j <= n; j++ {
		if j == n/2 {
			data, err := m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if m, err = nfa.UnmarshalMatcher(p, data); err != nil {
				t.Fatal(err)
			}
			configure(m, func(c *nfa.Config) { c.MaxStepsPerEvent = bound })
		}
		recs, err := m.Event(ev("x", "B", j))
		if err != nil {
			t.Fatal(err)
		}
		read := 0
		for _, r := range recs {
			for _, l := range r.Events {
				read += len(l.Events)
			}
		}
		// one match read past the bound at most, as long as the history
		if read > bound+j+1 {
			t.Fatalf("B %d: %d events read into %d matches, over the bound %d", j, read, len(recs), bound)
		}
		if pm, _ := m.Totals(); pm > bound {
			t.Fatalf("B %d: %d partial matches held, over the bound %d", j, pm, bound)
		}
		got := recordsJSON(t, recs)
		want, err := ref.Event(ev("x", "B", j))
		if err != nil {
			t.Fatal(err)
		}
		if w := recordsJSON(t, want); !slices.Equal(got, w) {
			t.Fatalf("B %d: the restored matcher's records differ: %d, want %d", j, len(got), len(w))
		}
	}
	st := ref.Stats()
	if st.StepCapped == 0 || st.Dropped == 0 {
		t.Fatalf("the bound was never reached: %+v", st)
	}
	// unbounded, the 2^39 partial matches of the last B would never end
	t.Logf("%d of %d B's reached the bound, %d partial or completed matches discarded, %d matches", st.StepCapped, n, st.Dropped, st.Matches)
}
