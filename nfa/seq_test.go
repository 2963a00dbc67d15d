package nfa_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/nfa"
)

// genSeqSpec draws a sequence of two to five single-event stages with
// conditions on the event alone (what Pattern.seq covers), each joined to
// the one before by followedByAny (mostly), followedBy or next, some with
// a previous-and-current window: conditions
// that overlap (an event can move partial matches at several stages at
// once) or fail on some events (counted as errors), with or without a
// window, any skip strategy.
func genSeqSpec(t *rapid.T) *nfa.Spec {
	n := rapid.IntRange(2, 5).Draw(t, "stages")
	s := &nfa.Spec{Name: "p", Key: "e.k", Time: "e.ts",
		Skip: rapid.SampledFrom([]string{"noSkip", "skipToNext", "skipPastLastEvent",
			"skipToFirst:s0", "skipToLast:s0", "skipToFirst:s1", "skipToLast:s1"}).Draw(t, "skip")}
	for i := 0; i < n; i++ {
		st := nfa.Stage{Name: fmt.Sprintf("s%d", i)}
		typ := rapid.SampledFrom([]string{"A", "B", "C"}).Draw(t, "type")
		switch rapid.IntRange(0, 7).Draw(t, "cond") {
		case 0:
			other := rapid.SampledFrom([]string{"A", "B", "C", "D"}).Draw(t, "other")
			st.Where = fmt.Sprintf("e.t == %q || e.t == %q", typ, other)
		case 1:
			st.Where = `e.t != "D"`
		case 2:
			// fails on the events without a field n
			st.Where = fmt.Sprintf("e.t == %q && e.n > 0", typ)
		default:
			st.Where = fmt.Sprintf("e.t == %q", typ)
		}
		if i > 0 {
			st.Contiguity = rapid.SampledFrom([]string{"followedByAny", "followedByAny", "followedBy", "next"}).Draw(t, "contiguity")
			drawStageWithin(t, &st)
		}
		s.Stages = append(s.Stages, st)
	}
	drawWithin(t, s)
	if ooo := rapid.IntRange(0, 3).Draw(t, "outOfOrderness"); ooo > 0 {
		// events wait for the watermark: after StopStarting, one that
		// came later can be processed before one that came earlier
		s.OutOfOrderness = &nfa.Duration{Millis: int64(ooo)}
	}
	return s
}

// genManyKeysInput is genInput over three keys, more disorder (events
// that arrive after StopStarting can come before earlier arrivals), some
// events with a field n, and longer.
func genManyKeysInput(t *rapid.T) [][]byte {
	n := rapid.IntRange(0, 80).Draw(t, "events")
	ts := int64(0)
	var lines [][]byte
	for i := 0; i < n; i++ {
		if rapid.IntRange(0, 15).Draw(t, "wmLine") == 0 {
			lines = append(lines, fmt.Appendf(nil, `{"$watermark":%d}`, ts-2))
		}
		ts += int64(rapid.IntRange(0, 3).Draw(t, "gap"))
		evTs := ts - int64(rapid.IntRange(0, 3).Draw(t, "disorder"))
		typ := rapid.SampledFrom([]string{"A", "B", "C", "D"}).Draw(t, "t")
		key := rapid.SampledFrom([]string{"x", "y", "z"}).Draw(t, "k")
		extra := ""
		if rapid.Bool().Draw(t, "hasN") {
			extra = fmt.Sprintf(`,"n":%d`, rapid.IntRange(-1, 2).Draw(t, "n"))
		}
		lines = append(lines, fmt.Appendf(nil, `{"id":"e%d","k":%q,"t":%q,"ts":%d%s}`, i, key, typ, evTs, extra))
	}
	return lines
}

// A sequence of single-event stages runs per start event (Pattern.seq)
// instead of visiting every partial match on every event. Checked against
// the general step: after every line the same records in the same order,
// statistics and encoded state (the same bytes: a key's state converts to
// the general one exactly), whether timeouts are reported (a key then
// turns general at its first timeout) or not, under a bound on partial
// matches that may be reached (likewise), with the matcher restored in
// mid-stream from either's encoded state and draining (StopStarting)
// from some line on.
func TestSeqEqualsGeneral(t *testing.T) { testSeqEqualsGeneral(t, 0) }

// The same with trees numbered again from 0 after every few, in every
// matcher (restored ones too): a key that is never idle counts up to the
// limit in the end.
func TestSeqTreeNumbersWrap(t *testing.T) { testSeqEqualsGeneral(t, 3) }

// testSeqEqualsGeneral runs its matchers with SetMaxTreeID(maxTreeID).
func testSeqEqualsGeneral(t *testing.T, maxTreeID int32) {
	limit := func(m *nfa.Matcher) { nfa.SetMaxTreeID(m, maxTreeID) }
	seqSteps, matches, restored := 0, 0, 0
	checkCovering(t, func() bool { return seqSteps > 0 && matches > 0 && restored > 0 }, func(t *rapid.T) {
		p := compileOrSkip(t, genSeqSpec(t))
		if !nfa.SeqPattern(p) {
			t.Fatalf("a sequence of single-event stages does not run per start event:\n%s", p.Describe())
		}
		m, ref := nfa.NewMatcher(p), nfa.NewMatcher(p)
		nfa.DisableSeq(ref)
		report := rapid.Bool().Draw(t, "reportTimeouts")
		bound := rapid.SampledFrom([]int{0, 3, 10, nfa.DefaultMaxPartialMatches}).Draw(t, "maxPartialMatches")
		for _, x := range []*nfa.Matcher{m, ref} {
			limit(x)
			configure(x, func(c *nfa.Config) { c.ReportTimeouts = report })
			configure(x, func(c *nfa.Config) { c.MaxPartialMatches = bound })
		}
		lines := genManyKeysInput(t)
		drainAt := rapid.IntRange(-1, len(lines)).Draw(t, "drainAt")
		restoreAt := rapid.IntRange(-1, len(lines)).Draw(t, "restoreAt")
		fromGeneral := rapid.Bool().Draw(t, "fromGeneral")
		var base nfa.Stats
		for i := range lines {
			if i == drainAt {
				m.StopStarting()
				ref.StopStarting()
			}
			if i == restoreAt {
				from := m
				if fromGeneral {
					from = ref
				}
				m = restoreMatcher(t, p, from, limit)
				configure(m, func(c *nfa.Config) { c.ReportTimeouts, c.MaxPartialMatches = report, bound })
				base = ref.Stats()
				restored++
			}
			seqSteps += nfa.SeqKeys(m)
			stepEqual(t, m, ref, lines[i], i, base, nil, true)
		}
		finishEqual(t, m, ref, nil)
		matches += int(ref.Stats().Matches)
	})
	if seqSteps == 0 || matches == 0 {
		t.Fatalf("%d keys ran per start event, %d matches: the test checks nothing", seqSteps, matches)
	}
	t.Logf("%d key steps per start event, %d matches, %d restores", seqSteps, matches, restored)
}

// genSeqQuery draws a MATCH_RECOGNIZE query whose pattern is a sequence
// of two to four variables in a row (strict contiguity) with DEFINE
// conditions on the row alone (an undefined variable matches every row),
// MEASURES over the match, any AFTER MATCH SKIP, with or without WITHIN.
func genSeqQuery(t *rapid.T) string {
	n := rapid.IntRange(2, 4).Draw(t, "variables")
	var vars, defines []string
	for i := range n {
		v := fmt.Sprintf("V%d", i)
		vars = append(vars, v)
		typ := rapid.SampledFrom([]string{"A", "B", "C"}).Draw(t, "type")
		switch rapid.IntRange(0, 4).Draw(t, "define") {
		case 0: // undefined: every row
		case 1:
			defines = append(defines, fmt.Sprintf("%s AS t = '%s' OR t = 'D'", v, typ))
		default:
			defines = append(defines, fmt.Sprintf("%s AS t = '%s'", v, typ))
		}
	}
	if len(defines) == 0 {
		defines = append(defines, "V0 AS t = 'A'")
	}
	skip := rapid.SampledFrom([]string{"SKIP TO NEXT ROW", "SKIP PAST LAST ROW", "SKIP TO FIRST V1", "SKIP TO LAST V1"}).Draw(t, "skip")
	within := ""
	if rapid.Bool().Draw(t, "within") {
		within = fmt.Sprintf("WITHIN INTERVAL '%d' MILLISECOND ", rapid.IntRange(3, 30).Draw(t, "windowMs"))
	}
	return fmt.Sprintf(`SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
  MEASURES FIRST(V0.id) AS first_id, LAST(V%d.id) AS last_id
  AFTER MATCH %s PATTERN (%s) %sDEFINE %s)`, n-1, skip, strings.Join(vars, " "), within, strings.Join(defines, ", "))
}

// The same for MATCH_RECOGNIZE queries, whose records carry MEASURES and
// never report timeouts.
func TestSeqEqualsGeneralQuery(t *testing.T) {
	seqSteps, matches := 0, 0
	checkCovering(t, func() bool { return seqSteps > 0 && matches > 0 }, func(t *rapid.T) {
		q := genSeqQuery(t)
		p, err := nfa.CompileSQL(q, "s")
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if !nfa.SeqPattern(p) {
			t.Fatalf("a query of variables in a row does not run per start event:\n%s\n%s", q, p.Describe())
		}
		m, ref := nfa.NewMatcher(p), nfa.NewMatcher(p)
		nfa.DisableSeq(ref)
		lines := genManyKeysInput(t)
		restoreAt := rapid.IntRange(-1, len(lines)).Draw(t, "restoreAt")
		var base nfa.Stats
		for i := range lines {
			if i == restoreAt {
				m, base = restoreMatcher(t, p, m), ref.Stats()
			}
			seqSteps += nfa.SeqKeys(m)
			stepEqual(t, m, ref, lines[i], i, base, nil, true)
		}
		finishEqual(t, m, ref, nil)
		matches += int(ref.Stats().Matches)
	})
	if seqSteps == 0 || matches == 0 {
		t.Fatalf("%d keys ran per start event, %d matches: the test checks nothing", seqSteps, matches)
	}
	t.Logf("%d key steps per start event, %d matches", seqSteps, matches)
}

// Encoding only reads a key: several may encode one at once (a Raft
// snapshot and a savepoint, each under the state's read lock), so the
// sequence step's key must not be encoded through its scratch buffers
// (the race detector fails this test when it is).
func TestSeqKeyEncodesConcurrently(t *testing.T) {
	p, err := nfa.CompileBytes([]byte(`name: any
key: e.k
time: e.ts
stages:
  - name: a
    where: e.t == "a"
  - name: b
    contiguity: followedByAny
    where: e.t == "b"
  - name: c
    contiguity: followedByAny
    where: e.t == "c"
`))
	if err != nil {
		t.Fatal(err)
	}
	r := nfa.NewRunner(p)
	for i := range 40 {
		line := fmt.Sprintf(`{"k":"x","t":%q,"ts":%d}`, []string{"a", "b", "a", "b"}[i%4], 1000+i)
		if _, err := r.Line([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	m := r.Matchers()[0]
	want := string(m.AppendKey(nil, "x"))
	var wg sync.WaitGroup
	got := make([]string, 4)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				got[i] = string(m.AppendKey(nil, "x"))
			}
		}()
	}
	wg.Wait()
	for i, g := range got {
		if g != want {
			t.Fatalf("encoder %d wrote other bytes than one alone", i)
		}
	}
}
