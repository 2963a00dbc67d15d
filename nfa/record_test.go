package nfa

import (
	"encoding/json"
	"testing"

	"pgregory.net/rapid"
)

// appendJSONString writes what encoding/json writes, for any string:
// plain ASCII, escapes, HTML characters, control characters, multi-byte
// and invalid UTF-8, U+2028.
func TestAppendJSONStringEqualsEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "acc-1", `a"b`, `a\b`, "<tag>&", "\x00\x1f", "é", "\u2028", "\xff\xfe", "k00123"} {
		want, _ := json.Marshal(s)
		if got := appendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("%q: %s, want %s", s, got[1:], want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		// any runes, printable ASCII, and arbitrary bytes (invalid UTF-8)
		s := rapid.OneOf(rapid.String(), rapid.StringMatching(`[ -~]{0,20}`),
			rapid.Map(rapid.SliceOf(rapid.Byte()), func(b []byte) string { return string(b) })).Draw(t, "s")
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("%q: %s, want %s", s, got, want)
		}
	})
}

// A record's JSON is the same whatever room the buffer it is appended to
// has (jsonSize only sizes the buffer).
func TestRecordJSONIndependentOfBuffer(t *testing.T) {
	r := Record{Type: "match", Pattern: "p", Key: "k\"1", Start: 1, End: 2,
		Events: []StageEvents{{Stage: "a", Events: [][]byte{[]byte(`{"x":1}`), []byte(" {\"y\":\n2} ")}}, {Stage: "b<", Events: [][]byte{[]byte(`{}`)}}},
		Fields: []Field{{Name: "n", Value: 3}}}
	a, _ := r.AppendJSON(nil)
	b, _ := r.AppendJSON(make([]byte, 0, 1))
	c, _ := r.AppendJSON([]byte("prefix"))
	if string(a) != string(b) || "prefix"+string(a) != string(c) {
		t.Fatalf("%s\n%s\n%s", a, b, c)
	}
	var v map[string]any
	if err := json.Unmarshal(a, &v); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
}

// A record room keeps its arrays from call to call, but not for good the
// arrays of a call with far more records than a long row of calls after
// it; and what it cuts
// is zeroed and never overlaps what it cut earlier in the same call.
func TestRecordRoomReuseAndRelease(t *testing.T) {
	var r recordRoom
	a, _, s := r.cut(3)
	a[0], s[0].Stage = []byte("x"), "a"
	b, _, _ := r.cut(100_000) // does not fit: a new array; a keeps the old one
	if string(a[0]) != "x" || s[0].Stage != "a" || &a[0] == &b[0] {
		t.Fatal("a cut changed what an earlier cut of the call holds")
	}
	r.reset()
	big := cap(r.raws)
	if big < 100_000 {
		t.Fatalf("the arrays of a call are kept for the next: capacity %d", big)
	}
	c, _, cs := r.cut(10)
	for i := range c {
		if c[i] != nil || cs[i].Stage != "" || cs[i].Events != nil {
			t.Fatal("a cut is not zeroed")
		}
	}
	r.reset() // this call used 10 of them
	for range 2*roomCalls - 3 {
		r.cut(10)
		r.reset()
	}
	if cap(r.raws) != big {
		t.Fatalf("capacity %d, want %d kept while calls have been small for a while only", cap(r.raws), big)
	}
	r.reset() // a whole round of calls has used little of it: let it go
	if cap(r.raws) != 0 || cap(r.pos) != 0 || cap(r.stages) != 0 {
		t.Fatalf("capacity %d kept after %d calls using 10", cap(r.raws), 2*roomCalls)
	}
	r.cut(10)
	r.reset()
	if cap(r.raws) == 0 {
		t.Fatal("a small room is not kept")
	}
}
