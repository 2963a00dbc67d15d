package expr

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// The guard of a condition is its conjunction of top-level conjuncts that do
// not call events(). The engine skips the whole condition when the guard is
// false, so the property checked here is the one the engine relies on:
// whenever the guard yields false without error, the whole condition yields
// false, for any event and any partial match.

func eventsConjunctGen() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		f := rapid.SampledFrom(genFields).Draw(t, "field")
		st := rapid.SampledFrom([]string{"s1", "s2"}).Draw(t, "stage")
		switch rapid.IntRange(0, 3).Draw(t, "eventsKind") {
		case 0:
			return `size(events("` + st + `")) < 2`
		case 1:
			return `events("` + st + `").exists(x, x.` + f + ` == e.` + f + `)`
		case 2:
			return `e.` + f + ` > max(events("` + st + `").map(x, x.` + f + `))`
		default:
			return `events("` + st + `").all(x, has(x.` + f + `))`
		}
	})
}

func TestGuardImpliesFalse(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 4).Draw(t, "conjuncts")
		parts := make([]string, 0, n+1)
		plain := 0
		for i := 0; i < n; i++ {
			if rapid.Bool().Draw(t, "plain") {
				parts = append(parts, "("+condGen(2).Draw(t, "cond")+")")
				plain++
			} else {
				parts = append(parts, "("+eventsConjunctGen().Draw(t, "events")+")")
			}
		}
		parts = append(parts, "("+eventsConjunctGen().Draw(t, "events")+")")
		perm := rapid.Permutation(parts).Draw(t, "order")
		src := strings.Join(perm, " && ")
		cond, err := c.Condition(src)
		if err != nil {
			t.Skipf("compile %q: %v", src, err) // a generated type mismatch
		}
		g := cond.Guard()
		if (g != nil) != (plain > 0) {
			t.Fatalf("%q: guard %v with %d plain conjuncts", src, g != nil, plain)
		}
		if g == nil {
			return
		}
		if g.UsesEvents() {
			t.Fatalf("%q: guard %q calls events()", src, g.Source())
		}
		for i := 0; i < 4; i++ {
			ev := mapGen(2).Draw(t, "event")
			ctx := fakeCtx{
				"s1": []Event{mapGen(1).Draw(t, "s1a"), mapGen(1).Draw(t, "s1b")},
				"s2": []Event{mapGen(1).Draw(t, "s2a")},
			}
			gv, gerr := g.Eval(ev, nil)
			v, verr := cond.Eval(ev, ctx)
			if gerr == nil && !gv && v {
				t.Fatalf("%s on %#v: guard %q is false, the condition is true (err %v)", src, ev, g.Source(), verr)
			}
		}
	})
}

func TestGuardExtraction(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ src, guard string }{
		{`e.type == "B" && e.v > max(events("a").map(x, x.v)) && size(events("b")) < 10`, `(e.type == "B")`},
		{`size(events("b")) < 10 && e.type == "B" && e.v > 3`, `(e.type == "B") && (e.v > 3)`},
		{`e.type == "B" || size(events("b")) < 10`, ``},
		{`size(events("b")) < 10`, ``},
		{`e.type == "B"`, ``}, // no events(): cached per event already
	} {
		cond, err := c.Condition(tc.src)
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		got := ""
		if g := cond.Guard(); g != nil {
			got = g.Source()
			if !g.FastPath() {
				t.Errorf("%q: guard %q is not on the fast path", tc.src, got)
			}
		}
		if got != tc.guard {
			t.Errorf("%q: guard %q, want %q", tc.src, got, tc.guard)
		}
	}
}
