package nfa

import (
	"strings"
	"testing"
)

// An emit field YAML would rename to true or false is refused for a new
// document, quoted it passes; the engine still compiles the document as
// before (a pattern in the log must compile as it did).
func TestCheckYAMLKeys(t *testing.T) {
	doc := "name: p\nemit:\n  n: size(events(\"a\"))\n  total: size(events(\"a\"))\nstages:\n  - name: a\n    where: e.t == \"A\"\n"
	err := CheckYAMLKeys([]byte(doc))
	if err == nil || err.Error() != `pattern "p": field "emit.n": YAML reads n unquoted as a boolean, so the field would be named true or false: quote it ("n")` {
		t.Errorf("CheckYAMLKeys: %v", err)
	}
	p, err := CompileBytes([]byte(doc))
	if err != nil {
		t.Fatalf("the engine no longer compiles it: %v", err)
	}
	if names := p.Spec().Emit; names["false"] == "" {
		t.Errorf("YAML 1.1 as before: emit %v", names)
	}
	for _, ok := range []string{
		strings.Replace(doc, "  n:", `  "n":`, 1),
		`{"name":"p","emit":{"n":"1"},"stages":[{"name":"a"}]}`,
		"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS true) AS q",
	} {
		if err := CheckYAMLKeys([]byte(ok)); err != nil {
			t.Errorf("CheckYAMLKeys(%q): %v", ok, err)
		}
	}
}
