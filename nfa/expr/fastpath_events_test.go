package expr

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// The fast path also evaluates comparisons with aggregates over the partial
// match (size, sum, avg, min, max of a field of events("s")). The property
// test draws such conditions, mixed with event-only ones, and random partial
// matches (events lacking the field, non-numbers, nulls, huge ints whose sum
// overflows, infinities, Go types the fast path does not model) and checks
// the fast path against the general CEL evaluation: the same value, and an
// error exactly when CEL errs.

func aggregateGen() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		stage := rapid.SampledFrom([]string{"s1", "s2", "none"}).Draw(t, "stage")
		ev := `events("` + stage + `")`
		switch fn := rapid.SampledFrom([]string{"size", "sizeMember", "sum", "avg", "min", "max"}).Draw(t, "fn"); fn {
		case "size":
			return "size(" + ev + ")"
		case "sizeMember":
			return ev + ".size()"
		default:
			field := rapid.SampledFrom(genFields).Draw(t, "field")
			if rapid.IntRange(0, 3).Draw(t, "nested") == 0 {
				field += "." + rapid.SampledFrom(genFields).Draw(t, "sub")
			}
			return fn + "(" + ev + ".map(x, x." + field + "))"
		}
	})
}

func aggOperandGen() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		switch rapid.IntRange(0, 2).Draw(t, "operand") {
		case 0:
			return literalGen().Draw(t, "lit").src
		case 1:
			return pathGen().Draw(t, "path")
		default:
			return aggregateGen().Draw(t, "agg")
		}
	})
}

func ctxCondGen(depth int) *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		max := 4
		if depth <= 0 {
			max = 1
		}
		switch rapid.IntRange(0, max).Draw(t, "node") {
		case 0, 1:
			op := rapid.SampledFrom([]string{"==", "!=", "<", "<=", ">", ">="}).Draw(t, "op")
			agg := aggregateGen().Draw(t, "agg")
			other := aggOperandGen().Draw(t, "other")
			if rapid.Bool().Draw(t, "aggLeft") {
				return agg + " " + op + " " + other
			}
			return other + " " + op + " " + agg
		case 2:
			return "!(" + ctxCondGen(depth-1).Draw(t, "not") + ")"
		case 3:
			return "(" + ctxCondGen(depth-1).Draw(t, "l") + " && " + condGen(1).Draw(t, "r") + ")"
		default:
			return "(" + condGen(1).Draw(t, "l") + " || " + ctxCondGen(depth-1).Draw(t, "r") + ")"
		}
	})
}

// matchEventGen draws an event of a partial match: mostly numbers in the
// fields, sometimes anything.
func matchEventGen() *rapid.Generator[Event] {
	return rapid.Custom(func(t *rapid.T) Event {
		if rapid.IntRange(0, 4).Draw(t, "wild") == 0 {
			return mapGen(1).Draw(t, "wildEvent")
		}
		e := Event{}
		for _, f := range genFields {
			switch rapid.IntRange(0, 9).Draw(t, "kind_"+f) {
			case 0:
				// missing
			case 1:
				e[f] = map[string]any{"a": int64(1), "b": 2.5}
			case 2:
				e[f] = rapid.SampledFrom([]any{math.Inf(1), math.Inf(-1), math.MaxFloat64, nil, "x", true}).Draw(t, "odd_"+f)
			case 3:
				e[f] = rapid.SampledFrom([]int64{math.MaxInt64, math.MinInt64, math.MaxInt64 - 1}).Draw(t, "big_"+f)
			case 4, 5:
				e[f] = rapid.Float64Range(-100, 100).Draw(t, "double_"+f)
			default:
				e[f] = rapid.Int64Range(-100, 100).Draw(t, "int_"+f)
			}
		}
		return e
	})
}

func TestFastPathAggregatesMatchCEL(t *testing.T) {
	fast, slow := compilerPair(t)
	fastRuns := 0
	rapid.Check(t, func(t *rapid.T) {
		src := ctxCondGen(2).Draw(t, "cond")
		fc, err := fast.Condition(src)
		if err != nil {
			t.Skipf("compile %q: %v", src, err) // a comparison the checker rejects
		}
		if !fc.FastPath() {
			t.Fatalf("%q is not on the fast path", src)
		}
		sc, err := slow.Condition(src)
		if err != nil {
			t.Fatalf("compile %q without fast path: %v", src, err)
		}
		for i := 0; i < 4; i++ {
			ev := mapGen(2).Draw(t, "event")
			ctx := fakeCtx{
				"s1": rapid.SliceOfN(matchEventGen(), 0, 4).Draw(t, "s1"),
				"s2": rapid.SliceOfN(matchEventGen(), 0, 2).Draw(t, "s2"),
			}
			if agreesWithCEL(t, src, fc, sc, ev, ctx) {
				fastRuns++
			}
		}
	})
	if fastRuns == 0 {
		t.Fatal("the fast path never decided a case")
	}
	t.Logf("the fast path decided %d evaluations by itself", fastRuns)
}

// A value events("S")[N].a.b read by the fast path (an emit field) is what
// CEL gives, whether the stage has that many events or not.
func TestEventsFieldPathMatchesCEL(t *testing.T) {
	fast, slow := compilerPair(t)
	decided := 0
	rapid.Check(t, func(t *rapid.T) {
		src := fmt.Sprintf(`events(%q)[%d]%s`, rapid.SampledFrom([]string{"s1", "s2"}).Draw(t, "stage"),
			rapid.IntRange(0, 3).Draw(t, "index"), strings.TrimPrefix(pathGen().Draw(t, "path"), "e"))
		fv, err := fast.Value(src)
		if err != nil {
			t.Fatalf("compile %q: %v", src, err)
		}
		if fv.evPath == nil {
			t.Fatalf("%q is not a fast events() field path", src)
		}
		sv, err := slow.Value(src)
		if err != nil {
			t.Fatalf("compile %q: %v", src, err)
		}
		ctx := fakeCtx{
			"s1": rapid.SliceOfN(mapGen(2), 0, 3).Draw(t, "s1"),
			"s2": rapid.SliceOfN(mapGen(2), 0, 1).Draw(t, "s2"),
		}
		fx, ferr := fv.Eval(nil, ctx)
		sx, serr := sv.Eval(nil, ctx)
		if (ferr != nil) != (serr != nil) || !sameValue(fx, sx) {
			t.Fatalf("%s on %#v:\nfast path: %#v, %v\nCEL:       %#v, %v", src, ctx, fx, ferr, sx, serr)
		}
		if ferr == nil {
			decided++
		}
	})
	if decided == 0 {
		t.Fatal("no value was read")
	}
}
