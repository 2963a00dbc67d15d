package schema

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func events(t *testing.T, lines ...string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// TestParseForms reads the same declaration in both forms and checks
// they agree, and that what Format writes reads back the same.
func TestParseForms(t *testing.T) {
	simple := "account: string\namount: number\nnote: string?\ncard:\n  country: string\n"
	js := `{"type":"object","required":["account","amount","card"],"properties":{
	  "account":{"type":"string"},"amount":{"type":"number"},"note":{"type":"string"},
	  "card":{"type":"object","required":["country"],"properties":{"country":{"type":"string"}}}}}`
	a, err := Parse([]byte(simple))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("simple form %v, JSON Schema %v", a, b)
	}
	c, err := Parse([]byte(a.Format()))
	if err != nil {
		t.Fatalf("%v\n%s", err, a.Format())
	}
	if !reflect.DeepEqual(a, c) {
		t.Fatalf("Format read back as %v, want %v", c, a)
	}
	for _, bad := range []string{"amount: money", "- a\n- b", "a: [1]", "{}"} {
		if _, err := Parse([]byte(bad)); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("Parse(%q): %v, want a one-line error", bad, err)
		}
	}
}

// TestInferFits checks Infer against its own promise: every sample event
// fits the schema inferred from the samples, and a field present in only
// some of them is optional.
func TestInferFits(t *testing.T) {
	evs := events(t,
		`{"account":"a","amount":5,"card":{"country":"NL"}}`,
		`{"account":"b","amount":7.5,"note":"x","card":{"country":"DE","pin":1}}`,
		`{"account":"c","amount":1,"card":{"country":"FR"},"tags":"x"}`,
		`{"account":"d","amount":1,"card":{"country":"FR"},"tags":[1]}`,
	)
	s := Infer(evs)
	for _, e := range evs {
		if err := s.Check(e); err != nil {
			t.Errorf("%v does not fit the schema inferred from it: %v\n%s", e, err, s.Format())
		}
	}
	want := map[string]string{"account": "string", "amount": "number", "note": "string?", "card": "object", "card.country": "string", "card.pin": "integer?", "tags": "any?"}
	got := map[string]string{}
	for _, f := range s {
		got[f.Path] = f.Type
		if f.Optional {
			got[f.Path] += "?"
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("inferred %v, want %v", got, want)
	}
	for _, bad := range events(t, `{"account":"a","card":{"country":"NL"}}`, `{"account":1,"amount":1,"card":{"country":"NL"}}`) {
		if err := s.Check(bad); err == nil {
			t.Errorf("%v fits %v", bad, s)
		}
	}
}

// TestHasAndSuggest checks field lookups, and that a misspelt field is
// answered with the declared one.
func TestHasAndSuggest(t *testing.T) {
	s, err := Parse([]byte("account: string\namount: number\nmeta: object\ncard:\n  country: string\n"))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{"amount": true, "card": true, "card.country": true, "meta.anything.deep": true, "card.contry": false, "amout": false} {
		if got := s.Has(path); got != want {
			t.Errorf("Has(%q) = %v, want %v", path, got, want)
		}
	}
	if got := s.Missing("bank", "amout").Error(); got != `no field "amout" in source bank; did you mean "amount"?` {
		t.Errorf("Missing: %s", got)
	}
	if got := s.Missing("bank", "card.contry").Error(); got != `no field "card.contry" in source bank; did you mean "card.country"?` {
		t.Errorf("Missing: %s", got)
	}
	if got := s.Missing("bank", "zzzzzz").Error(); got != `no field "zzzzzz" in source bank (its fields: account, amount, card, meta)` {
		t.Errorf("Missing: %s", got)
	}
}

// naive is the edit distance by its recursive definition.
func naive(a, b string) int {
	if a == "" {
		return len(b)
	}
	if b == "" {
		return len(a)
	}
	c := 1
	if a[len(a)-1] == b[len(b)-1] {
		c = 0
	}
	d := min(naive(a[:len(a)-1], b)+1, naive(a, b[:len(b)-1])+1, naive(a[:len(a)-1], b[:len(b)-1])+c)
	if len(a) > 1 && len(b) > 1 && a[len(a)-1] == b[len(b)-2] && a[len(a)-2] == b[len(b)-1] {
		d = min(d, naive(a[:len(a)-2], b[:len(b)-2])+1)
	}
	return d
}

func TestEditDistanceAgreesWithDefinition(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.StringMatching(`[abc]{0,6}`).Draw(t, "a")
		b := rapid.StringMatching(`[abc]{0,6}`).Draw(t, "b")
		if got, want := EditDistance(a, b), naive(a, b); got != want {
			t.Fatalf("EditDistance(%q, %q) = %d, want %d", a, b, got, want)
		}
	})
}
