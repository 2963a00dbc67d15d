package expr

import (
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func mustCompiler(t testing.TB, opts ...Option) *Compiler {
	t.Helper()
	c, err := NewCompiler(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bothCompilers runs f with the default compiler and one without the fast
// path, so every table case checks both evaluators.
func bothCompilers(t *testing.T, f func(t *testing.T, c *Compiler)) {
	t.Run("fast", func(t *testing.T) { f(t, mustCompiler(t)) })
	t.Run("cel", func(t *testing.T) { f(t, mustCompiler(t, WithoutFastPath())) })
}

func TestDecodeEvent(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Event
		wantErr string
	}{
		{in: `{}`, want: Event{}},
		{in: ` {"a": 1} `, want: Event{"a": int64(1)}},
		{in: `{"i": -9223372036854775808, "max": 9223372036854775807}`,
			want: Event{"i": int64(math.MinInt64), "max": int64(math.MaxInt64)}},
		{in: `{"big": 9223372036854775808}`, want: Event{"big": 9223372036854775808.0}},
		{in: `{"f": 1.0, "e": 1e3, "E": 2E-1, "neg": -0.5, "z": -0}`,
			want: Event{"f": 1.0, "e": 1000.0, "E": 0.2, "neg": -0.5, "z": int64(0)}},
		{in: `{"s": "x\u00e9", "b": true, "n": null}`, want: Event{"s": "xé", "b": true, "n": nil}},
		{in: `{"o": {"p": [1, 2.5, "x", [3], {"q": 4}]}}`,
			want: Event{"o": map[string]any{"p": []any{int64(1), 2.5, "x", []any{int64(3)}, map[string]any{"q": int64(4)}}}}},
		{in: `{"a": 1, "a": 2}`, want: Event{"a": int64(2)}},
		{in: `[1]`, wantErr: "not a JSON object"},
		{in: `"s"`, wantErr: "not a JSON object"},
		{in: `null`, wantErr: "not a JSON object"},
		{in: `12`, wantErr: "not a JSON object"},
		{in: ``, wantErr: "decode event"},
		{in: `{`, wantErr: "decode event"},
		{in: `{"a":1} {"b":2}`, wantErr: "after the JSON object"},
		{in: `{"a":1} x`, wantErr: "after the JSON object"},
		{in: `{"a": 1e400}`, wantErr: "out of range"},
		{in: `{"a": NaN}`, wantErr: "decode event"},
	} {
		got, err := DecodeEvent([]byte(tc.in))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("DecodeEvent(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("DecodeEvent(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("DecodeEvent(%q) = %#v, want %#v", tc.in, got, tc.want)
		}
	}
}

func TestKeyString(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
		err  bool
	}{
		{in: "abc", want: "abc"},
		{in: "", want: ""},
		{in: int64(-42), want: "-42"},
		{in: uint64(math.MaxUint64), want: "18446744073709551615"},
		{in: 3.0, want: "3"},
		{in: math.Copysign(0, -1), want: "0"},
		{in: 1e20, want: "100000000000000000000"},
		{in: -7.0, want: "-7"},
		{in: true, want: "true"},
		{in: false, want: "false"},
		{in: 3.5, err: true},
		{in: math.NaN(), err: true},
		{in: math.Inf(1), err: true},
		{in: nil, err: true},
		{in: []any{"a"}, err: true},
		{in: map[string]any{}, err: true},
		{in: 3, err: true}, // Go int is not a value the engine produces
		{in: time.Unix(0, 0), err: true},
	} {
		got, err := KeyString(tc.in)
		if tc.err {
			if err == nil {
				t.Errorf("KeyString(%#v) = %q, want error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("KeyString(%#v) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestTimeMillis(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want int64
		err  bool
	}{
		{in: int64(1700000000123), want: 1700000000123},
		{in: int64(-5), want: -5},
		{in: uint64(12), want: 12},
		{in: uint64(math.MaxUint64), err: true},
		{in: 1700000000123.0, want: 1700000000123},
		{in: 1.5, err: true},
		{in: math.NaN(), err: true},
		{in: 1e19, err: true},
		{in: time.Date(2024, 1, 2, 3, 4, 5, 678_900_000, time.UTC), want: 1704164645678},
		{in: "2024-01-02T03:04:05Z", want: 1704164645000},
		{in: "2024-01-02T03:04:05.678Z", want: 1704164645678},
		{in: "2024-01-02T03:04:05.6789123Z", want: 1704164645678},
		{in: "2024-01-02T05:04:05.5+02:00", want: 1704164645500},
		{in: "2024-01-01T22:04:05-05:00", want: 1704164645000},
		{in: "1969-12-31T23:59:59.999Z", want: -1},
		{in: "2024-01-02", err: true},
		{in: "2024-01-02 03:04:05Z", err: true},
		{in: "yesterday", err: true},
		{in: "", err: true},
		{in: nil, err: true},
		{in: true, err: true},
		{in: 5, err: true},
	} {
		got, err := TimeMillis(tc.in)
		if tc.err {
			if err == nil {
				t.Errorf("TimeMillis(%#v) = %d, want error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("TimeMillis(%#v) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	c := mustCompiler(t)
	for _, tc := range []struct {
		src  string
		want string
	}{
		{`e.a ==`, "Syntax error"},
		{`e.a == "unterminated`, `"e.a == \"unterminated" at 1:`},
		{`x == 1`, "undeclared reference to 'x'"},
		{`e.a == 1 && y`, `"e.a == 1 && y" at 1:13: undeclared reference to 'y'`},
		{`nosuch(e.a)`, "undeclared reference to 'nosuch'"},
		{`"text"`, "must be a bool expression, but it has type string"},
		{`1 + 2`, "must be a bool expression, but it has type int"},
		{`e.s.size()`, "has type int"},
		{`events("a")`, "has type list(dyn)"},
		{`"a" < 1`, "found no matching overload"},
		{`events(1).size() > 0`, "found no matching overload for 'events'"},
		{`events("a").all(x, events("b").all(y, x.v < y.v))`, "cost"},
		{`events("a").exists(x, events("a").exists(y, events("a").exists(z, x.v + y.v == z.v)))`, "cost"},
		{`e.l.all(x, e.l.all(y, e.l.all(z, x < y && y < z)))`, "cost"},
		{"e.a == \"x\r\ny\"", `"e.a == \"x\r\ny\"" at 1:8:`},
		{``, "empty"},
		{`   `, "empty"},
		{strings.Repeat("e.a == 1 || ", 2000) + "true", "over the limit MaxSourceLen"},
	} {
		_, err := c.Condition(tc.src)
		if err == nil {
			t.Errorf("Condition(%.60q) compiled, want error containing %q", tc.src, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Condition(%.60q) error = %q, want it to contain %q", tc.src, err, tc.want)
		}
		if strings.ContainsAny(err.Error(), "\n\r") {
			t.Errorf("Condition(%.60q) error has several lines: %q", tc.src, err)
		}
	}
	// Value accepts any type but has the same other checks.
	for _, src := range []string{`e.a ==`, `x`, `events("a").map(x, events("b").map(y, [x, y]))`} {
		if _, err := c.Value(src); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("Value(%q) error = %v, want a one-line error", src, err)
		}
	}
}

func TestCompileAccepts(t *testing.T) {
	c := mustCompiler(t)
	for _, src := range []string{
		`e.a`, // dyn: checked at run time
		`sum([1, 2]) > 2`,
		`first(events("a")) == null`,
		`events("a").exists(x, x.user == e.user)`,
		`events("a").all(x, x.s.contains("a"))`,
		`size(events("a")) < 10 && e.s.lowerAscii().startsWith("x")`,
		`timestamp(e.ts) - timestamp(first(events("a")).ts) < duration("5m")`,
		`e.l.exists(x, x == e.user)`,
		`events("a").exists(x, x.user == e.user && x.amount > e.amount)`,
	} {
		if _, err := c.Condition(src); err != nil {
			t.Errorf("Condition(%q): %v", src, err)
		}
	}
}

func TestConditionEval(t *testing.T) {
	ev := Event{
		"type":   "LOGIN",
		"user":   "alice",
		"price":  5.5,
		"n":      int64(1),
		"big":    int64(9007199254740993),
		"ok":     true,
		"none":   nil,
		"geo":    map[string]any{"country": "DE", "zip": int64(10115)},
		"tags":   []any{"a", "b"},
		"ts":     "2024-01-02T03:04:05Z",
		"amount": int64(250),
	}
	type result int
	const (
		F result = iota
		T
		E // error
	)
	cases := []struct {
		src  string
		want result
	}{
		{`e.type == "LOGIN"`, T},
		{`e.type != "LOGIN"`, F},
		{`"LOGIN" == e.type`, T},
		{`e.price > 5`, T},
		{`e.price < 5`, F},
		{`5 < e.price`, T},
		{`e.n == 1.0`, T},
		{`e.n == 1`, T},
		{`e.n != 1.0`, F},
		{`e.n >= 0.5`, T},
		// cel-go compares an int with a double by converting the int to
		// double, so 2^53+1 equals 2^53.
		{`e.big == 9007199254740992.0`, T},
		{`e.big > 9007199254740992.0`, F},
		{`e.big > 9007199254740991.0`, T},
		{`e.ok`, T},
		{`!e.ok`, F},
		{`e.ok == true`, T},
		{`e.ok > false`, T},
		{`e.none == null`, T},
		{`e.type == null`, F},
		{`e.geo == null`, F},
		{`e.geo.country == "DE"`, T},
		{`e["geo"]["zip"] == 10115`, T},
		{`e.geo.zip > 10000.5`, T},
		{`e.type in ["LOGIN", "LOGOUT"]`, T},
		{`e.n in [1.0, "x"]`, T},
		{`e.type in []`, F},
		{`has(e.geo)`, T},
		{`has(e.missing)`, F},
		{`has(e.geo.country)`, T},
		{`has(e.geo.street)`, F},
		{`e.type == 1`, F},    // equality across types is false
		{`e.tags == "a"`, F},  // list vs string
		{`e.type < 1`, E},     // ordering across types is an error
		{`e.none < 1`, E},     // null has no ordering
		{`e.ok < 1`, E},       // bool vs int
		{`e.tags < 1`, E},     // list ordering
		{`e.missing == 1`, E}, // missing field
		{`e.geo.missing == 1`, E},
		{`e.type.x == 1`, E}, // select on a string
		{`e.tags.x == 1`, E}, // select on a list
		{`e.missing in [1]`, E},
		{`e["line\nbreak"] == 1`, E},
		{`e.type`, E}, // not a bool
		{`!e.type`, E},
		{`false && e.missing == 1`, F},
		{`e.missing == 1 && false`, F},
		{`true || e.missing == 1`, T},
		{`e.missing == 1 || true`, T},
		{`e.missing == 1 && true`, E},
		{`e.missing == 1 || false`, E},
		{`e.missing == 1 || e.type == "LOGIN"`, T},
		{`e.type && false`, F}, // non-bool absorbed like an error
		{`e.type || true`, T},
		{`e.type && true`, E},
		{`!(e.missing == 1)`, E},
		{`e.type == "LOGIN" && e.geo.country in ["DE", "FR"] && e.price > 5`, T},
		// General CEL features.
		{`e.user.startsWith("al") && e.user.upperAscii() == "ALICE"`, T},
		{`e.user.contains("lic")`, T},
		{`"a,b".split(",").size() == 2`, T},
		{`e.tags.exists(t, t == "b")`, T},
		{`size(e.tags) == 2`, T},
		{`e.amount + 1 == 251`, T},
		{`e.amount * 2.0 == 500.0`, E}, // CEL does not add int and double
		{`double(e.amount) * 2.0 == 500.0`, T},
		{`timestamp(e.ts) > timestamp("2024-01-01T00:00:00Z")`, T},
		{`timestamp(e.ts) + duration("1h") == timestamp("2024-01-02T04:04:05Z")`, T},
		{`timestamp(e.ts).getHours() == 3`, T},
		{`sum([1, 2.5]) == 3.5`, T},
		{`sum([]) == 0`, T},
		{`avg([]) == null`, T},
		{`min([3, 1.5, 2]) == 1.5`, T},
		{`max(["a"]) == 1`, E},
		{`first(e.tags) == "a" && last(e.tags) == "b"`, T},
		{`first([]) == null`, T},
		{`sum(["x"]) == 1`, E},
	}
	bothCompilers(t, func(t *testing.T, c *Compiler) {
		for _, tc := range cases {
			cond, err := c.Condition(tc.src)
			if err != nil {
				t.Errorf("Condition(%q): %v", tc.src, err)
				continue
			}
			got, err := cond.Eval(ev, nil)
			var r result
			switch {
			case err != nil:
				r = E
				if got {
					t.Errorf("%s: error %v but result true", tc.src, err)
				}
				if strings.ContainsAny(err.Error(), "\n\r") {
					t.Errorf("%s: error has several lines: %q", tc.src, err)
				}
			case got:
				r = T
			default:
				r = F
			}
			if r != tc.want {
				t.Errorf("%s = %v (err %v), want %v", tc.src, []string{"false", "true", "error"}[r], err, []string{"false", "true", "error"}[tc.want])
			}
			if cond.Source() != tc.src {
				t.Errorf("Source() = %q, want %q", cond.Source(), tc.src)
			}
		}
	})
}

func TestConditionNilEvent(t *testing.T) {
	bothCompilers(t, func(t *testing.T, c *Compiler) {
		cond, err := c.Condition(`e.a == 1`)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cond.Eval(nil, nil); err == nil {
			t.Error("missing field on a nil event: want error")
		}
	})
}

func TestEvents(t *testing.T) {
	c := mustCompiler(t)
	cond, err := c.Condition(`size(events("a")) > 0 && e.price > avg(events("a").map(x, x.price))`)
	if err != nil {
		t.Fatal(err)
	}
	if !cond.UsesEvents() {
		t.Error("UsesEvents() = false, want true")
	}
	ev := Event{"price": 10.0}
	low := fakeCtx{"a": {{"price": int64(1)}, {"price": 2.0}}}
	high := fakeCtx{"a": {{"price": int64(100)}}}
	other := fakeCtx{"b": {{"price": int64(1)}}}
	// The same program evaluated with different contexts one after another.
	for i, tc := range []struct {
		ctx  Ctx
		want bool
	}{
		{low, true}, {high, false}, {low, true}, {nil, false}, {other, false}, {high, false}, {low, true},
	} {
		got, err := cond.Eval(ev, tc.ctx)
		if err != nil || got != tc.want {
			t.Errorf("step %d: Eval = %v, %v; want %v", i, got, err, tc.want)
		}
	}

	plain, err := c.Condition(`e.price > 1`)
	if err != nil {
		t.Fatal(err)
	}
	if plain.UsesEvents() {
		t.Error("UsesEvents() = true for a condition without events()")
	}

	for _, tc := range []struct {
		src  string
		ctx  Ctx
		want any
	}{
		{`events("a")`, nil, []any{}},
		{`events("a")`, fakeCtx{}, []any{}},
		{`events("a")`, low, []any{map[string]any{"price": int64(1)}, map[string]any{"price": 2.0}}},
		{`events("a").size()`, low, int64(2)},
		{`sum(events("a").map(x, x.price))`, low, 3.0},
		{`sum(events("a").map(x, int(x.price)))`, low, int64(3)},
		{`min(events("a").map(x, x.price))`, low, int64(1)},
		{`max(events("a").map(x, x.price))`, low, 2.0},
		{`first(events("a")).price`, low, int64(1)},
		{`last(events("a")).price`, low, 2.0},
		{`first(events("zzz"))`, low, nil},
		{`avg(events("zzz").map(x, x.price))`, low, nil},
		{`events("a").filter(x, x.price > 1).map(x, x.price)`, low, []any{2.0}},
		{`events("a").exists(x, x.price == 2)`, low, true},
	} {
		v, err := c.Value(tc.src)
		if err != nil {
			t.Errorf("Value(%q): %v", tc.src, err)
			continue
		}
		if !v.UsesEvents() {
			t.Errorf("%s: UsesEvents() = false", tc.src)
		}
		got, err := v.Eval(Event{}, tc.ctx)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s = %#v, %v; want %#v", tc.src, got, err, tc.want)
		}
	}
}

func TestAggregates(t *testing.T) {
	c := mustCompiler(t)
	for _, tc := range []struct {
		src  string
		want any
		err  string
	}{
		{src: `sum([])`, want: int64(0)},
		{src: `sum([1, 2, 3])`, want: int64(6)},
		{src: `sum([1, 2.5])`, want: 3.5},
		{src: `sum([1u, 2u])`, want: uint64(3)},
		{src: `sum([1u, -2])`, want: int64(-1)},
		{src: `sum([9223372036854775807, 1])`, err: "overflow"},
		{src: `sum([9223372036854775807, 1.0])`, want: 9223372036854775808.0},
		{src: `sum([1, "x"])`, err: "element 1 is string, not a number"},
		{src: `avg([])`, want: nil},
		{src: `avg([1, 2])`, want: 1.5},
		{src: `avg([1.0, 2, 3u])`, want: 2.0},
		{src: `avg([null])`, err: "not a number"},
		{src: `min([])`, want: nil},
		{src: `min([3, 1.5, 2])`, want: 1.5},
		{src: `min([2, 2.0])`, want: int64(2)},
		{src: `max([3, 1.5, 2])`, want: int64(3)},
		{src: `max([1u, 2])`, want: int64(2)},
		{src: `max([1, true])`, err: "not a number"},
		{src: `first([])`, want: nil},
		{src: `first([1, "x"])`, want: int64(1)},
		{src: `last([])`, want: nil},
		{src: `last([1, "x"])`, want: "x"},
		{src: `sum(e.l)`, want: int64(6)},
		{src: `avg(e.l) == 2.0`, want: true},
	} {
		v, err := c.Value(tc.src)
		if err != nil {
			t.Errorf("Value(%q): %v", tc.src, err)
			continue
		}
		got, err := v.Eval(Event{"l": []any{int64(1), int64(2), int64(3)}}, nil)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s = %#v, %v; want error containing %q", tc.src, got, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s = %#v, %v; want %#v", tc.src, got, err, tc.want)
		}
	}
}

func TestValue(t *testing.T) {
	ev := Event{
		"user": "alice", "n": int64(7), "f": 2.5, "ok": true, "none": nil,
		"geo":  map[string]any{"country": "DE"},
		"tags": []any{"a", int64(1)},
		"ts":   "2024-01-02T03:04:05.5+01:00",
	}
	bothCompilers(t, func(t *testing.T, c *Compiler) {
		for _, tc := range []struct {
			src  string
			want any
			err  string
		}{
			{src: `e.user`, want: "alice"},
			{src: `e["user"]`, want: "alice"},
			{src: `e.n`, want: int64(7)},
			{src: `e.f`, want: 2.5},
			{src: `e.ok`, want: true},
			{src: `e.none`, want: nil},
			{src: `e.geo.country`, want: "DE"},
			{src: `e.geo`, want: map[string]any{"country": "DE"}},
			{src: `e.tags`, want: []any{"a", int64(1)}},
			{src: `e.missing`, err: "no such key: missing"},
			{src: `e.geo.missing`, err: "no such key: missing"},
			{src: `e.user + "-" + e.geo.country`, want: "alice-DE"},
			{src: `1u`, want: uint64(1)},
			{src: `b"hi"`, want: []byte("hi")},
			{src: `timestamp(e.ts)`, want: time.Date(2024, 1, 2, 2, 4, 5, 500_000_000, time.UTC)},
			{src: `duration("90s")`, want: 90 * time.Second},
			{src: `{"user": e.user, "n": e.n * 2, "nested": {"l": [1, null]}}`,
				want: map[string]any{"user": "alice", "n": int64(14), "nested": map[string]any{"l": []any{int64(1), nil}}}},
			{src: `{1: "a", true: "b"}`, want: map[string]any{"1": "a", "true": "b"}},
			{src: `{2.5: "a"}`, err: "key"},
			{src: `type(e)`, err: "cannot be converted"},
			{src: `e.n / 0`, err: "division by zero"},
		} {
			v, err := c.Value(tc.src)
			if err != nil {
				if tc.err != "" && strings.Contains(err.Error(), tc.err) {
					continue
				}
				t.Errorf("Value(%q): %v", tc.src, err)
				continue
			}
			if v.Source() != tc.src || v.UsesEvents() {
				t.Errorf("%s: Source() = %q, UsesEvents() = %v", tc.src, v.Source(), v.UsesEvents())
			}
			got, err := v.Eval(ev, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("%s = %#v, %v; want error containing %q", tc.src, got, err, tc.err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", tc.src, err)
				continue
			}
			if tm, ok := tc.want.(time.Time); ok {
				gt, ok := got.(time.Time)
				if !ok || !gt.Equal(tm) {
					t.Errorf("%s = %#v, want %v", tc.src, got, tm)
				}
				continue
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s = %#v, want %#v", tc.src, got, tc.want)
			}
		}
	})
}

func TestKeyAndTimeFromValue(t *testing.T) {
	c := mustCompiler(t)
	ev, err := DecodeEvent([]byte(`{"user": {"id": 42}, "at": "2024-01-02T03:04:05.25Z", "ms": 1704164645250, "fms": 1704164645250.0}`))
	if err != nil {
		t.Fatal(err)
	}
	key, err := c.Value(`e.user.id`)
	if err != nil {
		t.Fatal(err)
	}
	k, err := key.Eval(ev, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := KeyString(k); err != nil || s != "42" {
		t.Errorf("KeyString(%#v) = %q, %v", k, s, err)
	}
	for _, src := range []string{`e.at`, `e.ms`, `e.fms`, `timestamp(e.at)`, `int(timestamp(e.at)) * 1000 + 250`} {
		v, err := c.Value(src)
		if err != nil {
			t.Fatal(err)
		}
		x, err := v.Eval(ev, nil)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if ms, err := TimeMillis(x); err != nil || ms != 1704164645250 {
			t.Errorf("%s: TimeMillis(%#v) = %d, %v", src, x, ms, err)
		}
	}
}

func TestRuntimeCostLimit(t *testing.T) {
	c := mustCompiler(t)
	// Within the static estimate, which assumes at most 10,000 events with
	// strings of 1 KiB, but the context supplies larger inputs.
	cond, err := c.Condition(`events("a").exists(x, x.s.contains("needle") || x.s.startsWith("pin") || x.s.endsWith("z"))`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		n      int
		strLen int
	}{
		{"many events", 1_000_000, 8},
		{"long strings", 10_000, 64 * 1024},
	} {
		if testing.Short() && tc.n > 100_000 {
			continue
		}
		one := Event{"s": strings.Repeat("h", tc.strLen)}
		evs := make([]Event, tc.n)
		for i := range evs {
			evs[i] = one
		}
		_, err = cond.Eval(Event{}, fakeCtx{"a": evs})
		if err == nil || !strings.Contains(err.Error(), "cost") {
			t.Errorf("%s: err = %v, want a cost limit error", tc.name, err)
		}
		// A modest context is fine.
		if got, err := cond.Eval(Event{}, fakeCtx{"a": evs[:100]}); err != nil || got {
			t.Errorf("%s: Eval over 100 events = %v, %v; want false, nil", tc.name, got, err)
		}
	}
}

// A compiled Condition and Value are used from many goroutines at once; run
// with -race.
func TestConcurrentEval(t *testing.T) {
	c := mustCompiler(t)
	conds := []string{
		`e.type == "LOGIN" && e.n > 3`,
		`events("a").exists(x, x.n == e.n)`,
	}
	var wg sync.WaitGroup
	for _, src := range conds {
		cond, err := c.Condition(src)
		if err != nil {
			t.Fatal(err)
		}
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 200; i++ {
					n := int64((g + i) % 7)
					ctx := fakeCtx{"a": {{"n": n}}}
					got, err := cond.Eval(Event{"type": "LOGIN", "n": n}, ctx)
					if err != nil || got != (n > 3 || cond.UsesEvents()) {
						t.Errorf("%s with n=%d: %v, %v", src, n, got, err)
						return
					}
				}
			}(g)
		}
	}
	wg.Wait()
}
