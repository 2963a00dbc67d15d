package nfa_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cepcluster/cep/nfa"
)

func TestWarnings(t *testing.T) {
	example, err := os.ReadFile("../examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, spec string
		want       []string
	}{
		{"the README's example", string(example), nil},
		{"one stage without a window", `{"name": "p", "key": "e.k", "stages": [{"name": "a"}]}`, nil},
		{"no key", `{"name": "p", "within": "5m", "stages": [{"name": "a"}, {"name": "b"}]}`, []string{
			`pattern "p": field "key": none: every event has the key "", so one key holds all the pattern's partial matches and, in a cluster, one shard applies all its events`,
		}},
		{"no window", `{"name": "p", "key": "e.k", "stages": [{"name": "a"}, {"name": "b", "contiguity": "next"}]}`, []string{
			`pattern "p": field "within": none: a partial match that never completes keeps its events for ever, and so does its key; give the pattern a window`,
		}},
		{"a window on a middle stage bounds the whole match", `{"name": "p", "key": "e.k", "stages": [{"name": "a"}, {"name": "b", "within": "1m"}, {"name": "c"}]}`, nil},
		{"every waiting stage with a window of its own", `{"name": "p", "key": "e.k", "stages": [{"name": "a"}, {"name": "b", "within": "1m", "withinType": "previousAndCurrent"}]}`, nil},
		{"a previous-and-current window on the last stage only", `{"name": "p", "key": "e.k", "within": "1m", "withinType": "previousAndCurrent", "stages": [{"name": "a"},
			{"name": "b", "oneOrMore": true, "allowCombinations": true}, {"name": "c"}]}`, []string{
			`pattern "p": field "within": only previousAndCurrent windows, which bound their own stages: a partial match waiting at another stage that never completes keeps its events for ever, and so does its key; give the pattern a firstAndLast window`,
			`pattern "p": stage "b": field "allowCombinations": without a window on the whole match: each partial match that takes an event also stays, so a key's partial matches can double with every such event, for ever (a key keeps at most 100,000)`,
		}},
		{"multiplying without a window", `{"name": "p", "key": "e.k", "stages": [{"name": "a"},
			{"name": "b", "contiguity": "followedByAny"},
			{"name": "g", "contiguity": "followedBy", "group": [{"name": "c"}, {"name": "d", "oneOrMore": true, "allowCombinations": true}]}]}`, []string{
			`pattern "p": field "within": none: a partial match that never completes keeps its events for ever, and so does its key; give the pattern a window`,
			`pattern "p": stage "b": field "contiguity": followedByAny without a window on the whole match: each partial match that takes an event also stays, so a key's partial matches can double with every such event, for ever (a key keeps at most 100,000)`,
			`pattern "p": stage "g/d": field "allowCombinations": without a window on the whole match: each partial match that takes an event also stays, so a key's partial matches can double with every such event, for ever (a key keeps at most 100,000)`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := nfa.CompileBytes([]byte(tc.spec))
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Warnings(); !slices.Equal(got, tc.want) {
				t.Errorf("warnings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// A query names its fields as SQL does.
func TestWarningsOfAQuery(t *testing.T) {
	p, err := nfa.CompileSQL(`SELECT * FROM ticks MATCH_RECOGNIZE (ORDER BY ts MEASURES A.price AS p PATTERN (A B) DEFINE A AS price > 10, B AS price < 10)`, "q")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`pattern "q": field "PARTITION BY": none: every event has the key "", so one key holds all the pattern's partial matches and, in a cluster, one shard applies all its events`,
		`pattern "q": field "WITHIN": none: a partial match that never completes keeps its events for ever, and so does its key; give the pattern a window`,
	}
	if got := p.Warnings(); !slices.Equal(got, want) {
		t.Errorf("warnings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
