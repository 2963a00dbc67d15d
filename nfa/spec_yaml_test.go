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

// A key YAML 1.1 reads as a boolean or null would become "true", "false"
// or "null" in the document (an emitted field n named false, y and on one
// field): refused with its line and path; quoted, it is the name written.
func TestYAMLBooleanKeysRefused(t *testing.T) {
	for _, key := range []string{"n", "y", "on", "Off", "yes", "NO", "true", "null", "~"} {
		doc := "name: t\nsource: s\nemit:\n  ok: \"1\"\n  " + key + ": \"2\"\nstages:\n  - name: a\n    where: \"true\"\n"
		_, err := ParseSpec([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), "line 5: the key emit."+key+" reads as a boolean") {
			t.Errorf("key %s: %v", key, err)
		}
		quoted := strings.Replace(doc, "  "+key+": ", "  \""+key+"\": ", 1)
		s, err := ParseSpec([]byte(quoted))
		if err != nil || s.Emit == nil {
			t.Fatalf("key %q quoted: %v", key, err)
		}
		p, err := CompileBytes([]byte(quoted))
		if err != nil {
			t.Fatalf("key %q quoted: %v", key, err)
		}
		recs, _ := NewRunner(p).Line([]byte(`{"x":1}`))
		if len(recs) != 1 || !strings.Contains(string(mustJSON(recs[0])), `"`+key+`":2`) {
			t.Errorf("key %q quoted: records %v", key, recs)
		}
	}
	// a stage named n, quoted, and aliases, which are not followed
	if _, err := ParseSpec([]byte("name: t\nsource: s\nstages:\n  - name: \"n\"\n    where: &w \"true\"\n  - name: b\n    where: *w\n")); err != nil {
		t.Errorf("quoted name and an alias: %v", err)
	}
}
