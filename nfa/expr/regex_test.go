package expr

import (
	"fmt"
	"strings"
	"testing"
)

// A constant regex whose program is over MaxRegexProgramSize is refused
// when the expression compiles, naming the limit; one just under it is
// taken.
func TestRegexProgramSizeRefusedAtCompile(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Condition(`e.s.matches("[a-z]{0,1000}x")`)
	if err == nil || !strings.Contains(err.Error(), "regex program size") || !strings.Contains(err.Error(), fmt.Sprint(MaxRegexProgramSize)) {
		t.Fatalf("regex of about 2,000 instructions: %v, want refused naming the limit %d", err, MaxRegexProgramSize)
	}
	if _, err := c.Condition(`e.s.matches("^[a-z]{0,100}x$")`); err != nil {
		t.Fatalf("a regex of about 200 instructions: %v", err)
	}
}

// A constant regex is compiled once, not at every evaluation: an
// evaluation allocates a few values, where compiling this regex
// allocates hundreds.
func TestRegexCompiledOnce(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	const re = `^(a|b|c|d|e|f|g|h)[0-9]{0,60}(x|y|z)+$`
	cond, err := c.Condition(`e.s.matches("` + re + `")`)
	if err != nil {
		t.Fatal(err)
	}
	ev := Event{"s": "a0123456789xyz"}
	if ok, err := cond.Eval(ev, fakeCtx{}); err != nil || !ok {
		t.Fatalf("eval: %v, %v", ok, err)
	}
	compile := testing.AllocsPerRun(20, func() {
		if _, _, err := c.compile(`"x".matches("` + re + `")`); err != nil {
			t.Fatal(err)
		}
	})
	eval := testing.AllocsPerRun(200, func() { _, _ = cond.Eval(ev, fakeCtx{}) })
	if eval*4 > compile {
		t.Fatalf("an evaluation allocates %.0f times, compiling the expression %.0f: the regex is compiled at each evaluation", eval, compile)
	}
}

// A string whose scan would be over MaxRegexWork is refused before it is
// scanned, naming the limit; a regex that is not a literal is refused
// when the expression compiles.
func TestRegexWorkBounded(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	cond, err := c.Condition(`e.s.matches("[a-z]{0,400}x")`)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("a", 256<<10)
	_, err = cond.Eval(Event{"s": big}, fakeCtx{})
	if err == nil || !strings.Contains(err.Error(), "MaxRegexWork") {
		t.Fatalf("a 256 KiB string against [a-z]{0,400}x: %v, want refused naming MaxRegexWork", err)
	}
	if ok, err := cond.Eval(Event{"s": "abcx"}, fakeCtx{}); err != nil || !ok {
		t.Fatalf("a short string: %v, %v", ok, err)
	}
	for _, src := range []string{`e.s.matches(e.re)`, `matches(e.s, e.re)`, `e.s.matches("a" + e.re)`, `["x"].exists(r, e.s.matches(r))`} {
		if _, err := c.Condition(src); err == nil || !strings.Contains(err.Error(), "string literal") {
			t.Errorf("%s: %v, want refused: the regex is not a literal", src, err)
		}
	}
	if _, err := c.Condition(`matches(e.s, "^a+$")`); err != nil {
		t.Errorf("the global form with a literal: %v", err)
	}
}
