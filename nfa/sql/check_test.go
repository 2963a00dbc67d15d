package sql

import (
	"errors"
	"strings"
	"testing"
)

var testColumns = []string{"id", "ts", "amount", "price", "name", "symbol", "payload"}

// Every semantic error: exact message with line:column. cols "nil" runs
// Check without known columns.
func TestCheckErrors(t *testing.T) {
	const pre = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts "
	known, unknown := testColumns, []string(nil)
	cases := []struct {
		src  string
		cols []string
		want string
	}{
		// Variables.
		{pre + "MEASURES X.price AS p PATTERN (A B) DEFINE A AS A.price > 0)", unknown,
			"line 1:55: variable 'X' is not defined in PATTERN (A, B)"},
		{pre + "MEASURES b.price AS p PATTERN (A B) DEFINE A AS A.price > 0)", known,
			"line 1:55: variable 'b' is not defined in PATTERN (A, B). Did you mean 'B'?"},
		{"SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A B)\n  DEFINE\n    A AS A.price > 0,\n    B AS B.price > LAST(C.price))", unknown,
			"line 6:25: variable 'C' is not defined in PATTERN (A, B)"},
		{pre + "AFTER MATCH SKIP TO FIRST C PATTERN (A B) DEFINE A AS true)", unknown,
			"line 1:72: variable 'C' is not defined in PATTERN (A, B)"},
		{pre + "AFTER MATCH SKIP TO LAST C PATTERN (A B) DEFINE A AS true)", unknown,
			"line 1:71: variable 'C' is not defined in PATTERN (A, B)"},
		{pre + "AFTER MATCH SKIP TO Q PATTERN (A B) DEFINE A AS true)", unknown,
			"line 1:66: variable 'Q' is not defined in PATTERN (A, B)"},
		{pre + "PATTERN (A B) DEFINE A AS payload.amount > 1)", unknown,
			"line 1:72: variable 'payload' is not defined in PATTERN (A, B)"},
		// DEFINE and MEASURES names.
		{pre + "PATTERN (A B) DEFINE A AS A.price > 0, A AS A.price < 5)", unknown,
			"line 1:85: variable 'A' is defined twice in DEFINE (first at line 1:67)"},
		{pre + "PATTERN (A B) DEFINE C AS C.price > 0)", unknown,
			"line 1:67: DEFINE for variable 'C', which is not in PATTERN (A, B)"},
		{pre + "PATTERN (A Bx) DEFINE Bxx AS true)", unknown,
			"line 1:68: DEFINE for variable 'Bxx', which is not in PATTERN (A, Bx), whose 'Bx' has no DEFINE: one of the two is misspelt"},
		// a variable with a DEFINE of its own is not offered for another
		{pre + "PATTERN (A Bx) DEFINE Bx AS true, Bxx AS true)", unknown,
			"line 1:80: DEFINE for variable 'Bxx', which is not in PATTERN (A, Bx)"},
		{pre + "MEASURES A.id AS x, B.id AS x PATTERN (A B) DEFINE A AS true)", unknown,
			"line 1:74: measure name 'x' is used twice (first at line 1:63)"},
		{"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES A.id AS symbol PATTERN (A B) DEFINE A AS true)", unknown,
			"line 1:83: measure name 'symbol' is also a PARTITION BY column; the output would have two columns of that name"},
		// Columns.
		{pre + "PATTERN (A B) DEFINE A AS A.amout > 0)", known,
			"line 1:74: no field 'amout'. Did you mean 'amount'?"},
		{pre + "PATTERN (A B) DEFINE A AS Amount > 0)", known,
			"line 1:72: no field 'Amount'. Did you mean 'amount'?"},
		{pre + "MEASURES B AS b PATTERN (A B) DEFINE A AS true)", known,
			"line 1:55: no field 'B': 'B' is a pattern variable; name one of its columns, e.g. B.id"},
		{pre + "PATTERN (A B) DEFINE A AS zzz > 0)", known,
			"line 1:72: no field 'zzz'"},
		{pre + "MEASURES SUM(A.prcie) AS s PATTERN (A B) DEFINE A AS true)", known,
			"line 1:61: no field 'prcie'. Did you mean 'price'?"},
		{pre + "PATTERN (A B) DEFINE A AS A.payload.amount > 1 AND payload.amount > 2)", known, ""},
		{"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY tss PATTERN (A B) DEFINE A AS true)", known,
			"line 1:43: no field 'tss'. Did you mean 'ts'?"},
		{"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY proctime MEASURES A.proctime AS pt PATTERN (A B) DEFINE A AS proctime > 0)", known, ""},
		{"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts, prise PATTERN (A B) DEFINE A AS true)", known,
			"line 1:47: no field 'prise'. Did you mean 'price'?"},
		{"SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY symbl ORDER BY ts PATTERN (A B) DEFINE A AS true)", known,
			"line 1:47: no field 'symbl'. Did you mean 'symbol'?"},
		{"SELECT * FROM (SELECT input.a AS a, ts FROM record) MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B) DEFINE A AS A.b > 1)", unknown,
			"line 1:110: no field 'b'"},
		{"SELECT * FROM (SELECT input.a AS a, ts FROM record) MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B) DEFINE A AS A.a > 1)", []string{"inptu", "ts"},
			"line 1:23: no field 'input'. Did you mean 'inptu'?"},
		{"SELECT * FROM (SELECT a, a FROM record) MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B) DEFINE A AS true)", unknown,
			"line 1:26: column 'a' appears twice in the subquery (first at line 1:23); rename one with AS"},
		// Functions.
		{pre + "PATTERN (A B) DEFINE A AS PREV(A.price, -1) > 0)", unknown,
			"line 1:86: the offset of PREV must be a non-negative integer literal, found -1"},
		{pre + "PATTERN (A B) DEFINE A AS LAST(A.price, 1.5) > 0)", unknown,
			"line 1:86: the offset of LAST must be a non-negative integer literal, found 1.5"},
		{pre + "PATTERN (A B) DEFINE A AS LAST(A.price, A.id) > 0)", unknown,
			"line 1:86: the offset of LAST must be a non-negative integer literal, found A.id"},
		{pre + "PATTERN (A B) DEFINE A AS FIRST(A.price, 1, 2) > 0)", unknown,
			"line 1:72: FIRST takes an expression and an optional offset: FIRST(A.col [, n]), found 3"},
		{pre + "PATTERN (A B) DEFINE A AS SUM(COUNT(A.price)) > 0)", unknown,
			"line 1:76: aggregate COUNT cannot be nested inside the aggregate SUM"},
		{pre + "PATTERN (A B) DEFINE A AS LAST(SUM(A.price)) > 0)", unknown,
			"line 1:77: aggregate SUM cannot be used inside LAST"},
		{pre + "PATTERN (A B) DEFINE A AS LAST(PREV(A.price)) > 0)", unknown,
			"line 1:77: PREV cannot be nested inside LAST"},
		{pre + "PATTERN (A B) DEFINE A AS SUM(LAST(A.price)) > 0)", unknown,
			"line 1:76: LAST cannot be used inside the aggregate SUM"},
		{pre + "MEASURES PREV(A.price) AS p, NEXT(FIRST(A.price, 1), 3) AS q, PREV(LAST(price)) AS r PATTERN (A B) DEFINE A AS true)", unknown, ""},
		{pre + "PATTERN (A B) DEFINE A AS NEXT(A.price) > 0)", unknown,
			"line 1:72: NEXT cannot be used in DEFINE: it reads a row after the current one, which a stream has not seen yet (NEXT may be used in MEASURES)"},
		{pre + "MEASURES PREV(FIRST(A.price) + 1) AS p PATTERN (A B) DEFINE A AS true)", unknown,
			"line 1:60: FIRST inside PREV must be its whole first argument, as in PREV(FIRST(A.col), 1)"},
		{pre + "MEASURES NEXT(LAST(A.price), -1) AS p PATTERN (A B) DEFINE A AS true)", unknown,
			"line 1:75: the offset of NEXT must be a non-negative integer literal, found -1"},
		{pre + "MEASURES FIRST(NEXT(A.price)) AS p PATTERN (A B) DEFINE A AS true)", unknown,
			"line 1:61: NEXT cannot be nested inside FIRST"},
		{pre + "MEASURES NEXT(SUM(A.price)) AS p PATTERN (A B) DEFINE A AS true)", unknown,
			"line 1:60: aggregate SUM cannot be used inside NEXT"},
		{pre + "MEASURES PREV(PREV(A.price)) AS p PATTERN (A B) DEFINE A AS true)", unknown,
			"line 1:60: PREV cannot be nested inside PREV"},
		{pre + "PATTERN (A B) DEFINE A AS SUM(A.price + B.price) > 0)", unknown,
			"line 1:72: SUM(...) refers to more than one pattern variable (A, B); an aggregate runs over the rows of one variable"},
		{pre + "MEASURES LAST(A.price - B.price) AS d PATTERN (A B) DEFINE A AS true)", unknown,
			"line 1:55: LAST(...) refers to more than one pattern variable (A, B); navigation functions read the rows of one variable"},
		{pre + "PATTERN (A B) DEFINE A AS COUNT(DISTINCT A.price) > 0)", unknown,
			"line 1:72: DISTINCT aggregates are not supported by Flink's MATCH_RECOGNIZE"},
		{pre + "PATTERN (A B) DEFINE A AS SUM(*) > 1)", unknown,
			"line 1:72: SUM(*) is not allowed; only COUNT takes *"},
		{pre + "PATTERN (A B) DEFINE A AS COUNT(C.*) > 1)", unknown,
			"line 1:78: variable 'C' is not defined in PATTERN (A, B)"},
		{pre + "PATTERN (A B) DEFINE A AS MAX_BY(A.x, B.y) > 1)", unknown,
			"line 1:72: MAX_BY(...) refers to more than one pattern variable (A, B); an aggregate runs over the rows of one variable"},
		{pre + "PATTERN (A B) DEFINE A AS MIN_BY(A.x) > 1)", unknown, "line 1:72: MIN_BY takes"},
		{pre + "MEASURES COUNT(B.*) AS n, MAX_BY(B.x, B.y) AS m, ARBITRARY(A.x) AS a PATTERN (A B) DEFINE A AS COUNT(A.*) > 1)", unknown, ""},
		{pre + "PATTERN (A B) SUBSET A = (B) DEFINE A AS true)", unknown, "line 1:67: SUBSET 'A' has the name of a pattern variable"},
		{pre + "PATTERN (A B) SUBSET U = (B), U = (A) DEFINE A AS true)", unknown, "line 1:76: SUBSET 'U' is defined twice"},
		{pre + "PATTERN (A B) SUBSET U = (B, C) DEFINE A AS true)", unknown, "line 1:75: variable 'C' is not defined in PATTERN (A, B)"},
		{pre + "PATTERN (A B) SUBSET U = (A, B) DEFINE A AS MAX_BY(U.x, A.y) > 1)", unknown,
			"line 1:90: MAX_BY(...) refers to more than one pattern variable (U, A)"},
		{pre + "MEASURES COUNT(U.*) AS n, LAST(U.x) AS l PATTERN (A B) SUBSET U = (A, B) DEFINE B AS U.x > 1)", unknown, ""},
		{pre + "PATTERN (A B) DEFINE A AS COUNT() > 1)", unknown,
			"line 1:72: COUNT needs an argument or *: COUNT(*) or COUNT(A.col)"},
		{pre + "PATTERN (A B) DEFINE A AS AVG(A.price, A.id) > 1)", unknown,
			"line 1:72: AVG takes one argument, found 2"},
		{pre + "MEASURES CLASSIFIER(A.id) AS c PATTERN (A B) DEFINE A AS true)", unknown,
			"line 1:55: CLASSIFIER takes no arguments, found 1"},
		{pre + "PATTERN (A B) DEFINE A AS FINAL LAST(A.price) > 0)", unknown,
			"line 1:72: FINAL cannot be used in DEFINE"},
		{pre + "MEASURES FINAL LAST(A.price) AS p, RUNNING COUNT(*) AS n PATTERN (A B) DEFINE A AS PREV(A.price, 0) > 0 AND PREV(price) > 1)", unknown, ""},
		// PATTERN rules of Flink.
		{pre + "PATTERN (A B A) DEFINE A AS true)", unknown,
			"line 1:59: variable 'A' appears twice in PATTERN (first at line 1:55); Flink requires pattern variables to be unique"},
		{pre + "PATTERN (A (B C)+ D) DEFINE A AS true)", unknown,
			"line 1:57: greedy quantifier '+' on a group is not supported (a group pattern cannot be greedy); make it reluctant ('+?')"},
		{pre + "PATTERN (A (B C){1,3} D) DEFINE A AS true)", unknown, "line 1:57: greedy quantifier '{1,3}' on a group"},
		{pre + "PATTERN (A (B C)?? D) DEFINE A AS true)", unknown, ""},
		{pre + "PATTERN (A (B (C D){2})+? E) DEFINE A AS true)", unknown, "line 1:60: a quantified group inside a quantified group is not supported"},
		{pre + "PATTERN (A (B (C D))+? E) DEFINE A AS true)", unknown, ""},
		{pre + "PATTERN (A (B C{1,2}? D)+? E) DEFINE A AS true)", unknown,
			"line 1:61: quantifier '{1,2}?' on 'C' inside a quantified group is not supported; inside a group a variable is single or optional ('?')"},
		{pre + "PATTERN (A (B C{2})? E) DEFINE A AS true)", unknown, "line 1:61: quantifier '{2}' on 'C' inside a quantified group"},
		{pre + "PATTERN (A (B C+ D)+? E) DEFINE A AS true)", unknown, "line 1:61: quantifier '+' on 'C' inside a quantified group"},
		{pre + "PATTERN (A+ (B C)* D) DEFINE A AS true)", unknown, "line 1:58: greedy quantifier '*' on a group"},
		{pre + "PATTERN (A+ (B C)? D) DEFINE A AS true)", unknown, "line 1:58: optional group ('?') right after the greedy quantifier '+' on 'A'"},
		{pre + "PATTERN (A (B C D?)+? (E F){2} G? (H I)? J) DEFINE A AS true)", unknown, ""},
		{pre + "PATTERN (A (B? C?)+? D) DEFINE A AS true)", unknown,
			"line 1:57: group (B? C?) can match no rows, so it cannot be quantified ('+?'); make one of its variables not optional"},
		{pre + "PATTERN (A (B? C?){2} D) DEFINE A AS true)", unknown, "line 1:57: group (B? C?) can match no rows"},
		// '??' (Flink refuses it) runs as '?': the first match to complete wins
		{pre + "PATTERN (A?? B) DEFINE A AS true)", unknown, ""},
		{pre + "PATTERN (A{0,1}? B C{,1}?) DEFINE A AS true)", unknown, ""},
		{pre + "PATTERN (A* B?) DEFINE A AS true)", unknown,
			"line 1:55: PATTERN (A* B?) can match no rows at all; Flink requires at least one variable that is not optional"},
		{pre + "PATTERN (A B+) DEFINE A AS true)", unknown,
			"line 1:58: greedy quantifier '+' on 'B', the last variable of PATTERN, is not supported by Flink (greedy quantifiers are not allowed as the last element of a pattern); make it reluctant ('+?') or end the pattern with a single variable"},
		{pre + "PATTERN (A B{2,5}) DEFINE A AS true)", unknown,
			"line 1:58: greedy quantifier '{2,5}' on 'B'"},
		{pre + "PATTERN (A B+? C? D{3}) DEFINE A AS true)", unknown, ""},
		{pre + "PATTERN (A+ B{0,2}? C) DEFINE A AS true)", unknown,
			"line 1:59: optional 'B' ('{0,2}?') right after the greedy quantifier '+' on 'A' is not supported by Flink (an optional pattern cannot follow a greedy one); make 'A' reluctant ('+?') or 'B' not optional"},
		{pre + "PATTERN (A{1,3} B? C) DEFINE A AS true)", unknown, "line 1:63: optional 'B' ('?') right after the greedy quantifier '{1,3}'"},
		{pre + "PATTERN (A+? B* C) DEFINE A AS true)", unknown, ""},
		{pre + "PATTERN (A{2} B? C) DEFINE A AS true)", unknown, ""},
		// alternation and PERMUTE
		{pre + "PATTERN (A | B C | D) DEFINE A AS true)", unknown, ""},
		{pre + "PATTERN (A+ (B | C) D) DEFINE A AS true)", unknown, ""},
		{pre + "PATTERN (A+ (B C | D?)) DEFINE A AS true)", unknown,
			"line 1:65: alternative (D?), which starts with an optional term, right after the greedy quantifier '+' on 'A' is not supported (an optional pattern cannot follow a greedy one); make 'A' reluctant ('+?') or the alternative's start not optional"},
		{pre + "PATTERN (A+ (B? C | D) E) DEFINE A AS true)", unknown, "line 1:59: alternative (B? C), which starts with an optional term"},
		{pre + "PATTERN ((A | B)+? C) DEFINE A AS true)", unknown, ""},
		{pre + "PATTERN (PERMUTE(A, B?, C) D) DEFINE A AS true)", unknown, ""},
		{pre + "PATTERN ((A B | A C) D) DEFINE A AS true)", unknown, ""},
		{pre + "PATTERN (A (B | A)) DEFINE A AS true)", unknown,
			"line 1:62: variable 'A' appears twice in PATTERN (first at line 1:55); Flink requires pattern variables to be unique"},
		{pre + "PATTERN ((A+ | B) C) DEFINE A AS true)", unknown,
			"line 1:57: greedy quantifier '+' on 'A', the last variable of an alternative, is not supported; make it reluctant ('+?') or end the alternative with a single variable"},
		{pre + "PATTERN (A (B? | C*?) D) DEFINE A AS true)", unknown,
			"line 1:63: alternatives (B?) and (C*?) can both match no rows; make at most one of them optional"},
		{pre + "PATTERN (A? | B?) DEFINE A AS true)", unknown, "line 1:55: PATTERN (A? | B?) can match no rows at all"},
		{pre + "PATTERN ((A | B?)+? C) DEFINE A AS true)", unknown, "line 1:55: group (A | B?) can match no rows"},
		{pre + "PATTERN ((A B+ | C)+? D) DEFINE A AS true)", unknown, "line 1:59: quantifier '+' on 'B' inside a quantified group is not supported"},
		// WITHIN and ORDER BY.
		{pre + "PATTERN (A B) WITHIN INTERVAL '1' MONTH DEFINE A AS true)", unknown,
			"line 1:67: WITHIN needs a day-time interval (DAY, HOUR, MINUTE, SECOND, MILLISECOND); Flink supports only constant intervals with millisecond resolution as time constraints"},
		{pre + "PATTERN (A B) WITHIN INTERVAL -'1' SECOND DEFINE A AS true)", unknown,
			"line 1:67: the WITHIN interval must be positive, found INTERVAL -'1' SECOND"},
		{"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts DESC PATTERN (A B) DEFINE A AS true)", unknown,
			"line 1:43: the first ORDER BY column must be the time attribute in ascending order; Flink requires the primary sort order of a stream to be ascending on time"},
		// Outer select list.
		{"SELECT T.x, U.y FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS x, A.id AS y PATTERN (A B) DEFINE A AS true) AS T", unknown,
			"line 1:13: unknown qualifier 'U': the MATCH_RECOGNIZE is aliased as 'T'"},
		{"SELECT T.x FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS x PATTERN (A B) DEFINE A AS true)", unknown,
			"line 1:8: unknown qualifier 'T': the MATCH_RECOGNIZE has no alias; write ') AS T' after it or drop the qualifier"},
		{"SELECT T.aidd FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS aid PATTERN (A B) DEFINE A AS true) T", unknown,
			"line 1:10: no field 'aidd' in the MATCH_RECOGNIZE output (PARTITION BY columns and measures). Did you mean 'aid'?"},
		{"SELECT x, x FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.id AS x PATTERN (A B) DEFINE A AS true)", unknown,
			"line 1:11: column 'x' is selected twice (first at line 1:8); rename one with AS"},
		{"SELECT symbol, x AS y FROM t MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts MEASURES A.id AS x PATTERN (A B) DEFINE A AS true)", known, ""},
	}
	for _, c := range cases {
		q, err := Parse(c.src)
		if err != nil {
			t.Errorf("%s\n  Parse: %v", c.src, err)
			continue
		}
		err = q.Check(c.cols)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s\n  unexpected %v", c.src, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s\n  no error, want %s", c.src, c.want)
			continue
		}
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("%T is not *Error", err)
		}
		if got := err.Error(); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s\n got  %s\n want %s", c.src, got, c.want)
		}
	}
}

func TestProblemsAreSortedAndComplete(t *testing.T) {
	q, err := Parse("SELECT * FROM t MATCH_RECOGNIZE (\n ORDER BY ts\n MEASURES Z.x AS a, Y.x AS a\n PATTERN (A B A)\n DEFINE Q AS true)")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range q.Problems(nil) {
		got = append(got, e.Error())
	}
	want := []string{
		"line 3:11: variable 'Z' is not defined in PATTERN (A, B)",
		"line 3:21: variable 'Y' is not defined in PATTERN (A, B)",
		"line 3:28: measure name 'a' is used twice (first at line 3:18)",
		"line 4:15: variable 'A' appears twice in PATTERN (first at line 4:11); Flink requires pattern variables to be unique",
		"line 5:9: DEFINE for variable 'Q', which is not in PATTERN (A, B)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestNestedFieldResolution(t *testing.T) {
	q, err := Parse("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A B) DEFINE A AS payload.amount > 1 AND A.payload.amount > 2)")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Check(testColumns); err != nil {
		t.Fatal(err)
	}
	b := q.Defines[0].Expr.(*Binary)
	l := b.L.(*Binary).L.(*ColumnRef)
	r := b.R.(*Binary).L.(*ColumnRef)
	if l.Var != "" || l.Name != "payload" || strings.Join(l.Fields, ".") != "amount" {
		t.Errorf("payload.amount: %+v", l)
	}
	if r.Var != "A" || r.Name != "payload" || strings.Join(r.Fields, ".") != "amount" {
		t.Errorf("A.payload.amount: %+v", r)
	}
}

func TestSuggest(t *testing.T) {
	cands := []string{"amount", "price", "id", "Name", "record_time"}
	cases := map[string]string{
		"amout":      "amount",
		"amuont":     "amount", // transposition
		"name":       "Name",   // case
		"prices":     "price",
		"ix":         "id",
		"xy":         "",
		"zzzzz":      "",
		"record_tim": "record_time",
	}
	for in, want := range cases {
		if got := suggest(in, cands); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
	if d := distance("ab", "ba"); d != 1 {
		t.Errorf("distance(ab, ba) = %d", d)
	}
}

// A term PERMUTE repeats in several alternatives is reported once.
func TestPermuteProblemsOnce(t *testing.T) {
	q, err := Parse("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (PERMUTE(A, B+, C) D) DEFINE A AS true)")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range q.Problems(nil) {
		got = append(got, e.Error())
	}
	want := []string{"line 1:67: greedy quantifier '+' on 'B', the last variable of an alternative, is not supported; make it reluctant ('+?') or end the alternative with a single variable"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
