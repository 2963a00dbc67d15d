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

// doublingSpec is a pattern whose partial matches double with every B after
// an A, until one completes: an A, then followedByAny twelve B's. On a B
// each partial match stays where it is and a copy takes it.
func doublingSpec() string {
	var sb strings.Builder
	sb.WriteString(`{"name": "doubling", "key": "e.k", "stages": [{"name": "a", "where": "e.t == \"A\""}`)
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&sb, `, {"name": "b%d", "contiguity": "followedByAny", "where": "e.t == \"B\""}`, i)
	}
	sb.WriteString("]}")
	return sb.String()
}

func ev(key, typ string, ts int) nfa.Input {
	data := map[string]any{"k": key, "t": typ, "ts": int64(ts)}
	return nfa.Input{Data: data, Raw: fmt.Appendf(nil, `{"k":%q,"t":%q,"ts":%d}`, key, typ, ts)}
}

// Without a bound the doubling pattern holds 2^j partial matches after j
// B's (j < 12); with one, each step keeps min(2·before, bound) and drops
// the rest.
func TestMaxPartialMatchesBoundsDoubling(t *testing.T) {
	p := mustCompile(t, doublingSpec())
	for _, bound := range []int{0, 1, 5, 64, 1000} {
		m := nfa.NewMatcher(p)
		configure(m, func(c *nfa.Config) { c.MaxPartialMatches = bound })
		m.Event(ev("x", "A", 0))
		held, dropped := 1, uint64(0)
		for j := 1; j < 12; j++ {
			if _, err := m.Event(ev("x", "B", j)); err != nil {
				t.Fatal(err)
			}
			made := 2 * held
			held = made
			if bound > 0 {
				held = min(made, bound)
			}
			dropped += uint64(made - held)
			if got := nfa.StartedPartial(m, "x"); got != held {
				t.Fatalf("bound %d, after %d B's: %d partial matches, want %d", bound, j, got, held)
			}
			if got := m.Stats().Dropped; got != dropped {
				t.Fatalf("bound %d, after %d B's: %d dropped, want %d", bound, j, got, dropped)
			}
			if n := nfa.UnreachableEvents(m); n != 0 {
				t.Fatalf("bound %d, after %d B's: %d events no partial match reaches", bound, j, n)
			}
		}
	}
}

// Past the bound the partial matches that started first stay: of M A's
// followed by a B, the bound's worth of earliest A's match, on each key.
func TestMaxPartialMatchesKeepsEarliestStarts(t *testing.T) {
	p := mustCompile(t, `{"name": "pairs", "key": "e.k", "time": "e.ts", "stages": [
		{"name": "a", "where": "e.t == \"A\""},
		{"name": "b", "contiguity": "followedByAny", "where": "e.t == \"B\""}]}`)
	const bound, as = 7, 30
	m := nfa.NewMatcher(p)
	configure(m, func(c *nfa.Config) { c.MaxPartialMatches = bound })
	var recs []string
	ts := 0
	for i := 0; i < as; i++ {
		for _, k := range []string{"x", "y"} {
			ts++
			got, err := m.Event(ev(k, "A", ts))
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, recordsJSON(t, got)...)
		}
	}
	for _, k := range []string{"x", "y"} {
		ts++
		got, err := m.Event(ev(k, "B", ts))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, recordsJSON(t, got)...)
	}
	recs = append(recs, recordsJSON(t, m.Finish(true))...)
	var starts []string
	for _, r := range recs {
		var rec struct {
			Type  string
			Key   string
			Start int64
		}
		if err := json.Unmarshal([]byte(r), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Type != "match" {
			t.Fatalf("unexpected record %s", r)
		}
		starts = append(starts, fmt.Sprintf("%s@%d", rec.Key, rec.Start))
	}
	var want []string
	for i := 0; i < bound; i++ {
		want = append(want, fmt.Sprintf("x@%d", 2*i+1))
	}
	for i := 0; i < bound; i++ {
		want = append(want, fmt.Sprintf("y@%d", 2*i+2))
	}
	slices.Sort(starts)
	slices.Sort(want)
	if !slices.Equal(starts, want) {
		t.Fatalf("matches start at\n%v\nwant\n%v", starts, want)
	}
	if got := m.Stats().Dropped; got != 2*(as-bound) {
		t.Fatalf("%d dropped, want %d", got, 2*(as-bound))
	}
}

// Under a small bound, on random branching patterns: no key keeps more
// than the bound after any line; a run resumed from encoded state at any
// line continues exactly as the uninterrupted one (records, statistics,
// state bytes: what is dropped depends on the state alone); and without a
// skip strategy, where partial matches do not affect each other, every
// record is one the unbounded matcher produces too.
func TestMaxPartialMatchesProperties(t *testing.T) {
	reached := 0
	checkCovering(t, func() bool { return reached > 0 }, func(t *rapid.T) {
		s := genBranchingSpec(t, "noSkip", "skipToNext", "skipPastLastEvent")
		p := compileOrSkip(t, s)
		lines := genInput(t)
		bound := rapid.IntRange(1, 6).Draw(t, "bound")
		bounded := func() *nfa.Matcher {
			m := nfa.NewMatcher(p)
			configure(m, func(c *nfa.Config) { c.MaxPartialMatches = bound })
			return m
		}
		m, ref := bounded(), bounded()
		for i := range lines {
			runLines(t, m, lines[i:i+1])
			for _, k := range []string{"x", "y"} {
				if n := nfa.StartedPartial(m, k); n > bound {
					t.Fatalf("line %d: key %s holds %d partial matches, bound %d", i, k, n, bound)
				}
			}
		}
		if m.Stats().Dropped > 0 {
			reached++
		}
		at := rapid.IntRange(0, len(lines)).Draw(t, "restoreAt")
		runInStepRestoring(t, bounded(), ref, lines, at, func(old *nfa.Matcher) *nfa.Matcher {
			nm := restoreMatcher(t, p, old)
			configure(nm, func(c *nfa.Config) { c.MaxPartialMatches = bound })
			return nm
		})
		if s.Skip != "noSkip" {
			return
		}
		unbounded := nfa.NewMatcher(p)
		configure(unbounded, func(c *nfa.Config) { c.MaxPartialMatches = 0 })
		capped := bounded()
		all := append(runLines(t, unbounded, lines), recordsJSON(t, unbounded.Finish(true))...)
		some := append(runLines(t, capped, lines), recordsJSON(t, capped.Finish(true))...)
		if extra, _ := multisetDiff(some, all); len(extra) > 0 {
			t.Fatalf("bound %d: records the unbounded matcher does not produce: %v", bound, extra)
		}
	})
}
