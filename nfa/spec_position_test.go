package nfa_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cepcluster/cep/nfa"
)

// A refused document's error points, through SpecPosition, at the line
// the document's author marked as the wrong one (# <-), for document
// fields, stages, stages inside groups and emit fields, in YAML and JSON.
func TestSpecPositionPointsAtTheWrongLine(t *testing.T) {
	for _, doc := range []string{
		"name: p\nsource: s\nstages: [] # <-\n",
		"name: p\nsource: s\nkey: e.a\nwithin: -5m # <-\nstages:\n- name: a\n  where: e.x == 1\n",
		"name: p\nsource: s\nstages:\n- name: a\n  where: e.x == 1\n- name: b\n  where: e.x == 2\n  times: [3, 2] # <-\n",
		"name: p\nsource: s\nstages:\n- name: a\n  where: e.x == 1\n- name: b\n  wher: e.x == 2 # <-\n",
		"name: p\nsource: s\nstages:\n- name: a\n  where: e.x == 1\n- name: g\n  group:\n  - name: c\n    where: e.x == 1\n  - name: d\n    where: e.x == # <-\n",
		"name: p\nsource: s\nemit:\n  ok: e.x\n  bad: events(\"a\")[0].x + # <-\nstages:\n- name: a\n  where: e.x == 1\n",
		"{\"name\": \"p\", \"source\": \"s\",\n\"stages\": [\n{\"name\": \"a\", \"where\": \"e.x == 1\"},\n{\"name\": \"b\", \"where\": \"e.x ==\"} \n]}",
	} {
		want := 0
		for i, l := range strings.Split(doc, "\n") {
			if strings.HasSuffix(l, "# <-") || strings.Contains(l, `"e.x =="`) {
				want = i + 1
			}
		}
		_, err := nfa.CompileBytes([]byte(doc))
		var pe *nfa.PatternError
		if !errors.As(err, &pe) {
			t.Errorf("%q: %v, not a PatternError", doc, err)
			continue
		}
		line, col := nfa.SpecPosition([]byte(doc), pe.Stage, pe.Field)
		if line != want || col < 1 {
			t.Errorf("%q: %v: at %d:%d, want line %d", doc, err, line, col, want)
		}
	}
	// what does not parse, or names nothing the document has, has no place
	for _, c := range []struct{ doc, stage, field string }{
		{"name: [", "", "name"},
		{"- a\n- b\n", "", "name"},
		{"name: p\nstages: []\n", "nosuch", ""},
		{"name: p\n", "", "nosuch"},
	} {
		if l, _ := nfa.SpecPosition([]byte(c.doc), c.stage, c.field); l != 0 {
			t.Errorf("%q %q %q: line %d, want 0", c.doc, c.stage, c.field, l)
		}
	}
}
