package expr

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// The property test generates random conditions from the fast-path subset
// and random events (missing fields, wrong types, nested maps, lists, nulls,
// and values of Go types the fast path does not model) and checks that the
// fast path gives exactly the result of the general CEL evaluation: the same
// value, and an error exactly when CEL errs.

var (
	genFields  = []string{"a", "b", "c"}
	genStrings = []string{"", "x", "y", "LOGIN", "a"}
	genInts    = []int64{0, 1, -1, 2, 5, 9007199254740993, math.MaxInt64, math.MinInt64}
	genDoubles = []float64{0, math.Copysign(0, -1), 1, 1.5, -2.5, 5.5, 9007199254740992, 9.223372036854775807e18, -9.3e18, 1e300, math.Inf(1), math.Inf(-1)}
)

type genLit struct {
	src string
	val any
}

func literalGen() *rapid.Generator[genLit] {
	return rapid.Custom(func(t *rapid.T) genLit {
		switch rapid.IntRange(0, 4).Draw(t, "litKind") {
		case 0:
			s := rapid.SampledFrom(genStrings).Draw(t, "str")
			if rapid.Bool().Draw(t, "singleQuote") {
				return genLit{"'" + s + "'", s}
			}
			return genLit{strconv.Quote(s), s}
		case 1:
			i := rapid.SampledFrom(genInts).Draw(t, "int")
			return genLit{strconv.FormatInt(i, 10), i}
		case 2:
			f := rapid.SampledFrom(genDoubles).Draw(t, "double")
			if math.IsInf(f, 0) {
				// No CEL literal denotes infinity; use the largest finite one.
				f = math.Copysign(math.MaxFloat64, f)
			}
			s := strconv.FormatFloat(f, 'g', -1, 64)
			if !strings.ContainsAny(s, ".e") {
				s += ".0"
			}
			return genLit{s, f}
		case 3:
			b := rapid.Bool().Draw(t, "bool")
			return genLit{strconv.FormatBool(b), b}
		default:
			return genLit{"null", nil}
		}
	})
}

func pathGen() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		n := []int{1, 1, 1, 2, 2, 3}[rapid.IntRange(0, 5).Draw(t, "pathLen")]
		var sb strings.Builder
		sb.WriteString("e")
		for i := 0; i < n; i++ {
			f := rapid.SampledFrom(genFields).Draw(t, "field")
			if rapid.IntRange(0, 3).Draw(t, "indexForm") == 0 {
				sb.WriteString(`["` + f + `"]`)
			} else {
				sb.WriteString("." + f)
			}
		}
		return sb.String()
	})
}

func condGen(depth int) *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		max := 6
		if depth <= 0 {
			max = 3
		}
		switch rapid.IntRange(0, max).Draw(t, "node") {
		case 0: // comparison
			op := rapid.SampledFrom([]string{"==", "!=", "<", "<=", ">", ">="}).Draw(t, "op")
			p := pathGen().Draw(t, "path")
			l := literalGen().Draw(t, "lit")
			if rapid.Bool().Draw(t, "litLeft") {
				return l.src + " " + op + " " + p
			}
			return p + " " + op + " " + l.src
		case 1: // membership
			n := rapid.IntRange(0, 4).Draw(t, "inLen")
			lits := make([]string, n)
			for i := range lits {
				lits[i] = literalGen().Draw(t, "inLit").src
			}
			return pathGen().Draw(t, "path") + " in [" + strings.Join(lits, ", ") + "]"
		case 2: // bare field, has(), bool literal
			switch rapid.IntRange(0, 2).Draw(t, "leaf") {
			case 0:
				return pathGen().Draw(t, "path")
			case 1:
				if rapid.Bool().Draw(t, "hasTop") {
					return "has(e." + rapid.SampledFrom(genFields).Draw(t, "hasField") + ")"
				}
				return "has(" + pathGen().Draw(t, "path") + "." + rapid.SampledFrom(genFields).Draw(t, "hasField") + ")"
			default:
				return strconv.FormatBool(rapid.Bool().Draw(t, "b"))
			}
		case 3:
			return pathGen().Draw(t, "path") + " == " + literalGen().Draw(t, "lit").src
		case 4:
			return "!(" + condGen(depth-1).Draw(t, "not") + ")"
		case 5:
			return "(" + condGen(depth-1).Draw(t, "l") + " && " + condGen(depth-1).Draw(t, "r") + ")"
		default:
			return "(" + condGen(depth-1).Draw(t, "l") + " || " + condGen(depth-1).Draw(t, "r") + ")"
		}
	})
}

func valueGen(depth int) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		max := 9
		if depth <= 0 {
			max = 6
		}
		switch rapid.IntRange(0, max).Draw(t, "valKind") {
		case 0:
			return rapid.SampledFrom(genStrings).Draw(t, "s")
		case 1:
			return rapid.SampledFrom(genInts).Draw(t, "i")
		case 2:
			return rapid.SampledFrom(genDoubles).Draw(t, "f")
		case 3:
			return rapid.Bool().Draw(t, "b")
		case 4:
			return nil
		case 5:
			// Go types DecodeEvent never produces: the fast path must
			// hand these to CEL.
			return rapid.SampledFrom([]any{uint64(1), int(1), int32(-1), float32(1.5), math.NaN(), []string{"x"}, []byte("x")}).Draw(t, "odd")
		case 6:
			return rapid.SampledFrom([]any{[]any{}, map[string]any{}}).Draw(t, "empty")
		case 7:
			n := rapid.IntRange(0, 3).Draw(t, "listLen")
			l := make([]any, n)
			for i := range l {
				l[i] = valueGen(depth-1).Draw(t, "elem")
			}
			return l
		default:
			return mapGen(depth-1).Draw(t, "map")
		}
	})
}

func mapGen(depth int) *rapid.Generator[map[string]any] {
	return rapid.Custom(func(t *rapid.T) map[string]any {
		m := map[string]any{}
		for _, f := range genFields {
			if rapid.IntRange(0, 3).Draw(t, "present_"+f) > 0 {
				m[f] = valueGen(depth).Draw(t, "val_"+f)
			}
		}
		return m
	})
}

// compilerPair returns a compiler with the fast path and one without.
func compilerPair(t *testing.T) (fast, slow *Compiler) {
	fast, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	slow, err = NewCompiler(WithoutFastPath())
	if err != nil {
		t.Fatal(err)
	}
	return fast, slow
}

// agreesWithCEL checks that fc (fast path) and sc (CEL only) give the same
// value and error-ness on ev with ctx, also the raw fast evaluator when it
// decides by itself; it reports whether it did.
func agreesWithCEL(t *rapid.T, src string, fc, sc *Condition, ev Event, ctx Ctx) bool {
	fv, ferr := fc.Eval(ev, ctx)
	cv, cerr := sc.Eval(ev, ctx)
	if (ferr != nil) != (cerr != nil) || fv != cv {
		t.Fatalf("%s on %#v with %#v:\nfast path: %v, %v\nCEL:       %v, %v", src, ev, ctx, fv, ferr, cv, cerr)
	}
	rv, rerr := fc.fast(ev, ctx)
	if rerr == errFallback {
		return false
	}
	if (rerr != nil) != (cerr != nil) || rv != cv {
		t.Fatalf("%s on %#v with %#v:\nraw fast path: %v, %v\nCEL:           %v, %v", src, ev, ctx, rv, rerr, cv, cerr)
	}
	return true
}

func TestFastPathMatchesCEL(t *testing.T) {
	fast, slow := compilerPair(t)
	rapid.Check(t, func(t *rapid.T) {
		src := condGen(3).Draw(t, "cond")
		fc, err := fast.Condition(src)
		if err != nil {
			t.Fatalf("compile %q: %v", src, err)
		}
		if !fc.FastPath() {
			t.Fatalf("%q is not on the fast path", src)
		}
		sc, err := slow.Condition(src)
		if err != nil {
			t.Fatalf("compile %q without fast path: %v", src, err)
		}
		if sc.FastPath() {
			t.Fatalf("WithoutFastPath compiled %q to the fast path", src)
		}
		for i := 0; i < 4; i++ {
			agreesWithCEL(t, src, fc, sc, mapGen(2).Draw(t, "event"), nil)
		}
	})
}

func TestFastPathSubset(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		src  string
		fast bool
	}{
		{`e.type == "LOGIN"`, true},
		{`e.a.b.c != 1.5`, true},
		{`5 < e.n`, true},
		{`e["x"].y >= -3`, true},
		{`e.t in ["a", "b", 1, null]`, true},
		{`has(e.a) && e.a.b`, true},
		{`!(e.a == 1) || false`, true},
		{`true`, true},
		{`e.a == e.b`, false},
		{`e.a + 1 == 2`, false},
		{`e.a == 1u`, false},
		{`e.s.startsWith("x")`, false},
		{`size(e.s) > 1`, false},
		{`events("a").size() > 0`, true},
		{`e.v > max(events("a").map(x, x.v)) && size(events("b")) < 10`, true},
		{`avg(events("a").map(x, x.p.q)) <= sum(events("b").map(y, y.v))`, true},
		{`max(events("a").map(x, x.v + 1)) > 0`, false},
		{`max(events("a").map(x, e.v)) > 0`, false},
		{`max(events(e.s).map(x, x.v)) > 0`, false},
		{`events("a").filter(x, x.v > 1).size() > 0`, false},
		{`e.a in e.b`, false},
		{`e.a in {"x": 1}`, false},
		{`1 == 1`, false},
		{`e.m[1] == 1`, false},
		{`e.l.exists(x, x == 1)`, false},
	} {
		cond, err := c.Condition(tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		if cond.FastPath() != tc.fast {
			t.Errorf("%s: FastPath() = %v, want %v", tc.src, cond.FastPath(), tc.fast)
		}
	}
}

// A Value that is a plain field path reads scalars straight from the event;
// it must agree with the general evaluation.
func TestValueFieldPathMatchesCEL(t *testing.T) {
	fast, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	slow, err := NewCompiler(WithoutFastPath())
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		src := pathGen().Draw(t, "path")
		fv, err := fast.Value(src)
		if err != nil {
			t.Fatalf("compile %q: %v", src, err)
		}
		if fv.path == nil {
			t.Fatalf("%q is not a fast field path", src)
		}
		sv, err := slow.Value(src)
		if err != nil {
			t.Fatalf("compile %q: %v", src, err)
		}
		ev := mapGen(2).Draw(t, "event")
		fx, ferr := fv.Eval(ev, nil)
		sx, serr := sv.Eval(ev, nil)
		if (ferr != nil) != (serr != nil) || !sameValue(fx, sx) {
			t.Fatalf("%s on %#v:\nfast path: %#v, %v\nCEL:       %#v, %v", src, ev, fx, ferr, sx, serr)
		}
	})
}

// sameValue is reflect.DeepEqual except that NaN equals NaN.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case float64:
		if y, ok := b.(float64); ok && math.IsNaN(x) && math.IsNaN(y) {
			return true
		}
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// A condition e.PATH == "lit" (or !=) decided by ReadField and TestField
// gives what CEL gives, and two such conditions on the same path report
// the same FieldKey; other conditions report none.
func TestFieldTestMatchesCEL(t *testing.T) {
	fast, slow := compilerPair(t)
	decided := 0
	rapid.Check(t, func(t *rapid.T) {
		path := "e." + rapid.SampledFrom(genFields).Draw(t, "f1")
		if rapid.Bool().Draw(t, "nested") {
			path += "." + rapid.SampledFrom(genFields).Draw(t, "f2")
		}
		lit := strconv.Quote(rapid.SampledFrom(genStrings).Draw(t, "lit"))
		op := rapid.SampledFrom([]string{"==", "!="}).Draw(t, "op")
		src := path + " " + op + " " + lit
		if rapid.Bool().Draw(t, "swap") {
			src = lit + " " + op + " " + path
		}
		fc, err := fast.Condition(src)
		if err != nil {
			t.Fatalf("compile %q: %v", src, err)
		}
		key, ok := fc.FieldKey()
		if !ok {
			t.Fatalf("%q: no field key", src)
		}
		other, err := fast.Condition(path + ` == "other"`)
		if err != nil {
			t.Fatal(err)
		}
		if k2, _ := other.FieldKey(); k2 != key {
			t.Fatalf("%q and %q: keys %q and %q", src, path+` == "other"`, key, k2)
		}
		sc, err := slow.Condition(src)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 4; i++ {
			ev := mapGen(2).Draw(t, "event")
			x, rerr := fc.ReadField(ev)
			v, ok, terr := fc.TestField(x, rerr)
			if !ok {
				continue
			}
			decided++
			cv, cerr := sc.Eval(ev, nil)
			if v != cv || (terr != nil) != (cerr != nil) {
				t.Fatalf("%s on %#v: field test %v, %v; CEL %v, %v", src, ev, v, terr, cv, cerr)
			}
		}
	})
	if decided == 0 {
		t.Fatal("no event was decided by the field test")
	}
	for _, src := range []string{`e.a == 1`, `e.a == "x" && e.b == "y"`, `e.a < "x"`, `size(e.a) == 1`, `true`} {
		c, err := fast.Condition(src)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := c.FieldKey(); ok {
			t.Errorf("%q has a field key", src)
		}
	}
}
