package sql

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// FuzzParse: Parse never panics and always ends; its errors are one-line
// *Error values with a position inside the input; Check never panics; and
// a query that parses prints back to SQL that parses to the same text.
//
//	go test ./nfa/sql -run '^$' -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	for _, c := range loadConformance(f) {
		f.Add(*c.SQL)
	}
	f.Add(goAround)
	for _, s := range []string{
		"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A | B) DEFINE A AS true)",
		"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (X (A B | C)+? PERMUTE(D, E | F, (G H)?)* | PERMUTE(I)) DEFINE A AS true)",
		"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN ((A B)+ C{2,5}? D*?) WITHIN INTERVAL '10 00:00:00.004' DAY TO SECOND DEFINE A AS CASE WHEN x IN (1, 2) THEN TRUE ELSE x BETWEEN 1 AND 2 END)",
		"SELECT a AS b FROM (SELECT r.x.y AS a, CAST(z AS TIMESTAMP(3) WITH LOCAL TIME ZONE) FROM r WHERE q LIKE 'a%' ESCAPE '!') MATCH_RECOGNIZE (PARTITION BY a ORDER BY ts MEASURES FINAL LAST(A.x, 1) AS b PATTERN (A) DEFINE A AS EXTRACT(DAY FROM ts) = 1 AND TIMESTAMPADD(SECOND, 1, ts) > CURRENT_TIMESTAMP) T;",
		"select `x``y` from \"t\" match_recognize (order by ts measures count(*) as `x``y` pattern (a) define a as 'it''s' || 'x' = a.b /* c */ -- d\n)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		q, err := Parse(src)
		if err != nil {
			checkError(t, src, err)
			return
		}
		for _, cols := range [][]string{nil, {"id", "ts", "price", "x", "a"}} {
			if errs := q.Problems(cols); len(errs) > 0 {
				for _, e := range errs {
					checkError(t, src, e)
				}
			}
		}
		printed := q.String()
		q2, err := Parse(printed)
		if err != nil {
			t.Fatalf("printed query does not parse: %v\ninput:\n%s\nprinted:\n%s", err, src, printed)
		}
		if again := q2.String(); again != printed {
			t.Fatalf("printing is not stable:\n%s\n---\n%s", printed, again)
		}
	})
}

func checkError(t *testing.T, src string, err error) {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %T is not *Error: %v", err, err)
	}
	msg := err.Error()
	if strings.ContainsAny(msg, "\n\r") {
		t.Fatalf("error is not one line: %q", msg)
	}
	lines := strings.Count(src, "\n") + 1
	if pe.Pos.Line < 1 || pe.Pos.Line > lines || pe.Pos.Col < 1 {
		t.Fatalf("error position %v outside the input (%d lines): %s", pe.Pos, lines, msg)
	}
}

// genExpr draws a random expression tree of at most the given depth.
func genExpr(t *rapid.T, depth int) Expr {
	names := []string{"price", "id", "weird name", "select", `A"`, "x`y", "first", "Day"}
	vars := []string{"", "", "A", "B", `DOWN"`}
	leaf := func() Expr {
		switch rapid.IntRange(0, 6).Draw(t, "leaf") {
		case 0:
			return &ColumnRef{Var: rapid.SampledFrom(vars).Draw(t, "var"), Name: rapid.SampledFrom(names).Draw(t, "name")}
		case 1:
			return numLiteral(rapid.SampledFrom([]string{"0", "1", "-1", "42", "1.5", "-0.25", "1e3", "99999999999999999999"}).Draw(t, "num"), Pos{})
		case 2:
			return &Literal{Kind: LitString, Str: rapid.SampledFrom([]string{"", "a", "it's", "%x_", "two\nlines"}).Draw(t, "str")}
		case 3:
			return &Literal{Kind: LitBool, Bool: rapid.Bool().Draw(t, "bool")}
		case 4:
			return &Literal{Kind: LitNull}
		case 5:
			iv, err := ParseExpr(rapid.SampledFrom([]string{"INTERVAL '1' SECOND", "INTERVAL -'3' MINUTE(3)", "INTERVAL '1:30' MINUTE TO SECOND", "INTERVAL '2-1' YEAR TO MONTH"}).Draw(t, "iv"))
			if err != nil {
				t.Fatal(err)
			}
			return iv
		default:
			return &Call{Name: "CURRENT_TIMESTAMP", NoParens: true}
		}
	}
	if depth == 0 || rapid.IntRange(0, 3).Draw(t, "stop") == 0 {
		return leaf()
	}
	sub := func() Expr { return genExpr(t, depth-1) }
	switch rapid.IntRange(0, 10).Draw(t, "node") {
	case 0:
		x := sub()
		if l, ok := x.(*Literal); ok && (l.Kind == LitInt || l.Kind == LitDecimal || l.Kind == LitFloat) {
			return &Unary{Op: "NOT", X: x}
		}
		return &Unary{Op: rapid.SampledFrom([]string{"-", "NOT"}).Draw(t, "op"), X: x}
	case 1, 2:
		ops := []string{"OR", "AND", "=", "<>", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "||", "IS DISTINCT FROM", "IS NOT DISTINCT FROM"}
		return &Binary{Op: rapid.SampledFrom(ops).Draw(t, "binop"), L: sub(), R: sub()}
	case 3:
		return &IsNull{X: sub(), Not: rapid.Bool().Draw(t, "not")}
	case 4:
		return &IsBool{X: sub(), Not: rapid.Bool().Draw(t, "not"), Value: rapid.Bool().Draw(t, "v")}
	case 5:
		return &Between{X: sub(), Lo: sub(), Hi: sub(), Not: rapid.Bool().Draw(t, "not"), Symmetric: rapid.Bool().Draw(t, "sym")}
	case 6:
		n := rapid.IntRange(1, 3).Draw(t, "n")
		in := &In{X: sub(), Not: rapid.Bool().Draw(t, "not")}
		for range n {
			in.List = append(in.List, sub())
		}
		return in
	case 7:
		l := &Like{X: sub(), Pattern: sub(), Not: rapid.Bool().Draw(t, "not")}
		if rapid.Bool().Draw(t, "esc") {
			l.Escape = sub()
		}
		return l
	case 8:
		c := &Case{}
		if rapid.Bool().Draw(t, "simple") {
			c.Operand = sub()
		}
		for range rapid.IntRange(1, 2).Draw(t, "whens") {
			c.Whens = append(c.Whens, When{Cond: sub(), Then: sub()})
		}
		if rapid.Bool().Draw(t, "else") {
			c.Else = sub()
		}
		return c
	case 9:
		switch rapid.IntRange(0, 3).Draw(t, "call") {
		case 0:
			return &Call{Name: "COUNT", Star: true}
		case 1:
			return &Call{Name: rapid.SampledFrom([]string{"LAST", "FIRST", "PREV"}).Draw(t, "nav"), Args: []Expr{sub(), numLiteral("1", Pos{})}}
		case 2:
			return &Call{Name: "SUM", Args: []Expr{sub()}, Distinct: rapid.Bool().Draw(t, "distinct")}
		default:
			return &Call{Name: "WEIGHTEDAVG", Args: []Expr{sub(), sub()}}
		}
	default:
		return &Cast{X: sub(), Type: TypeName{Name: rapid.SampledFrom([]string{"INT", "DOUBLE", "VARCHAR", "TIMESTAMP WITH LOCAL TIME ZONE"}).Draw(t, "type"), Args: []int{3}}}
	}
}

// Printing any expression tree and parsing the text gives back a tree
// that prints the same: the fully parenthesised form is unambiguous.
func TestExprPrintParseRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := genExpr(t, 5)
		s := e.String()
		e2, err := ParseExpr(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if s2 := e2.String(); s2 != s {
			t.Fatalf("round trip:\n%s\n%s", s, s2)
		}
	})
}
