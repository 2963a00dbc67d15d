package expr

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// checkCanonical fails unless v holds only the types DecodeEvent documents.
func checkCanonical(t *testing.T, v any, depth int) {
	switch x := v.(type) {
	case string, int64, float64, bool, nil:
	case []any:
		for _, e := range x {
			checkCanonical(t, e, depth+1)
		}
	case map[string]any:
		for _, e := range x {
			checkCanonical(t, e, depth+1)
		}
	default:
		t.Fatalf("decoded value of unexpected type %T", v)
	}
}

func FuzzDecodeEvent(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, `{"a":1.5,"b":"x","c":[1,{"d":null}],"e":true}`,
		`{"i":9223372036854775807,"j":9223372036854775808,"k":-9223372036854775809}`,
		`{"f":1e308,"g":1e309,"h":-0,"z":0.0000001}`, `[]`, `null`, `"x"`, `1`, ``, `{`,
		`{"a":1}{"b":2}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"a":[[[[[[[[]]]]]]]]}`,
		strings.Repeat(`{"a":`, 200) + `1` + strings.Repeat(`}`, 200),
		strings.Repeat(`[`, 20000),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeEvent(b)
		if err != nil {
			if ev != nil {
				t.Fatalf("error %v with a non-nil event", err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error has several lines: %q", err)
			}
			return
		}
		if ev == nil {
			t.Fatal("nil event without an error")
		}
		checkCanonical(t, ev, 0)
		// A decoded event re-encodes, and decodes to the same value.
		out, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if _, err := DecodeEvent(out); err != nil {
			t.Fatalf("decode of re-encoded %s: %v", out, err)
		}
	})
}

var fuzzCompiler = func() *Compiler {
	c, err := NewCompiler()
	if err != nil {
		panic(err)
	}
	return c
}()

func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		`e.type == "LOGIN"`, `e.a.b > 1.5 && !(e.c in [1, "x", null])`, `has(e.a) || e["b"] <= -3`,
		`events("a").exists(x, x.user == e.user)`, `sum(events("a").map(x, x.v)) > avg([1, 2])`,
		`e.s.matches("^a+$")`, `e.s.matches("(")`, `timestamp(e.ts) < timestamp("2024-01-01T00:00:00Z")`,
		`duration("1h") > duration("bogus")`, `first(events("x")).y.z`, `"a" + 1`, `e.`, `)(`, `[[[[`,
		`{"a": 1}.a == 1`, `e.a.all(x, x.all(y, y))`, `1 / 0 == 1`, `e.s.format([1])`, `"%d".format([e.n])`,
		`e.s.substring(-1) == ""`, `e.s.charAt(100) == ""`, `"\xff" == e.s`, `b"\xff".size() > 0`,
		`e.s.split("", -5).size() > 0`, `e.s.replace("", "x", 100000000) == ""`, `e.l[9223372036854775807] == 1`,
		`int("99999999999999999999") > 0`, `-9223372036854775808 / -1 == 0`, `e.n % 0 == 0`,
		strings.Repeat("(", 300) + "true" + strings.Repeat(")", 300), strings.Repeat("!", 1000) + "true",
		strings.Repeat("e.a == 1 && ", 300) + "true",
	} {
		f.Add(s)
	}
	ev := Event{"type": "LOGIN", "a": map[string]any{"b": int64(2)}, "s": "aaa", "n": int64(3), "l": []any{int64(1)},
		"ts": "2024-01-01T00:00:00Z", "user": "u"}
	ctx := fakeCtx{"a": {{"user": "u", "v": 1.5}}, "x": {{"y": map[string]any{"z": true}}}}
	f.Fuzz(func(t *testing.T, src string) {
		cond, err := fuzzCompiler.Condition(src)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("compile error has several lines: %q", err)
			}
		} else {
			got, err := cond.Eval(ev, ctx)
			if err != nil && got {
				t.Fatalf("Eval returned true with error %v", err)
			}
			if _, err := cond.Eval(ev, nil); err != nil && strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("eval error has several lines: %q", err)
			}
		}
		if v, err := fuzzCompiler.Value(src); err == nil {
			_, _ = v.Eval(ev, ctx)
		}
	})
}

// FuzzDecodeEventAgrees checks DecodeEvent's fast path against
// encoding/json alone: the same event, or an error on both.
func FuzzDecodeEventAgrees(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, `{"a":1.5,"b":"x","c":[1,{"d":null}],"e":true}`, `{"a":1,"a":2}`,
		`{"i":9223372036854775807,"j":9223372036854775808,"k":-9223372036854775809}`,
		`{"f":1e308,"g":1e309,"h":-0,"z":0.0000001}`, `{"a":"\x"}`, "{\"a\":\"\x01\"}",
		`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":+1}`, `{"a":1e}`, `{"a":"\/\n\t\""}`,
		` {"a" : [ ] } `, `{"a":1}x`, `{"a":tru}`, `{"a":NaN}`, `{"a":Infinity}`,
		"{\"a\":1}\n", "\t{\"a\":1}\r\n", "{\"a\":\n1}", "{\"a\":1}\n\x01",
		strings.Repeat(`{"a":`, 400) + `1` + strings.Repeat(`}`, 400),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, gerr := DecodeEvent(b)
		want, werr := decodeStd(b)
		if (gerr != nil) != (werr != nil) {
			t.Fatalf("%q: DecodeEvent error %v, encoding/json error %v", b, gerr, werr)
		}
		if gerr != nil {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\nDecodeEvent   %#v\nencoding/json %#v", b, got, want)
		}
	})
}

// An event with JSON white space around it (json.Encoder's trailing
// newline) takes the fast path; white space inside it, or a control
// character anywhere, leaves it to encoding/json.
func TestFastPathTakesSurroundingWhiteSpace(t *testing.T) {
	for in, fast := range map[string]bool{
		"{\"a\":1}\n":      true,
		"\t{\"a\":1}\r\n":  true,
		"{\"a\":\n1}":      false,
		"{\"a\":\"\x01\"}": false,
	} {
		if _, ok := decodeFast([]byte(in)); ok != fast {
			t.Errorf("decodeFast(%q): fast path %v, want %v", in, ok, fast)
		}
	}
}

// jsonNumber takes exactly what encoding/json takes as a number document:
// the check that lets the event decoder skip fastjson's validator for
// lines without escapes (fastjson's parser takes "+1", "1.", "01", "NaN").
func TestJSONNumberEqualsEncodingJSON(t *testing.T) {
	for _, s := range []string{"0", "-0", "1", "-12", "1.5", "1e9", "1E+9", "2.5e-3", "01", "+1", "1.", ".5", "-", "1e", "1e+", "--1", "NaN", "nan", "inf", "-Inf", "0x10", "1_000", ""} {
		if got, want := jsonNumber([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("%q: %v, encoding/json %v", s, got, want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringMatching(`[-+0-9.eEnaifNI]{0,8}`).Draw(t, "s")
		if got, want := jsonNumber([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Fatalf("%q: %v, encoding/json %v", s, got, want)
		}
	})
}
