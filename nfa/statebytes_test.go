package nfa_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/nfa"
)

// Matcher.StateBytes, a running sum kept as events are buffered and freed,
// equals a recount over the state after every input line: on branching
// patterns (shared nodes, allowCombinations, skip strategies, the bound
// on partial matches) and on sequences run per start event, through
// draining and a restore from the encoded state.
func TestStateBytesEqualsRecount(t *testing.T) {
	held := 0
	checkCovering(t, func() bool { return held > 0 }, func(t *rapid.T) {
		var s *nfa.Spec
		var lines [][]byte
		if rapid.Bool().Draw(t, "seq") {
			s, lines = genSeqSpec(t), genManyKeysInput(t)
		} else {
			s = genBranchingSpec(t, "noSkip", "skipToNext", "skipPastLastEvent")
			lines = genInput(t)
		}
		p := compileOrSkip(t, s)
		m := nfa.NewMatcher(p)
		bound := rapid.SampledFrom([]int{0, 3, nfa.DefaultMaxPartialMatches}).Draw(t, "maxPartialMatches")
		configure(m, func(c *nfa.Config) { c.MaxPartialMatches = bound })
		drainAt := rapid.IntRange(-1, len(lines)).Draw(t, "drainAt")
		restoreAt := rapid.IntRange(-1, len(lines)).Draw(t, "restoreAt")
		check := func(where string, i int) {
			if got, want := m.StateBytes(), nfa.RecountStateBytes(m); got != want {
				t.Fatalf("%s line %d: StateBytes %d, recount %d", where, i, got, want)
			}
		}
		for i := range lines {
			if i == drainAt {
				m.StopStarting()
			}
			if i == restoreAt {
				m = restoreMatcher(t, p, m)
				configure(m, func(c *nfa.Config) { c.MaxPartialMatches = bound })
				check("restored before", i)
			}
			runLines(t, m, lines[i:i+1])
			check("after", i)
			if m.StateBytes() > 0 {
				held++
			}
		}
		m.Finish(true)
		check("finished after", len(lines))
		if m.Keys() == 0 && m.StateBytes() != 0 {
			t.Fatalf("no keys left but StateBytes %d", m.StateBytes())
		}
	})
	if held == 0 {
		t.Fatal("no state was ever held: the test checks nothing")
	}
}
