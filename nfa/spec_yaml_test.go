package nfa

import (
	"strings"
	"testing"
)

// A YAML stage named n (or any string field set to y, n, yes, no, on or
// off unquoted) reads as a boolean: the error says so and how to mend it,
// and the quoted name compiles.
func TestYAMLBooleanNameSaysQuoteIt(t *testing.T) {
	doc := "name: p\nsource: bank\nkey: e.account\nstages:\n  - name: n\n    where: e.type == \"LOGIN\"\n"
	_, err := CompileBytes([]byte(doc))
	if err == nil || !strings.Contains(err.Error(), `field "stages.name": want string, got bool`) || !strings.Contains(err.Error(), "quote the value") {
		t.Fatalf("stage named n: %v", err)
	}
	if _, err := CompileBytes([]byte(strings.Replace(doc, "name: n\n", "name: \"n\"\n", 1))); err != nil {
		t.Fatalf("stage named \"n\": %v", err)
	}
	// a number where a string goes is no YAML trap: no such hint
	_, err = CompileBytes([]byte(strings.Replace(doc, "name: n\n", "name: 12\n", 1)))
	if err == nil || strings.Contains(err.Error(), "quote") {
		t.Fatalf("stage named 12: %v", err)
	}
}
