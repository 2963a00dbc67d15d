package nfa_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/nfa"
)

// genSequenceSpec draws a plain sequence of one to five singleton stages
// (what Pattern.ownPaths covers): any contiguity that takes events,
// conditions that overlap (a stage may take two types, so an event can
// move partial matches at several stages at once), some over events(),
// windows of both kinds and any skip strategy.
func genSequenceSpec(t *rapid.T) *nfa.Spec {
	n := rapid.IntRange(1, 5).Draw(t, "stages")
	s := &nfa.Spec{Name: "p", Key: "e.k", Time: "e.ts",
		Skip: rapid.SampledFrom([]string{"noSkip", "skipToNext", "skipPastLastEvent", "skipToFirst:s0", "skipToLast:s0"}).Draw(t, "skip")}
	for i := 0; i < n; i++ {
		st := nfa.Stage{Name: fmt.Sprintf("s%d", i)}
		typ := rapid.SampledFrom([]string{"A", "B", "C"}).Draw(t, "type")
		switch rapid.IntRange(0, 6).Draw(t, "cond") {
		case 6:
			st.Where = `e.t != "D"`
		case 0:
			other := rapid.SampledFrom([]string{"A", "B", "C", "D"}).Draw(t, "other")
			st.Where = fmt.Sprintf("e.t == %q || e.t == %q", typ, other)
		case 1:
			if i > 0 {
				st.Where = fmt.Sprintf("e.t == %q && size(events(\"s0\")) > 0", typ)
				break
			}
			fallthrough
		default:
			st.Where = fmt.Sprintf("e.t == %q", typ)
		}
		if i > 0 {
			st.Contiguity = rapid.SampledFrom([]string{"next", "followedBy", "followedByAny", "followedByAny"}).Draw(t, "contiguity")
			drawStageWithin(t, &st)
		}
		s.Stages = append(s.Stages, st)
	}
	drawWithin(t, s)
	return s
}

// A plain sequence makes a node per partial match for each event it takes
// instead of one per event and stage shared through versioned edges
// (Pattern.ownPaths), because Flink's extraction then always follows a
// partial match's own events. Checked against the shared nodes Flink
// keeps: after every line, the same records (in the same order),
// statistics and partial-match and buffered-event counts; also when the
// matcher is restored in mid-stream from either matcher's encoded state
// (a state written with shared nodes continues with nodes of its own).
func TestOwnPathsEqualsSharedNodes(t *testing.T) {
	records := 0
	rapid.Check(t, func(t *rapid.T) {
		p := compileOrSkip(t, genSequenceSpec(t))
		records += checkOwnPathsAgainstShared(t, p, genInput(t))
	})
	if records == 0 {
		t.Fatal("no record was compared")
	}
	t.Logf("%d records compared", records)
}

// The same for a sequence of fourteen stages that take most events, fed
// one key's events: partial matches get versions longer than an ownTake
// holds inline. (followedBy: with followedByAny throughout the partial
// matches would number in the millions.)
func TestOwnPathsLongSequence(t *testing.T) {
	spec := &nfa.Spec{Name: "p", Key: "e.k", Time: "e.ts", Within: &nfa.Duration{Millis: 200}}
	for i := range 14 {
		st := nfa.Stage{Name: fmt.Sprintf("s%d", i), Where: `e.t != "D"`}
		if i > 0 {
			st.Contiguity = "followedBy"
		}
		if i == 13 {
			st.Contiguity = "followedByAny"
		}
		spec.Stages = append(spec.Stages, st)
	}
	p, err := nfa.Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	records := 0
	rapid.Check(t, func(t *rapid.T) {
		var lines [][]byte
		for i := range rapid.IntRange(14, 40).Draw(t, "events") {
			typ := rapid.SampledFrom([]string{"A", "B", "C", "D"}).Draw(t, "t")
			lines = append(lines, fmt.Appendf(nil, `{"id":"e%d","k":"x","t":%q,"ts":%d}`, i, typ, 2*i))
		}
		records += checkOwnPathsAgainstShared(t, p, lines)
	})
	if records == 0 {
		t.Fatal("no record was compared")
	}
}

// checkOwnPathsAgainstShared feeds lines to a matcher for p and to one
// that shares nodes, restoring the first in mid-stream from either's
// encoded state, and fails unless records, statistics and counts agree
// after every line. It returns the number of records compared.
func checkOwnPathsAgainstShared(t *rapid.T, p *nfa.Pattern, lines [][]byte) int {
	if !nfa.OwnPaths(p) {
		t.Fatalf("a plain sequence does not get nodes of its own:\n%s", p.Describe())
	}
	m, ref := nfa.NewMatcher(p), nfa.NewMatcher(p)
	nfa.ShareNodes(ref)
	restoreAt := rapid.IntRange(-1, len(lines)).Draw(t, "restoreAt")
	fromShared := rapid.Bool().Draw(t, "fromShared")
	var base nfa.Stats
	records := 0
	for i := range lines {
		if i == restoreAt {
			from := m
			if fromShared {
				from = ref
			}
			m, base = restoreMatcher(t, p, from), ref.Stats()
		}
		// (shared nodes encode differently)
		records += stepEqual(t, m, ref, lines[i], i, base, nil, false)
	}
	if got, want := recordsJSON(t, m.Finish(true)), recordsJSON(t, ref.Finish(true)); !slices.Equal(got, want) {
		t.Fatalf("finish: records\n%v\nwant\n%v", got, want)
	}
	return records
}

// Only plain sequences get nodes of their own: a loop, an optional stage,
// a negation or a quantified group can make Flink's extraction follow
// another partial match's events through a shared node.
func TestOwnPathsOnlyForPlainSequences(t *testing.T) {
	two := 2
	stage := func(name, contiguity string) nfa.Stage {
		return nfa.Stage{Name: name, Where: `e.t == "A"`, Contiguity: contiguity}
	}
	cases := []struct {
		name   string
		stages []nfa.Stage
		within int64
		own    bool
	}{
		{"sequence", []nfa.Stage{stage("a", ""), stage("b", "next"), stage("c", "followedBy"), stage("d", "followedByAny")}, 0, true},
		{"one stage", []nfa.Stage{stage("a", "")}, 10, true},
		{"group of singletons", []nfa.Stage{stage("a", ""), {Name: "g", Contiguity: "followedBy", Group: []nfa.Stage{stage("b", ""), stage("c", "followedByAny")}}}, 0, true},
		{"oneOrMore", []nfa.Stage{stage("a", ""), func() nfa.Stage { s := stage("b", "followedBy"); s.OneOrMore = true; return s }(), stage("c", "followedBy")}, 0, false},
		{"times", []nfa.Stage{func() nfa.Stage { s := stage("a", ""); s.Times = &nfa.Times{From: 2, To: 2}; return s }(), stage("b", "followedBy")}, 0, false},
		{"timesOrMore", []nfa.Stage{stage("a", ""), func() nfa.Stage { s := stage("b", "followedByAny"); s.TimesOrMore = &two; return s }()}, 0, false},
		{"optional", []nfa.Stage{stage("a", ""), func() nfa.Stage { s := stage("b", "followedBy"); s.Optional = true; return s }(), stage("c", "followedBy")}, 0, false},
		{"notNext", []nfa.Stage{stage("a", ""), stage("b", "notNext"), stage("c", "followedBy")}, 0, false},
		{"notFollowedBy", []nfa.Stage{stage("a", ""), stage("b", "notFollowedBy"), stage("c", "followedBy")}, 0, false},
		{"notFollowedBy last", []nfa.Stage{stage("a", ""), stage("b", "notFollowedBy")}, 10, false},
		{"quantified group", []nfa.Stage{stage("a", ""), {Name: "g", Contiguity: "followedBy", Times: &nfa.Times{From: 2, To: 2}, Group: []nfa.Stage{stage("b", ""), stage("c", "followedBy")}}}, 0, false},
	}
	for _, c := range cases {
		s := &nfa.Spec{Name: "p", Key: "e.k", Stages: c.stages}
		if c.within > 0 {
			s.Within = &nfa.Duration{Millis: c.within}
		}
		p, err := nfa.Compile(s)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := nfa.OwnPaths(p); got != c.own {
			t.Errorf("%s: own paths %v, want %v\n%s", c.name, got, c.own, p.Describe())
		}
	}
}

// State encoded before nodes were referred to by their place (version 2:
// by event and stage, one node per event and stage) is still restored,
// whole or key by key (RestoreKeyVersion): testdata/state-v2 holds the
// state of a matcher after the first 40 lines of its input, written by
// the version-2 encoder, and the restored matchers continue with the
// records of an uninterrupted run.
func TestRestoresVersion2State(t *testing.T) {
	doc, err := os.ReadFile("testdata/state-v2/pattern.json")
	if err != nil {
		t.Fatal(err)
	}
	p, err := nfa.CompileBytes(doc)
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.ReadFile("testdata/state-v2/input.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	state, err := os.ReadFile("testdata/state-v2/state-after-40.bin")
	if err != nil {
		t.Fatal(err)
	}
	if state[4] != 2 {
		t.Fatalf("the state is of version %d, not 2", state[4])
	}
	lines := bytes.Split(bytes.TrimSpace(in), []byte("\n"))
	whole := nfa.NewMatcher(p)
	feedLines(t, whole, lines[:40], false)
	wp, wb := whole.Totals()
	want := feedLines(t, whole, lines[40:], true)
	m, err := nfa.UnmarshalMatcher(p, state)
	if err != nil {
		t.Fatal(err)
	}
	// The keys alone, restored under a header of the current version (the
	// key groups of a savepoint written by an older release, read with the
	// headers of another file): the header's layout did not change, only
	// its version byte. Read as the current version, they are refused.
	split := len(m.AppendHeader(nil))
	hdr := append([]byte(nil), state[:split]...)
	hdr[4] = nfa.StateVersion
	byKey, err := nfa.UnmarshalHeader(p, hdr)
	if err != nil {
		t.Fatal(err)
	}
	keys := state[split:]
	n, err := readUvarint(&keys)
	if err != nil || n == 0 {
		t.Fatalf("%d keys: %v", n, err)
	}
	if _, err := byKey.RestoreKey(keys); err == nil {
		t.Fatal("keys of version 2 were read as the current version")
	}
	for range n {
		if keys, err = byKey.RestoreKeyVersion(keys, 2); err != nil {
			t.Fatal(err)
		}
	}
	if len(keys) != 0 {
		t.Fatalf("%d bytes left after the keys", len(keys))
	}
	for _, r := range []*nfa.Matcher{m, byKey} {
		if gp, gb := r.Totals(); gp != wp || gb != wb || gp == 0 {
			t.Fatalf("restored %d partial matches and %d buffered events, want %d and %d", gp, gb, wp, wb)
		}
		got := feedLines(t, r, lines[40:], true)
		if !slices.Equal(got, want) || len(want) == 0 {
			t.Fatalf("records after restoring\n%v\nwant\n%v", got, want)
		}
	}
}

func readUvarint(b *[]byte) (int, error) {
	v, n := binary.Uvarint(*b)
	if n <= 0 {
		return 0, fmt.Errorf("bad count")
	}
	*b = (*b)[n:]
	return int(v), nil
}

// The lists inside the records of one call are cut from arrays the matcher
// reuses at its next call: within a call that times out thousands of
// partial matches (the arrays are replaced several times on the way),
// every record still holds its own events. Each event carries its input
// position as its id and a type, so a record's positions, its events'
// ids, its stages' types and its times must agree.
func TestRecordsOfACallStayIntact(t *testing.T) {
	p, err := nfa.CompileBytes([]byte(`{"name":"p","key":"e.k","time":"e.ts","within":100000,"stages":[
		{"name":"a","where":"e.t == \"A\""},
		{"name":"b","contiguity":"followedByAny","where":"e.t == \"B\""},
		{"name":"c","contiguity":"followedByAny","where":"e.t == \"C\""}]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := nfa.NewMatcher(p)
	types := []string{"A", "B", "A", "B", "B"} // never C: everything times out
	for i := range 3000 {
		raw := fmt.Appendf(nil, `{"id":%d,"k":"k%d","t":%q,"ts":%d}`, i, i%40, types[i%len(types)], i)
		in, _, _, err := nfa.ParseLine(raw)
		if err != nil {
			t.Fatal(err)
		}
		in.Pos = uint64(i)
		if _, err := m.Event(in); err != nil {
			t.Fatal(err)
		}
	}
	recs := m.Finish(true)
	if len(recs) < 1000 {
		t.Fatalf("%d records: the call should time out thousands", len(recs))
	}
	stageType := map[string]string{"a": "A", "b": "B"}
	for i := range recs {
		r := &recs[i]
		var n int
		for _, se := range r.Events {
			for _, raw := range se.Events {
				var ev struct {
					ID int64  `json:"id"`
					T  string `json:"t"`
					TS int64  `json:"ts"`
				}
				if err := json.Unmarshal(raw, &ev); err != nil {
					t.Fatal(err)
				}
				if n >= len(r.Positions) || r.Positions[n] != uint64(ev.ID) || stageType[se.Stage] != ev.T || (n == 0 && r.Start != ev.TS) {
					t.Fatalf("record %d (%s, positions %v, start %d): event %d is %s", i, r.Type, r.Positions, r.Start, n, raw)
				}
				n++
			}
		}
		if n != len(r.Positions) || n == 0 || r.TimeoutAt != r.Start+100000 {
			t.Fatalf("record %d: %d events, positions %v, start %d, timeoutAt %d", i, n, r.Positions, r.Start, r.TimeoutAt)
		}
	}
}

// feedLines feeds input lines to m and returns its records as JSON, with
// those of the end of input when finish is set.
func feedLines(t *testing.T, m *nfa.Matcher, lines [][]byte, finish bool) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		pi, _, _, err := nfa.ParseLine(l)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := m.Event(pi)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, recordsJSON(t, recs)...)
	}
	if finish {
		out = append(out, recordsJSON(t, m.Finish(true))...)
	}
	return out
}
