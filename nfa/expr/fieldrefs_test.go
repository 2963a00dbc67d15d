package expr

import (
	"fmt"
	"testing"
)

// TestFieldRefs checks the fields an expression reads against what each
// source plainly names: every e.x.y chain, longest first, none of the
// comprehension variables' or computed indexes' fields.
func TestFieldRefs(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		src  string
		want string
	}{
		{`e.type == "LOGIN"`, `[type@1:1]`},
		{`e.user.id == "a" && e.amout > 5`, `[user.id@1:1 amout@1:21]`},
		{`has(e.card.country) || e["kind"] == "x"`, `[card.country@1:5 kind@1:24]`},
		{`e.amount > avg(events("a").map(x, x.amount))`, `[amount@1:1]`},
		{`e.tags[e.i] == "x"`, `[tags@1:1 i@1:8]`},
		{`true`, `[]`},
	} {
		cond, err := c.Condition(tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		var got []string
		for _, r := range cond.FieldRefs() {
			got = append(got, fmt.Sprintf("%s@%d:%d", r.Path, r.Line, r.Column))
		}
		if s := fmt.Sprint(got); s != tc.want {
			t.Errorf("%s: refs %s, want %s", tc.src, s, tc.want)
		}
	}
}
