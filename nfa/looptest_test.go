package nfa_test

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/nfa"
)

// allocPerStep is the bytes a run of the loop input of length n allocates
// per partial-match step.
func allocPerStep(p *nfa.Pattern, in []nfa.Input, n int) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	runLoop(p, in)
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / (float64(n) * float64(n+1) / 2)
}

// A loop's step allocates the same whatever the partial match's length: a
// take's version is not a copy of the whole version, and a DEFINE
// condition reading the previous row does not list the whole match. (The
// relaxed loop is left out: every A there also starts a partial match
// waiting for B, under a version of its own.)
func TestLoopStepAllocationIsFlat(t *testing.T) {
	if raceOn {
		t.Skip("the race detector's allocations are not the engine's")
	}
	const lastSQL = `SELECT * FROM record MATCH_RECOGNIZE (
  PARTITION BY k ORDER BY ts
  MEASURES FIRST(A.ts) AS s
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A+ B)
  DEFINE A AS A.t = 'A' AND (LAST(A.ts, 1) IS NULL OR A.ts > LAST(A.ts, 1)), B AS B.t = 'B')`
	qp, err := nfa.CompileSQL(lastSQL, "loop-last")
	if err != nil {
		t.Fatal(err)
	}
	pats := loopPatterns(t)[:2]
	pats = append(pats, struct {
		name string
		p    *nfa.Pattern
	}{"sql-last", qp})
	small, large := loopInput(t, 100), loopInput(t, 400)
	for _, tc := range pats {
		if c := runLoop(tc.p, large); c != 1 {
			t.Fatalf("%s: %d matches, want 1", tc.name, c)
		}
		a, b := allocPerStep(tc.p, small, 100), allocPerStep(tc.p, large, 400)
		t.Logf("%s: %.0f bytes per step at n=100, %.0f at n=400", tc.name, a, b)
		if b > 1.5*a {
			t.Errorf("%s: %.0f bytes per step at n=100, %.0f at n=400: a step copies the partial match", tc.name, a, b)
		}
	}
}

// naiveLoopMatches is what `A+ B` with strict contiguity and skip past the
// last event finds in one key's events: every run of consecutive A's that
// a B follows directly, from the run's first A to the B (the earliest
// start wins, the later starts in the run share the B and are skipped).
func naiveLoopMatches(types []string, ts []int) []string {
	var out []string
	start := -1
	for i, t := range types {
		switch t {
		case "A":
			if start < 0 {
				start = i
			}
		case "B":
			if start >= 0 {
				out = append(out, fmt.Sprintf("%d-%d", ts[start], ts[i]))
			}
			start = -1
		default:
			start = -1
		}
	}
	return out
}

// The SQL `A+ B` and the strict loop document find, over random A/B/C
// events of two keys, exactly the matches of the naive reference.
func TestLoopMatchesNaiveReference(t *testing.T) {
	pats := loopPatterns(t)[:2]
	found := 0
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 60).Draw(t, "events")
		var lines [][]byte
		types, times := map[string][]string{}, map[string][]int{}
		for i := 0; i < n; i++ {
			k := rapid.SampledFrom([]string{"x", "y"}).Draw(t, "k")
			typ := rapid.SampledFrom([]string{"A", "A", "A", "B", "C"}).Draw(t, "t")
			types[k], times[k] = append(types[k], typ), append(times[k], i)
			lines = append(lines, fmt.Appendf(nil, `{"k":%q,"t":%q,"ts":%d}`, k, typ, i))
		}
		want := map[string][]string{}
		for k, ts := range types {
			want[k] = naiveLoopMatches(ts, times[k])
			found += len(want[k])
		}
		for _, tc := range pats {
			r := nfa.NewRunner(tc.p)
			got := map[string][]string{}
			collect := func(recs []nfa.Record) {
				for _, rec := range recs {
					if rec.Type == "match" {
						got[rec.Key] = append(got[rec.Key], fmt.Sprintf("%d-%d", rec.Start, rec.End))
					}
				}
			}
			for _, l := range lines {
				recs, err := r.Line(l)
				if err != nil {
					t.Fatal(err)
				}
				collect(recs)
			}
			collect(r.Finish(true))
			for _, k := range []string{"x", "y"} {
				if strings.Join(got[k], " ") != strings.Join(want[k], " ") {
					t.Fatalf("%s key %s over %v: got %v, want %v", tc.name, k, types[k], got[k], want[k])
				}
			}
		}
	})
	if found == 0 {
		t.Fatal("no case had a match: the test checks nothing")
	}
}

// A take that appends to its partial match's version in place (the
// partial match ends there) leaves records, statistics and encoded state
// as copying the version does, also across a restore from the encoding.
func TestExtendInPlaceEqualsCopying(t *testing.T) {
	extended := 0
	rapid.Check(t, func(t *rapid.T) {
		p := compileOrSkip(t, genSpec(t, rapid.SampledFrom([]string{"noSkip", "skipPastLastEvent", "skipToNext", "skipToFirst:s0"}).Draw(t, "skip")))
		m, ref := nfa.NewMatcher(p), nfa.NewMatcher(p)
		nfa.DisableExtendInPlace(ref)
		lines := genInput(t)
		restoreAt := rapid.IntRange(-1, len(lines)).Draw(t, "restoreAt")
		runInStepRestoring(t, m, ref, lines, restoreAt, func(old *nfa.Matcher) *nfa.Matcher {
			extended += nfa.ExtendedInPlace(old)
			m = restoreMatcher(t, p, old)
			return m
		})
		extended += nfa.ExtendedInPlace(m)
		if n := nfa.SharedVersions(m); n > 0 {
			t.Fatalf("%d matches share another's version array", n)
		}
	})
	if extended == 0 {
		t.Fatal("no version was extended in place: the test checks nothing")
	}
	t.Logf("%d versions extended in place", extended)
}

// A DEFINE condition that reads the partial match's rows back lazily
// (PREV, LAST, a variable's last row) decides as one given every row
// first, and FIRST and the aggregates, which read them all, too, and so
// does one that reads only the last row answered from another partial
// match at the same node: records, statistics and encoded state agree
// after every line.
func TestLazyRowsEqualsReadingAll(t *testing.T) {
	defines := []string{
		"A AS A.t = 'A', B AS B.t = 'B' AND B.v > LAST(A.v), C AS C.v < PREV(C.v)",
		"A AS A.v > 2, B AS (LAST(B.v, 1) IS NULL OR B.v < LAST(B.v, 1)), C AS C.v > LAST(B.v) + 1",
		"A AS A.t <> 'D', B AS B.v >= FIRST(A.v) AND B.v <= LAST(A.v, 2), C AS C.v > AVG(B.v)",
		"A AS A.t = 'A', B AS PREV(B.v, 2) IS NULL OR B.v <> PREV(B.v, 2), C AS COUNT(A.v) > 1 AND C.v > MAX(B.v)",
		"A AS A.t = 'A', B AS B.v > A.v AND SUM(B.v) < 30, C AS C.t = 'C' AND LAST(B.v, 0) > LAST(A.v, 1)",
	}
	patterns := []string{"A+ B C", "A B+ C{2,}?", "A B* C", "A+? B{1,3} C"}
	var pats []*nfa.Pattern
	for _, pat := range patterns {
		for _, d := range defines {
			q := fmt.Sprintf(`SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
  MEASURES FIRST(A.ts) AS s, LAST(C.v) AS c AFTER MATCH SKIP TO NEXT ROW PATTERN (%s) DEFINE %s)`, pat, d)
			p, err := nfa.CompileSQL(q, "q")
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			pats = append(pats, p)
		}
	}
	matches, hits := 0, 0
	// a wrong answer from another partial match needs two at one node
	// with different earlier rows: a thousand cases meet one
	prop := func(t *rapid.T) {
		p := rapid.SampledFrom(pats).Draw(t, "pattern")
		n := rapid.IntRange(0, 40).Draw(t, "events")
		var lines [][]byte
		for i := 0; i < n; i++ {
			k := rapid.SampledFrom([]string{"x", "y"}).Draw(t, "k")
			typ := rapid.SampledFrom([]string{"A", "B", "C", "D"}).Draw(t, "t")
			v := rapid.IntRange(0, 9).Draw(t, "v")
			lines = append(lines, fmt.Appendf(nil, `{"k":%q,"t":%q,"v":%d,"ts":%d}`, k, typ, v, i))
		}
		m, ref := nfa.NewMatcher(p), nfa.NewMatcher(p)
		nfa.DisableLazyRows(ref)
		runInStep(t, m, ref, lines)
		matches += int(m.Stats().Matches)
		hits += nfa.NodeMemoHits(m)
	}
	for range 10 {
		if rapid.Check(t, prop); t.Failed() {
			return
		}
	}
	if matches == 0 || hits == 0 {
		t.Fatalf("%d matches, %d conditions answered from another partial match's: the test checks little", matches, hits)
	}
	t.Logf("%d matches, %d conditions answered from another partial match's", matches, hits)
}

// testdata/loop-state holds the state of three loops (SQL A+ B with a
// LAST condition, a strict and a relaxed loop document) after 40 lines,
// written by the release before versions were extended in place: this
// code writes the same bytes after the same lines, and restored from
// them it goes on to the records of an uninterrupted run.
func TestRestoresLoopStateOfPreviousRelease(t *testing.T) {
	dir := "testdata/loop-state/"
	in, err := os.ReadFile(dir + "input.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(in), []byte("\n"))
	for _, name := range []string{"sql", "strict", "relaxed"} {
		var p *nfa.Pattern
		if name == "sql" {
			q, err := os.ReadFile(dir + "sql.sql")
			if err != nil {
				t.Fatal(err)
			}
			if p, err = nfa.CompileSQL(string(q), "loop"); err != nil {
				t.Fatal(err)
			}
		} else {
			d, err := os.ReadFile(dir + name + ".json")
			if err != nil {
				t.Fatal(err)
			}
			if p, err = nfa.CompileBytes(d); err != nil {
				t.Fatal(err)
			}
		}
		old, err := os.ReadFile(dir + name + "-after-40.bin")
		if err != nil {
			t.Fatal(err)
		}
		whole := nfa.NewMatcher(p)
		feedLines(t, whole, lines[:40], false)
		now, err := whole.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(now, old) {
			t.Errorf("%s: the state after 40 lines is not the previous release's", name)
		}
		want := feedLines(t, whole, lines[40:], true)
		restored, err := nfa.UnmarshalMatcher(p, old)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := feedLines(t, restored, lines[40:], true)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: restored from the previous release's state:\n%s\nuninterrupted:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if len(want) == 0 {
			t.Errorf("%s: no record after the restore: the test checks little", name)
		}
	}
}
