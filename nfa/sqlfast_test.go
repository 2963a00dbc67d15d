package nfa

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/nfa/sql"
)

// A DEFINE condition col = 'lit' decided without the evaluator gives what
// the evaluator gives, whatever the column holds (strings, other types,
// null, nothing, nested values) and however the condition is written.
func TestDefineEqualsFastPathAgrees(t *testing.T) {
	p, err := CompileBytes([]byte(`{"name":"p","stages":[{"name":"A"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := NewMatcher(p)
	fast := 0
	rapid.Check(t, func(t *rapid.T) {
		lit := rapid.SampledFrom([]string{"A", "B", "", "a"}).Draw(t, "lit")
		col := &sql.ColumnRef{Var: rapid.SampledFrom([]string{"", "A"}).Draw(t, "var"), Name: rapid.SampledFrom([]string{"t", "T", "u"}).Draw(t, "col")}
		var e sql.Expr = &sql.Binary{Op: "=", L: col, R: &sql.Literal{Kind: sql.LitString, Str: lit}}
		if rapid.Bool().Draw(t, "swap") {
			e = &sql.Binary{Op: "=", L: &sql.Literal{Kind: sql.LitString, Str: lit}, R: col}
		}
		procCol := rapid.SampledFrom([]string{"", "u"}).Draw(t, "procCol")
		d := newDefinePredicate("A", e, procCol)
		if !d.eq {
			t.Fatalf("%+v: no fast path", e)
		}
		ref := *d
		ref.eq = false
		ev := map[string]any{}
		if rapid.Bool().Draw(t, "present") {
			ev["t"] = rapid.SampledFrom([]any{"A", "B", "", "a", int64(1), 1.5, true, nil, map[string]any{"x": "A"}, []any{"A"}}).Draw(t, "value")
		}
		if _, isStr := ev[d.eqCol].(string); isStr {
			fast++
		}
		ctx := &evalCtx{m: m, ev: &event{ts: 7, data: ev}}
		got, gerr := d.Eval(ev, ctx)
		want, werr := ref.Eval(ev, ctx)
		if got != want || (gerr == nil) != (werr == nil) {
			t.Fatalf("%v on %v: fast path %v, %v; evaluator %v, %v", e, ev, got, gerr, want, werr)
		}
	})
	if fast == 0 {
		t.Fatal("the fast path never applied")
	}
}
