package nfa_test

import (
	"strings"
	"testing"

	"github.com/cepcluster/cep/nfa"
)

// Every reference to a stage is checked when a pattern is compiled. Each
// case is refused naming the reference, where it is and the stages there
// are; the same document with the reference spelt right compiles, so it is
// the reference alone that is refused.
func TestStageReferences(t *testing.T) {
	const stages = `"stages": [{"name": "login", "where": "e.type == 'LOGIN'"},
		{"name": "g", "group": [{"name": "failed", "where": "WHERE"}, {"name": "more", "oneOrMore": true, "until": "UNTIL"}]},
		{"name": "logout", "where": "LOGOUT"}]`
	doc := func(key, emit, where, until, logout, skip string) string {
		s := strings.NewReplacer("WHERE", where, "UNTIL", until, "LOGOUT", logout).Replace(stages)
		return `{"name": "p", "key": "` + key + `", "within": "5m", "skip": "` + skip + `", "emit": {"n": "` + emit + `"}, ` + s + `}`
	}
	ok := doc("e.k", `size(events('failed'))`, `e.type == 'FAIL'`, `e.stop`, `e.type == 'LOGOUT'`, "skipToFirst:login")
	if err := compileChecked(ok); err != nil {
		t.Fatalf("the reference document: %v", err)
	}
	for _, tc := range []struct {
		name, doc, right, want string
	}{
		{"emit",
			doc("e.k", `size(events('faild'))`, `e.type == 'FAIL'`, `e.stop`, `e.type == 'LOGOUT'`, "noSkip"),
			doc("e.k", `size(events('failed'))`, `e.type == 'FAIL'`, `e.stop`, `e.type == 'LOGOUT'`, "noSkip"),
			`pattern "p": field "emit.n": events("faild") (at 1:6) names no stage of the pattern (its stages: login, failed, more, logout); did you mean "failed"?`},
		{"where",
			doc("e.k", `1`, `e.type == 'FAIL'`, `e.stop`, `e.amount > events('nosuch')[0].amount`, "noSkip"),
			doc("e.k", `1`, `e.type == 'FAIL'`, `e.stop`, `e.amount > events('failed')[0].amount`, "noSkip"),
			`pattern "p": stage "logout": field "where": events("nosuch") (at 1:12) names no stage of the pattern (its stages: login, failed, more, logout)`},
		{"where inside a group",
			doc("e.k", `1`, `size(events('Login')) > 0`, `e.stop`, `true`, "noSkip"),
			doc("e.k", `1`, `size(events('login')) > 0`, `e.stop`, `true`, "noSkip"),
			`pattern "p": stage "g/failed": field "where": events("Login") (at 1:6) names no stage of the pattern (its stages: login, failed, more, logout); did you mean "login"?`},
		{"until",
			doc("e.k", `1`, `true`, `sum(events('mor').map(x, x.n)) > 3`, `true`, "noSkip"),
			doc("e.k", `1`, `true`, `sum(events('more').map(x, x.n)) > 3`, `true`, "noSkip"),
			`pattern "p": stage "g/more": field "until": events("mor") (at 1:5) names no stage of the pattern (its stages: login, failed, more, logout); did you mean "more"?`},
		{"a group's name",
			doc("e.k", `size(events('g'))`, `true`, `e.stop`, `true`, "noSkip"),
			doc("e.k", `size(events('more'))`, `true`, `e.stop`, `true`, "noSkip"),
			`pattern "p": field "emit.n": events("g") (at 1:6) names a group, which holds no events of its own: name one of its stages (failed, more)`},
		{"key",
			doc(`string(size(events('x')))`, `1`, `true`, `e.stop`, `true`, "noSkip"),
			doc(`string(size(events('login')))`, `1`, `true`, `e.stop`, `true`, "noSkip"),
			`pattern "p": field "key": events("x") (at 1:13) names no stage of the pattern (its stages: login, failed, more, logout)`},
		{"skip target",
			doc("e.k", `1`, `true`, `e.stop`, `true`, "skipToFirst:logut"),
			doc("e.k", `1`, `true`, `e.stop`, `true`, "skipToFirst:logout"),
			`pattern "p": field "skip": The pattern name specified in AfterMatchSkipStrategy "logut" can not be found in the given Pattern (its stages: login, g, logout); did you mean "logout"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := compileChecked(tc.doc)
			if err == nil || err.Error() != tc.want {
				t.Errorf("got  %v\nwant %s", err, tc.want)
			}
			if tc.name != "skip target" {
				// what a shard's log deployed before the check still
				// compiles, the same on every replica
				if _, err := nfa.CompileBytes([]byte(tc.doc)); err != nil {
					t.Errorf("Compile: %v", err)
				}
			}
			if err := compileChecked(tc.right); err != nil {
				t.Errorf("spelt right: %v", err)
			}
		})
	}
}

func compileChecked(doc string) error {
	p, err := nfa.CompileBytes([]byte(doc))
	if err != nil {
		return err
	}
	return p.CheckStageRefs()
}

// A reference whose stage is computed from the event cannot be checked
// before it runs, and is left to run.
func TestStageReferenceDynamic(t *testing.T) {
	if err := compileChecked(`{"name": "p", "stages": [{"name": "a"}, {"name": "b", "where": "size(events(e.prev)) > 0"}]}`); err != nil {
		t.Fatal(err)
	}
}

// The pattern variables of a query are checked by its own checker: a
// reference to a variable PATTERN does not have is refused in MEASURES,
// DEFINE and the skip target alike.
func TestStageReferencesSQL(t *testing.T) {
	const q = `SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES %s AS m
		AFTER MATCH SKIP %s PATTERN (A B) DEFINE A AS A.v > 0, B AS %s)`
	for _, tc := range []struct {
		name, measure, skip, define, want string
	}{
		{"measures", "C.v", "PAST LAST ROW", "B.v > 1", `variable 'C' is not defined in PATTERN (A, B)`},
		{"define", "A.v", "PAST LAST ROW", "X.v > 1", `variable 'X' is not defined in PATTERN (A, B)`},
		{"skip", "A.v", "TO FIRST C", "B.v > 1", `variable 'C' is not defined in PATTERN (A, B)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.NewReplacer("%s AS m", tc.measure+" AS m", "SKIP %s", "SKIP "+tc.skip, "B AS %s", "B AS "+tc.define).Replace(q)
			_, err := nfa.CompileSQL(src, "q")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
