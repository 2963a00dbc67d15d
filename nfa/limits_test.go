package nfa_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cepcluster/cep/internal/conformance"
	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/nfa/expr"
)

// specDoc builds a pattern document from stages and emit fields.
func specDoc(t *testing.T, stages []map[string]any, emit map[string]string, extra map[string]any) []byte {
	t.Helper()
	doc := map[string]any{"name": "p", "key": "e.k", "time": "e.ts", "stages": stages}
	if emit != nil {
		doc["emit"] = emit
	}
	for k, v := range extra {
		doc[k] = v
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func stage(name string, kv ...any) map[string]any {
	st := map[string]any{"name": name, "where": `e.t == "` + name + `"`}
	for i := 0; i+1 < len(kv); i += 2 {
		st[kv[i].(string)] = kv[i+1]
	}
	return st
}

// wantLimit checks err is a refusal for the named limit with the value in
// its message.
func wantLimit(t *testing.T, err error, limit string, value int64) {
	t.Helper()
	var le *nfa.LimitError
	if !errors.As(err, &le) {
		t.Fatalf("want a %s refusal, got %v", limit, err)
	}
	if le.Limit != limit || le.Value != value {
		t.Fatalf("refused by %s at %d, want %s at %d: %v", le.Limit, le.Value, limit, value, err)
	}
	for _, s := range []string{limit, fmt.Sprint(value), "docs/limits.md"} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not name %q", err, s)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("error is not one line: %q", err)
	}
}

func TestLimitQuantifier(t *testing.T) {
	for _, c := range []struct {
		field string
		at    func(n int) any
	}{
		{"times", func(n int) any { return n }},
		{"times", func(n int) any { return []int{1, n} }},
		{"timesOrMore", func(n int) any { return n }},
	} {
		ok := specDoc(t, []map[string]any{stage("a", c.field, c.at(nfa.MaxQuantifier)), stage("b")}, nil, nil)
		if _, err := nfa.CompileBytes(ok); err != nil {
			t.Fatalf("%s at the limit: %v", c.field, err)
		}
		over := specDoc(t, []map[string]any{stage("a", c.field, c.at(nfa.MaxQuantifier+1)), stage("b")}, nil, nil)
		_, err := nfa.CompileBytes(over)
		wantLimit(t, err, "MaxQuantifier", nfa.MaxQuantifier+1)
		var pe *nfa.PatternError
		if !errors.As(err, &pe) || pe.Stage != "a" || pe.Field != c.field {
			t.Fatalf("error does not name stage a, field %s: %v", c.field, err)
		}
	}
	q := func(n int) string {
		return fmt.Sprintf(`SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES FIRST(A.ts) AS f PATTERN (A{1,%d} B) DEFINE A AS t = 'A', B AS t = 'B')`, n)
	}
	if _, err := nfa.CompileSQL(q(nfa.MaxQuantifier), "q"); err != nil {
		t.Fatalf("SQL at the limit: %v", err)
	}
	_, err := nfa.CompileSQL(q(19000), "q")
	wantLimit(t, err, "MaxQuantifier", 19000)
}

func TestLimitExpandedStages(t *testing.T) {
	// a group of 10 stages taken 100 times: 1,000 expanded stages
	inner := func(n int) []map[string]any {
		var out []map[string]any
		for i := range n {
			out = append(out, stage(fmt.Sprintf("g%d", i)))
		}
		return out
	}
	group := func(n int) map[string]any {
		return map[string]any{"name": "grp", "group": inner(n), "times": 100}
	}
	if nfa.MaxExpandedStages != 10*100 {
		t.Fatalf("the test assumes MaxExpandedStages = 1000, not %d", nfa.MaxExpandedStages)
	}
	if _, err := nfa.CompileBytes(specDoc(t, []map[string]any{group(10)}, nil, nil)); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	_, err := nfa.CompileBytes(specDoc(t, []map[string]any{group(10), stage("z")}, nil, nil))
	wantLimit(t, err, "MaxExpandedStages", 1001)
	// nesting multiplies without overflowing: refused, not compiled
	deep := map[string]any{"name": "d0", "group": []map[string]any{stage("x")}, "times": 100}
	for i := 1; i < 12; i++ {
		deep = map[string]any{"name": fmt.Sprintf("d%d", i), "group": []map[string]any{deep}, "times": 100}
	}
	_, err = nfa.CompileBytes(specDoc(t, []map[string]any{deep}, nil, nil))
	var le *nfa.LimitError
	if !errors.As(err, &le) || le.Limit != "MaxExpandedStages" {
		t.Fatalf("nested groups: want a MaxExpandedStages refusal, got %v", err)
	}
}

func TestLimitAutomaton(t *testing.T) {
	// the automaton's size follows from the expanded stages, so no
	// document within MaxExpandedStages reaches MaxStates: the largest,
	// 1,000 strict stages, each with an ignore loop and until
	p, err := nfa.CompileBytes(specDoc(t, []map[string]any{stage("a", "times", nfa.MaxQuantifier, "allowCombinations", true),
		{"name": "g", "group": []map[string]any{stage("b", "oneOrMore", true, "until", "e.x == 1"), stage("c", "optional", true), stage("n", "contiguity", "notFollowedBy")}, "times": 100},
		stage("z")}, nil, map[string]any{"within": "1m"}))
	if err != nil {
		var le *nfa.LimitError
		if errors.As(err, &le) && le.Limit != "MaxExpandedStages" {
			t.Fatalf("refused by %s: %v", le.Limit, err)
		}
	} else if s, tr := nfa.AutomatonSize(p); s > nfa.MaxStates || tr > nfa.MaxTransitions {
		t.Fatalf("compiled %d states, %d transitions past the limits", s, tr)
	}
	// and the check itself refuses one over
	wantLimit(t, nfa.CheckAutomaton(nfa.MaxStates+1, 0), "MaxStates", nfa.MaxStates+1)
	wantLimit(t, nfa.CheckAutomaton(nfa.MaxStates, nfa.MaxTransitions+1), "MaxTransitions", nfa.MaxTransitions+1)
	if err := nfa.CheckAutomaton(nfa.MaxStates, nfa.MaxTransitions); err != nil {
		t.Fatalf("at the limits: %v", err)
	}
}

func TestLimitEmit(t *testing.T) {
	fields := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("f%d", i)] = "size(events(\"a\"))"
		}
		return m
	}
	st := []map[string]any{stage("a")}
	if _, err := nfa.CompileBytes(specDoc(t, st, fields(nfa.MaxEmitFields), nil)); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	_, err := nfa.CompileBytes(specDoc(t, st, fields(nfa.MaxEmitFields+1), nil))
	wantLimit(t, err, "MaxEmitFields", nfa.MaxEmitFields+1)

	long := "size(events(\"a\"))" + strings.Repeat(" ", nfa.MaxEmitExprBytes)
	_, err = nfa.CompileBytes(specDoc(t, st, map[string]string{"x": long[:nfa.MaxEmitExprBytes]}, nil))
	if err != nil {
		t.Fatalf("expression at the limit: %v", err)
	}
	_, err = nfa.CompileBytes(specDoc(t, st, map[string]string{"x": long[:nfa.MaxEmitExprBytes+1]}, nil))
	wantLimit(t, err, "MaxEmitExprBytes", nfa.MaxEmitExprBytes+1)

	name := strings.Repeat("n", nfa.MaxEmitNameBytes)
	if _, err := nfa.CompileBytes(specDoc(t, st, map[string]string{name: "1"}, nil)); err != nil {
		t.Fatalf("name at the limit: %v", err)
	}
	_, err = nfa.CompileBytes(specDoc(t, st, map[string]string{name + "n": "1"}, nil))
	wantLimit(t, err, "MaxEmitNameBytes", nfa.MaxEmitNameBytes+1)
}

func TestLimitExpressionBytes(t *testing.T) {
	st := []map[string]any{stage("a")} // where e.t == "a": 10 bytes, key and time 7
	expr := func(n int) string { return "size(events(\"a\"))" + strings.Repeat(" ", n-17) }
	fields := func(total int) map[string]string {
		m := map[string]string{}
		for i := 0; total > 0; i++ {
			n := min(total, nfa.MaxEmitExprBytes)
			m[fmt.Sprintf("f%d", i)] = expr(n)
			total -= n
		}
		return m
	}
	if _, err := nfa.CompileBytes(specDoc(t, st, fields(nfa.MaxExpressionBytes-17), nil)); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	_, err := nfa.CompileBytes(specDoc(t, st, fields(nfa.MaxExpressionBytes-16), nil))
	wantLimit(t, err, "MaxExpressionBytes", nfa.MaxExpressionBytes+1)
}

func TestLimitDocumentSize(t *testing.T) {
	base := specDoc(t, []map[string]any{stage("a")}, nil, nil)
	pad := func(n int) []byte { // JSON allows trailing white space
		return append(append([]byte(nil), base...), []byte(strings.Repeat(" ", n-len(base)))...)
	}
	if _, err := nfa.CompileBytes(pad(nfa.MaxDocumentBytes)); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	_, err := nfa.CompileBytes(pad(nfa.MaxDocumentBytes + 1))
	wantLimit(t, err, "MaxDocumentBytes", nfa.MaxDocumentBytes+1)
	_, err = nfa.ParseSpec(pad(nfa.MaxDocumentBytes + 1))
	wantLimit(t, err, "MaxDocumentBytes", nfa.MaxDocumentBytes+1)

	q := `SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.ts AS f PATTERN (A) DEFINE A AS t = 'A')`
	if _, err := nfa.CompileSQL(q+strings.Repeat(" ", nfa.MaxDocumentBytes-len(q)), "q"); err != nil {
		t.Fatalf("query at the limit: %v", err)
	}
	_, err = nfa.CompileSQL(q+strings.Repeat(" ", nfa.MaxDocumentBytes+1-len(q)), "q")
	wantLimit(t, err, "MaxDocumentBytes", nfa.MaxDocumentBytes+1)
}

func TestLimitSQLPatternVars(t *testing.T) {
	q := func(n int) string {
		var vars, defs []string
		for i := range n {
			vars = append(vars, fmt.Sprintf("V%d", i))
			defs = append(defs, fmt.Sprintf("V%d AS t = 'x'", i))
		}
		return fmt.Sprintf(`SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES FIRST(V0.ts) AS f PATTERN (%s) DEFINE %s)`,
			strings.Join(vars, " "), strings.Join(defs, ", "))
	}
	if _, err := nfa.CompileSQL(q(nfa.MaxSQLPatternVars), "q"); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	_, err := nfa.CompileSQL(q(nfa.MaxSQLPatternVars+1), "q")
	wantLimit(t, err, "MaxSQLPatternVars", nfa.MaxSQLPatternVars+1)
}

func TestLimitExpressionCost(t *testing.T) {
	// one pass over events() is within MaxCost, a nested one is not
	one := specDoc(t, []map[string]any{stage("a", "oneOrMore", true), {"name": "b", "where": `events("a").exists(x, x.u == e.u)`}}, nil, nil)
	if _, err := nfa.CompileBytes(one); err != nil {
		t.Fatalf("a single pass: %v", err)
	}
	nested := specDoc(t, []map[string]any{stage("a", "oneOrMore", true), {"name": "b", "where": `events("a").exists(x, events("a").exists(y, x.u == y.u))`}}, nil, nil)
	_, err := nfa.CompileBytes(nested)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("MaxCost = %d", expr.MaxCost)) || !strings.Contains(err.Error(), "docs/limits.md") {
		t.Fatalf("nested pass: want a MaxCost refusal, got %v", err)
	}
	var pe *nfa.PatternError
	if !errors.As(err, &pe) || pe.Stage != "b" || pe.Field != "where" {
		t.Fatalf("error does not name stage b's where: %v", err)
	}
}

func TestLimitMaxKeys(t *testing.T) {
	st := []map[string]any{stage("a")}
	p, err := nfa.CompileBytes(specDoc(t, st, nil, map[string]any{"maxKeys": nfa.MaxKeysLimit}))
	if err != nil || *p.Spec().MaxKeys != nfa.MaxKeysLimit {
		t.Fatalf("at the limit: %v", err)
	}
	_, err = nfa.CompileBytes(specDoc(t, st, nil, map[string]any{"maxKeys": nfa.MaxKeysLimit + 1}))
	wantLimit(t, err, "MaxKeysLimit", nfa.MaxKeysLimit+1)
	if _, err := nfa.CompileBytes(specDoc(t, st, nil, map[string]any{"maxKeys": -1})); err == nil || !strings.Contains(err.Error(), "maxKeys") {
		t.Fatalf("negative maxKeys: %v", err)
	}
}

// TestShippedPatternsWithinLimits compiles every example and conformance
// case: none may come near enough to a limit to be refused by it.
func TestShippedPatternsWithinLimits(t *testing.T) {
	n := 0
	files, _ := filepath.Glob("../examples/*")
	for _, f := range files {
		if !strings.HasSuffix(f, ".yaml") && !strings.HasSuffix(f, ".sql") || strings.HasSuffix(f, ".test.yaml") {
			continue // a pattern's test file (cepctl pattern test) is no pattern
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nfa.CompileNamed(b, ""); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		n++
	}
	cases, err := conformance.Load("../testdata/conformance")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		var err error
		if c.IsSQL() {
			_, err = nfa.CompileSQL(*c.SQL, "t")
		} else {
			_, err = nfa.CompileBytes(c.Pattern)
		}
		var le *nfa.LimitError
		if errors.As(err, &le) {
			t.Errorf("%s: %v", c.Name, err)
		}
		n++
	}
	if n < 100 {
		t.Fatalf("only %d patterns found", n)
	}
}

// docs/limits.md lists every limit with its value.
func TestLimitsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/limits.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range nfa.Limits() {
		if row := fmt.Sprintf("| `%s` | %d |", l.Name, l.Value); !strings.Contains(string(b), row) {
			t.Errorf("docs/limits.md has no row %q", row)
		}
	}
}

// ObserveFrom moves the watermark as the event would have, without taking
// it: the events waiting before it are processed, and no state is made for
// its key.
func TestObserveFromMovesWatermarkOnly(t *testing.T) {
	p, err := nfa.CompileBytes(specDoc(t, []map[string]any{stage("A"), stage("B")}, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	in := func(k, ty string, ts int64) nfa.Input {
		return nfa.Input{Data: map[string]any{"k": k, "t": ty, "ts": ts}, Raw: []byte(fmt.Sprintf(`{"k":%q,"t":%q,"ts":%d}`, k, ty, ts))}
	}
	ref, m := nfa.NewMatcher(p), nfa.NewMatcher(p)
	var want, got int
	for _, x := range []*nfa.Matcher{ref, m} {
		x.EventAt("x", 10, in("x", "A", 10))
		x.EventAt("x", 20, in("x", "B", 20))
	}
	want = len(ref.EventAt("y", 30, in("y", "C", 30)))
	got = len(m.ObserveFrom("", 30))
	if want != 1 || got != want || m.CurrentWatermark() != ref.CurrentWatermark() {
		t.Fatalf("records %d (the event's %d), watermark %d (the event's %d)", got, want, m.CurrentWatermark(), ref.CurrentWatermark())
	}
	if m.HasKey("y") || !ref.HasKey("y") {
		t.Fatal("ObserveFrom made state for a key, or the event did not")
	}
}
