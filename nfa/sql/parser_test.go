package sql

import (
	"errors"
	"strings"
	"testing"
)

// goAround is the query of the go-around example in the Match Recognize
// node manual (shared/references/003), verbatim, including its projecting
// subquery.
const goAround = `SELECT *
FROM (
  SELECT
    input.icao24 AS icao24,
    input.on_ground AS on_ground,
    input.vertical_rate AS vertical_rate,
    input.baro_altitude AS baro_altitude,
    record_time
  FROM record
)
MATCH_RECOGNIZE (
    PARTITION BY icao24
    ORDER BY record_time
    MEASURES
        A.icao24 AS aircraft,
        FIRST(A.record_time) AS descent_start,
        LAST(B.baro_altitude) AS lowest_altitude,
        D.baro_altitude AS altitude_after_climb
    ONE ROW PER MATCH
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (A B+ C{2,}? D) WITHIN INTERVAL '3' MINUTE
    DEFINE
        A AS A.on_ground = FALSE
          AND A.vertical_rate < -1.0
          AND A.baro_altitude < 1500,
        B AS B.on_ground = FALSE
          AND B.vertical_rate < -1.0
          AND (LAST(B.baro_altitude, 1) IS NULL OR B.baro_altitude < LAST(B.baro_altitude, 1)),
        C AS C.on_ground = FALSE
          AND C.vertical_rate > 2.0,
        D AS D.on_ground = FALSE
          AND D.baro_altitude > LAST(C.baro_altitude)
) AS match_result`

func mustParse(t *testing.T, src string) *Query {
	t.Helper()
	q, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, src)
	}
	return q
}

func TestGoAroundReference(t *testing.T) {
	q := mustParse(t, goAround)
	if err := q.Check([]string{"input", "record_time"}); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if err := q.Check(nil); err != nil {
		t.Fatalf("Check(nil): %v", err)
	}
	if !q.SelectStar || q.Source != "record" || q.Alias != "match_result" {
		t.Errorf("select/source/alias: %v %q %q", q.SelectStar, q.Source, q.Alias)
	}
	pr := q.Projection
	if pr == nil || len(pr.Items) != 5 || pr.Table != "record" {
		t.Fatalf("projection: %+v", pr)
	}
	var names []string
	for i, it := range pr.Items {
		names = append(names, it.OutputName(i))
	}
	if got := strings.Join(names, ","); got != "icao24,on_ground,vertical_rate,baro_altitude,record_time" {
		t.Errorf("projection outputs: %s", got)
	}
	if c := pr.Items[0].Expr.(*ColumnRef); c.Var != "" || c.Name != "input" || len(c.Fields) != 1 || c.Fields[0] != "icao24" {
		t.Errorf("input.icao24 should be a nested field access: %+v", c)
	}
	if len(q.PartitionBy) != 1 || q.PartitionBy[0].Name != "icao24" {
		t.Errorf("partition: %+v", q.PartitionBy)
	}
	if len(q.OrderBy) != 1 || q.OrderBy[0].Name != "record_time" || q.OrderBy[0].Desc {
		t.Errorf("order: %+v", q.OrderBy)
	}
	var ms []string
	for _, m := range q.Measures {
		ms = append(ms, m.Expr.String()+" AS "+m.Alias)
	}
	if got := strings.Join(ms, "; "); got != "A.icao24 AS aircraft; FIRST(A.record_time) AS descent_start; LAST(B.baro_altitude) AS lowest_altitude; D.baro_altitude AS altitude_after_climb" {
		t.Errorf("measures: %s", got)
	}
	if !q.OneRowPerMatch || !q.Skip.Explicit || q.Skip.Kind != SkipPastLastRow {
		t.Errorf("rows/skip: %v %+v", q.OneRowPerMatch, q.Skip)
	}
	if got := q.Pattern.String(); got != "A B+ C{2,}? D" {
		t.Errorf("pattern: %s", got)
	}
	vars := q.Pattern.Vars()
	want := []Quantifier{{Min: 1, Max: 1}, {Min: 1, Max: -1}, {Min: 2, Max: -1, Reluctant: true}, {Min: 1, Max: 1}}
	for i, v := range vars {
		v.Quant.At = Pos{}
		if v.Quant != want[i] {
			t.Errorf("var %s: quantifier %+v, want %+v", v.Name, v.Quant, want[i])
		}
	}
	if q.Within == nil || q.Within.Millis != 180_000 {
		t.Errorf("within: %+v", q.Within)
	}
	if len(q.Defines) != 4 || q.Define("C") == nil || q.Define("E") != nil {
		t.Fatalf("defines: %+v", q.Defines)
	}
	if got := q.Define("B").Expr.String(); got != "(((B.on_ground = FALSE) AND (B.vertical_rate < -1.0)) AND ((LAST(B.baro_altitude, 1) IS NULL) OR (B.baro_altitude < LAST(B.baro_altitude, 1))))" {
		t.Errorf("define B: %s", got)
	}
	if p := q.Define("D").At; p != (Pos{31, 9}) {
		t.Errorf("define D at %v", p)
	}
	roundTrip(t, q)
}

func TestPrecedence(t *testing.T) {
	cases := []struct{ in, want string }{
		{"a OR b AND c", "(a OR (b AND c))"},
		{"a AND b OR c", "((a AND b) OR c)"},
		{"a OR b OR c", "((a OR b) OR c)"},
		{"NOT a AND b", "((NOT a) AND b)"},
		{"NOT a = b", "(NOT (a = b))"},
		{"NOT NOT a", "(NOT (NOT a))"},
		{"a = b AND c <> d", "((a = b) AND (c <> d))"},
		{"a != b", "(a <> b)"},
		{"a < b = TRUE", "((a < b) = TRUE)"},
		{"a + b * c", "(a + (b * c))"},
		{"a * b + c", "((a * b) + c)"},
		{"a - b - c", "((a - b) - c)"},
		{"a / b % c * d", "(((a / b) % c) * d)"},
		{"a || b || c", "((a || b) || c)"},
		{"a || b + c", "((a || b) + c)"},
		{"-a * b", "((-a) * b)"},
		{"-2 * b", "(-2 * b)"},
		{"- (a + b)", "(-(a + b))"},
		{"1 - -1", "(1 - -1)"},
		{"- - 1", "1"},
		{"+a", "(+a)"},
		{"-9223372036854775808", "-9223372036854775808"},
		{"a + b > c * d", "((a + b) > (c * d))"},
		{"a IS NOT NULL AND b IS NULL", "((a IS NOT NULL) AND (b IS NULL))"},
		{"a + 1 IS NULL", "((a + 1) IS NULL)"},
		{"a IS UNKNOWN", "(a IS NULL)"},
		{"a IS TRUE OR b IS NOT FALSE", "((a IS TRUE) OR (b IS NOT FALSE))"},
		{"a IS DISTINCT FROM b + 1", "(a IS DISTINCT FROM (b + 1))"},
		{"a IS NOT DISTINCT FROM b", "(a IS NOT DISTINCT FROM b)"},
		{"x BETWEEN 1 AND 2 AND y", "((x BETWEEN 1 AND 2) AND y)"},
		{"x NOT BETWEEN a + 1 AND b * 2", "(x NOT BETWEEN (a + 1) AND (b * 2))"},
		{"x BETWEEN SYMMETRIC 2 AND 1", "(x BETWEEN SYMMETRIC 2 AND 1)"},
		{"x IN (1, 2, 3) OR y NOT IN ('a')", "((x IN (1, 2, 3)) OR (y NOT IN ('a')))"},
		{"name LIKE '%a%' AND k NOT LIKE 'x!_' ESCAPE '!'", "((name LIKE '%a%') AND (k NOT LIKE 'x!_' ESCAPE '!'))"},
		{"CASE WHEN a > 1 THEN 'x' WHEN a > 0 THEN 'y' ELSE 'z' END", "CASE WHEN (a > 1) THEN 'x' WHEN (a > 0) THEN 'y' ELSE 'z' END"},
		{"CASE a WHEN 1 THEN 2 END + 1", "(CASE a WHEN 1 THEN 2 END + 1)"},
		{"LAST(B.price, 1) IS NULL OR B.price < LAST(B.price, 1)", "((LAST(B.price, 1) IS NULL) OR (B.price < LAST(B.price, 1)))"},
		{"count(*) + Count(A.x) + sum(distinct A.y)", "((COUNT(*) + COUNT(A.x)) + SUM(DISTINCT A.y))"},
		{"count(A.*) + COUNT(`b c`.*) + max_by(A.x, A.y)", "((COUNT(A.*) + COUNT(`b c`.*)) + MAX_BY(A.x, A.y))"},
		{"CAST(A.x AS DECIMAL(10, 2)) > 1.5", "(CAST(A.x AS DECIMAL(10, 2)) > 1.5)"},
		{"cast(a as timestamp(3) with local time zone)", "CAST(a AS TIMESTAMP(3) WITH LOCAL TIME ZONE)"},
		{"TRY_CAST(a AS DOUBLE PRECISION)", "TRY_CAST(a AS DOUBLE PRECISION)"},
		{"TIMESTAMPADD(SECOND, 5, A.ts) < CURRENT_TIMESTAMP", "(TIMESTAMPADD(SECOND, 5, A.ts) < CURRENT_TIMESTAMP)"},
		{"EXTRACT(hour FROM A.ts) = 3", "(EXTRACT(HOUR FROM A.ts) = 3)"},
		{"A.proctime + INTERVAL '1' second", "(A.proctime + INTERVAL '1' SECOND)"},
		{"proctime >= (CURRENT_TIMESTAMP - INTERVAL '1' day)", "(proctime >= (CURRENT_TIMESTAMP - INTERVAL '1' DAY))"},
		{"FINAL LAST(A.x) + 1", "((FINAL LAST(A.x)) + 1)"},
		{"MATCH_ROWTIME() + MATCH_PROCTIME()", "(MATCH_ROWTIME() + MATCH_PROCTIME())"},
		{"CLASSIFIER() = 'A'", "(CLASSIFIER() = 'A')"},
		{"upper(name) = lower(name) AND abs(x) > char_length(name)", "((UPPER(name) = LOWER(name)) AND (ABS(x) > CHAR_LENGTH(name)))"},
		{"weightedAvg(price, weight) > 1", "(WEIGHTEDAVG(price, weight) > 1)"},
		{"`A\"`.price > 1", "(`A\"`.price > 1)"},
		{`"weird name" = 'it''s'`, "(`weird name` = 'it''s')"},
		{"`select`.`from` = 1", "(`select`.`from` = 1)"},
		{"(((a)))", "a"},
		{"a.b.c > 1", "(a.b.c > 1)"},
		{"TIMESTAMP '2024-06-01 10:00:00' < A.ts AND DATE '2024-06-01' = d", "((TIMESTAMP '2024-06-01 10:00:00' < A.ts) AND (DATE '2024-06-01' = d))"},
		{"1.5e3 + .5 + 2.", "((1.5e3 + .5) + 2.)"},
		{"NULL IS NULL", "(NULL IS NULL)"},
	}
	for _, c := range cases {
		e, err := ParseExpr(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if got := e.String(); got != c.want {
			t.Errorf("%s\n got  %s\n want %s", c.in, got, c.want)
		}
		e2, err := ParseExpr(e.String())
		if err != nil || e2.String() != e.String() {
			t.Errorf("%s: printed form does not re-parse to itself: %v %v", c.in, err, e2)
		}
	}
}

func TestLiterals(t *testing.T) {
	cases := []struct {
		in   string
		kind LitKind
		i    int64
		f    float64
		s    string
	}{
		{"42", LitInt, 42, 42, ""},
		{"-7", LitInt, -7, -7, ""},
		{"-1.0", LitDecimal, 0, -1, ""},
		{"99999999999999999999", LitDecimal, 0, 1e20, ""},
		{"2.5E-1", LitFloat, 0, 0.25, ""},
		{"'it''s'", LitString, 0, 0, "it's"},
		{"''", LitString, 0, 0, ""},
	}
	for _, c := range cases {
		e, err := ParseExpr(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		l, ok := e.(*Literal)
		if !ok || l.Kind != c.kind || l.Int != c.i || l.Float != c.f || l.Str != c.s {
			t.Errorf("%s: got %+v", c.in, e)
		}
	}
}

func TestQuantifiers(t *testing.T) {
	cases := []struct {
		pat       string
		min, max  int
		reluctant bool
		print     string
	}{
		{"A", 1, 1, false, "A"},
		{"A*", 0, -1, false, "A*"},
		{"A+", 1, -1, false, "A+"},
		{"A?", 0, 1, false, "A?"},
		{"A{3}", 3, 3, false, "A{3}"},
		{"A{2,}", 2, -1, false, "A{2,}"},
		{"A{2,5}", 2, 5, false, "A{2,5}"},
		{"A{,5}", 0, 5, false, "A{0,5}"},
		{"A{ 2 , 5 }", 2, 5, false, "A{2,5}"},
		{"A*?", 0, -1, true, "A*?"},
		{"A+?", 1, -1, true, "A+?"},
		{"A??", 0, 1, true, "A??"},
		{"A{3}?", 3, 3, true, "A{3}?"},
		{"A{2,}?", 2, -1, true, "A{2,}?"},
		{"A{2,5}?", 2, 5, true, "A{2,5}?"},
		{"A{,5}?", 0, 5, true, "A{0,5}?"},
		{"(A)+", 1, -1, false, "A+"},
	}
	for _, c := range cases {
		src := "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (" + c.pat + " Z) DEFINE Z AS true)"
		q := mustParse(t, src)
		if len(q.Pattern.Items) != 2 {
			t.Fatalf("%s: items %v", c.pat, q.Pattern)
		}
		v, ok := q.Pattern.Items[0].(*PatternVar)
		if !ok {
			t.Fatalf("%s: %T", c.pat, q.Pattern.Items[0])
		}
		if v.Name != "A" || v.Quant.Min != c.min || v.Quant.Max != c.max || v.Quant.Reluctant != c.reluctant {
			t.Errorf("%s: got %s %+v", c.pat, v.Name, v.Quant)
		}
		if got := v.String(); got != c.print {
			t.Errorf("%s: printed %s, want %s", c.pat, got, c.print)
		}
		if c.pat != "A" && v.Quant.At != (Pos{1, 56}) && !strings.HasPrefix(c.pat, "(") {
			t.Errorf("%s: quantifier at %v", c.pat, v.Quant.At)
		}
	}

	q := mustParse(t, "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN ((A (B)) C (D E)+ (F+)*) DEFINE A AS true)")
	if got := q.Pattern.String(); got != "A B C (D E)+ (F+)*" {
		t.Errorf("groups: %s", got)
	}
	if g, ok := q.Pattern.Items[3].(*PatternGroup); !ok || g.Quant.Min != 1 || g.Quant.Max != -1 || len(g.Inner.Items) != 2 {
		t.Errorf("group: %#v", q.Pattern.Items[3])
	}
	if n := len(q.Pattern.Vars()); n != 6 {
		t.Errorf("Vars: %d", n)
	}
}

func TestIntervals(t *testing.T) {
	cases := []struct {
		in     string
		millis int64
		months int64
		err    string
	}{
		{in: "INTERVAL '3' MINUTE", millis: 180_000},
		{in: "interval '10' second(3)", millis: 10_000},
		{in: "INTERVAL '100' SECOND(3)", millis: 100_000},
		{in: "INTERVAL '1:30' MINUTE TO SECOND", millis: 90_000},
		{in: "INTERVAL '1:2:3' HOUR TO SECOND", millis: 3_723_000},
		{in: "INTERVAL '10 00:00:00.004' DAY TO SECOND", millis: 864_000_004},
		{in: "INTERVAL '10 00' DAY TO HOUR", millis: 864_000_000},
		{in: "INTERVAL '1 2:03' DAY(1) TO MINUTE", millis: 93_780_000},
		{in: "INTERVAL '2' DAYS", millis: 172_800_000},
		{in: "INTERVAL '2' HOURS", millis: 7_200_000},
		{in: "INTERVAL '500' MILLISECOND", millis: 500},
		{in: "INTERVAL '1.5' SECOND", millis: 1500},
		{in: "INTERVAL '1.25' SECOND(2, 3)", millis: 1250},
		{in: "INTERVAL '2-3' YEAR TO MONTH", months: 27},
		{in: "INTERVAL '5' MONTH", months: 5},
		{in: "INTERVAL -'5' SECOND", millis: -5000},
		{in: "INTERVAL '-5' SECOND", millis: -5000},
		{in: "INTERVAL '1.0001' SECOND", err: "line 1:10: interval literal '1.0001' is finer than a millisecond"},
		{in: "INTERVAL '1' HOUR TO DAY", err: "line 1:10: invalid interval qualifier HOUR TO DAY: write YEAR TO MONTH, DAY TO HOUR|MINUTE|SECOND, HOUR TO MINUTE|SECOND or MINUTE TO SECOND"},
		{in: "INTERVAL '1:30' MINUTE", err: "line 1:10: illegal interval literal '1:30' for MINUTE: expected 'm'"},
		{in: "INTERVAL '1' DAY TO SECOND", err: "line 1:10: illegal interval literal '1' for DAY TO SECOND: expected 'd h:m:s[.fff]'"},
		{in: "INTERVAL '100' MINUTE", err: "line 1:10: interval field value 100 exceeds precision of MINUTE(2) field; write MINUTE(3) for a larger value"},
		{in: "INTERVAL '1' MICROSECOND", err: "line 1:10: interval unit MICROSECOND is not supported; the finest interval unit is MILLISECOND"},
		{in: "INTERVAL 5 SECOND", err: "line 1:10: expected a quoted value after INTERVAL (e.g. INTERVAL '10' SECOND), found number 5"},
	}
	for _, c := range cases {
		e, err := ParseExpr(c.in)
		if c.err != "" {
			if err == nil {
				t.Errorf("%s: no error", c.in)
				continue
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.Pos.Line != 1 || !strings.HasPrefix(err.Error(), c.err) {
				t.Errorf("%s:\n got  %v\n want %s", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		iv := e.(*Interval)
		if iv.Millis != c.millis || iv.Months != c.months {
			t.Errorf("%s: millis %d months %d", c.in, iv.Millis, iv.Months)
		}
		if e2, err := ParseExpr(iv.String()); err != nil || e2.(*Interval).Millis != iv.Millis || e2.(*Interval).Months != iv.Months {
			t.Errorf("%s: printed %s does not round-trip: %v", c.in, iv.String(), err)
		}
	}
}

func TestLexical(t *testing.T) {
	src := "select T.`x``y` AS \"a\"\"b\" -- a comment\n" +
		"from input /* a block\ncomment */ Match_Recognize (\n" +
		"  order by ts\n" +
		"  measures `A\"`.id as `x``y`\n" +
		"  after match skip to `A\"`\n" +
		"  pattern (`A\"` l)\n" +
		"  define `A\"` as name = 'it''s' -- trailing\n" +
		") T;\n"
	q := mustParse(t, src)
	if len(q.Select) != 1 || q.Select[0].Qualifier != "T" || q.Select[0].Name != "x`y" || q.Select[0].Alias != `a"b` {
		t.Errorf("select: %+v", q.Select)
	}
	if q.Skip.Kind != SkipToLast || q.Skip.Var != `A"` {
		t.Errorf("skip: %+v", q.Skip)
	}
	if got := q.Define(`A"`).Expr.String(); got != "(name = 'it''s')" {
		t.Errorf("define: %s", got)
	}
	if q.Measures[0].At != (Pos{5, 12}) || q.Define(`A"`).At != (Pos{8, 10}) {
		t.Errorf("positions: %v %v", q.Measures[0].At, q.Define(`A"`).At)
	}
	if err := q.Check(nil); err != nil {
		t.Errorf("Check: %v", err)
	}
	roundTrip(t, q)
}

func TestSkipClauses(t *testing.T) {
	cases := []struct {
		clause string
		kind   SkipKind
		v      string
	}{
		{"", SkipToNextRow, ""},
		{"AFTER MATCH SKIP TO NEXT ROW", SkipToNextRow, ""},
		{"AFTER MATCH SKIP PAST LAST ROW", SkipPastLastRow, ""},
		{"AFTER MATCH SKIP TO FIRST B", SkipToFirst, "B"},
		{"AFTER MATCH SKIP TO LAST B", SkipToLast, "B"},
		{"after match skip to B", SkipToLast, "B"},
	}
	for _, c := range cases {
		q := mustParse(t, "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts "+c.clause+" PATTERN (A B C) DEFINE A AS true)")
		if q.Skip.Kind != c.kind || q.Skip.Var != c.v || q.Skip.Explicit != (c.clause != "") {
			t.Errorf("%q: %+v", c.clause, q.Skip)
		}
		if err := q.Check(nil); err != nil {
			t.Errorf("%q: %v", c.clause, err)
		}
	}
}

// Every syntax error: exact message with line:column.
func TestParseErrors(t *testing.T) {
	const pre = "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts "
	cases := []struct{ src, want string }{
		{pre + "PATTERN (A | ) DEFINE A AS true)",
			`line 1:57: empty alternative after '|': it must hold at least one pattern variable near "| ) DEFINE A AS true)"`},
		{"SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN ((A B) |\n | (C D))\n  DEFINE A AS true)",
			`line 4:2: empty alternative before '|': each alternative must hold at least one pattern variable near "| (C D))"`},
		{"SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  PATTERN (A PERMUTE(B, ))\n  DEFINE A AS true)",
			`line 3:23: empty PERMUTE term after ',': it must hold at least one pattern variable near ", ))"`},
		{pre + "PATTERN (PERMUTE(A, B, C, D, E, F)) DEFINE A AS true)",
			`line 1:55: PERMUTE of 6 terms is not supported (at most 5: n terms make n! alternatives) near "PERMUTE(A, B, C, D, E, F…"`},
		{pre + "PATTERN (PERMUTE(A, B) C) DEFINE A AS true",
			`line 1:88: expected ',' or ')' after the definition of 'A', found end of query`},
		{pre + "PATTERN (^A) DEFINE A AS true)",
			`line 1:55: anchor '^' in PATTERN is not supported by Flink's MATCH_RECOGNIZE`},
		{pre + "PATTERN (A $) DEFINE A AS true)",
			`line 1:57: anchor '$' in PATTERN is not supported by Flink's MATCH_RECOGNIZE`},
		{pre + "PATTERN (A {- B -} C) DEFINE A AS true)",
			`line 1:57: exclusion '{- ... -}' in PATTERN is not supported by Flink's MATCH_RECOGNIZE`},
		{pre + "PATTERN (A+* B) DEFINE A AS true)",
			`line 1:57: a quantifier cannot follow another quantifier; put the quantified term in parentheses`},
		{pre + "PATTERN (A??? B) DEFINE A AS true)",
			`line 1:58: a quantifier cannot follow another quantifier`},
		{pre + "PATTERN (+A) DEFINE A AS true)",
			`line 1:55: quantifier '+' must follow a pattern variable or a group`},
		{pre + "PATTERN (A{3,2} B) DEFINE A AS true)",
			`line 1:56: quantifier {3,2}: the lower bound is greater than the upper bound`},
		{pre + "PATTERN (A{0} B) DEFINE A AS true)",
			`line 1:56: quantifier {0} matches no rows`},
		{pre + "PATTERN (A{} B) DEFINE A AS true)",
			`line 1:56: empty quantifier: write {n}, {n,}, {n,m} or {,m}`},
		{pre + "PATTERN (A{2.5} B) DEFINE A AS true)",
			`line 1:57: quantifier bounds must be integers, found 2.5`},
		{pre + "PATTERN (A{99999999} B) DEFINE A AS true)",
			`line 1:57: quantifier bound 99999999 is too large (at most 1048576)`},
		{pre + "PATTERN (A{2 B) DEFINE A AS true)",
			`line 1:59: expected '}' to close the quantifier {n}, {n,}, {n,m} or {,m}, found 'B'`},
		{pre + "PATTERN () DEFINE A AS true)",
			`line 1:54: empty pattern: '(' must hold at least one pattern variable`},
		{pre + "PATTERN (A ()) DEFINE A AS true)",
			`line 1:57: empty pattern: '(' must hold at least one pattern variable`},
		{pre + "PATTERN (A B DEFINE A AS true)",
			`line 1:59: expected a pattern variable or ')', found keyword DEFINE near "DEFINE A AS true)"`},
		{"SELECT * FROM t MATCH_RECOGNIZE (PATTERN (A B) DEFINE A AS true)",
			`line 1:17: MATCH_RECOGNIZE has no ORDER BY; Flink requires ORDER BY with the time attribute (e.g. ORDER BY rowtime)`},
		{pre + "DEFINE A AS true)",
			`line 1:17: MATCH_RECOGNIZE has no PATTERN clause`},
		{pre + "PATTERN (A))",
			`line 1:17: MATCH_RECOGNIZE has no DEFINE clause; Flink requires DEFINE with at least one variable`},
		{pre + "PARTITION BY k PATTERN (A) DEFINE A AS true)",
			`line 1:46: PARTITION BY must come before ORDER BY; the clause order is PARTITION BY, ORDER BY, MEASURES, ONE ROW PER MATCH, AFTER MATCH SKIP, PATTERN, DEFINE`},
		{pre + "ORDER BY ts PATTERN (A) DEFINE A AS true)",
			`line 1:46: duplicate ORDER BY clause`},
		{pre + "PATTERN (A) DEFINE A AS true MEASURES A.x AS y)",
			`line 1:75: DEFINE must be the last clause of MATCH_RECOGNIZE, found keyword MEASURES after it`},
		{pre + "PATTERN (A) WITHIN INTERVAL '1' SECOND WITHIN INTERVAL '2' SECOND DEFINE A AS true)",
			`line 1:85: WITHIN must directly follow PATTERN (...)`},
		{pre + "MEASURES A.x ax PATTERN (A) DEFINE A AS true)",
			`line 1:59: missing AS before the measure name 'ax'`},
		{pre + "MEASURES A.x AS ax, PATTERN (A) DEFINE A AS true)",
			`line 1:64: unexpected ',' before keyword PATTERN`},
		{pre + "MEASURES A.x AS ax B.y AS b2 PATTERN (A) DEFINE A AS true)",
			`line 1:65: expected ',' or the next clause after measure 'ax', found 'B'`},
		{pre + "MEASURES A.x + 1 PATTERN (A) DEFINE A AS true)",
			`line 1:63: expected AS and a name after the measure expression, found keyword PATTERN`},
		{pre + "ALL ROWS PER MATCH PATTERN (A) DEFINE A AS true)",
			`line 1:46: ALL ROWS PER MATCH is not supported by Flink's MATCH_RECOGNIZE; use ONE ROW PER MATCH`},
		{pre + "ONE ROWS PER MATCH PATTERN (A) DEFINE A AS true)",
			`line 1:50: expected ROW PER MATCH after ONE, found 'ROWS'`},
		{pre + "PATTERN (A) SUBSET U = A DEFINE A AS true)",
			`line 1:69: expected '(' and the variables of SUBSET U, found 'A' near "A DEFINE A AS true)"`},
		{pre + "PATTERN (A) SUBSET U = (A, ) DEFINE A AS true)",
			`line 1:73: expected a pattern variable in SUBSET, found ')'`},
		{pre + "AFTER MATCH SKIP TO PATTERN (A) DEFINE A AS true)",
			`line 1:66: expected NEXT ROW, FIRST var, LAST var or a variable after SKIP TO, found keyword PATTERN`},
		{pre + "AFTER MATCH SKIP PAST ROW PATTERN (A) DEFINE A AS true)",
			`line 1:68: expected LAST ROW after SKIP PAST, found 'ROW'`},
		{pre + "PATTERN (A) WITHIN '10' SECOND DEFINE A AS true)",
			`line 1:65: expected INTERVAL after WITHIN (e.g. WITHIN INTERVAL '10' SECOND), found string '10'`},
		{pre + "PATTERN (A) WITHIN INTERVAL '100' SECOND DEFINE A AS true)",
			`line 1:74: interval field value 100 exceeds precision of SECOND(2) field; write SECOND(3) for a larger value`},
		{pre + "PATTERN (A) WITHIN INTERVAL '1:75' MINUTE TO SECOND DEFINE A AS true)",
			`line 1:74: illegal interval literal '1:75': SECOND field value 75 is out of range 0-59`},
		{pre + "PATTERN (A) WITHIN INTERVAL '10' FORTNIGHT DEFINE A AS true)",
			`line 1:79: expected an interval unit (DAY, HOUR, MINUTE, SECOND, MILLISECOND, YEAR, MONTH) after INTERVAL '10', found 'FORTNIGHT'`},
		{pre + "PATTERN (A) DEFINE A AS A.x > 'abc)",
			`line 1:76: unterminated string literal: missing closing ' near "'abc)"`},
		{pre + "PATTERN (A) DEFINE A AS `abc > 1)",
			"line 1:70: unterminated quoted identifier: missing closing `"},
		{pre + "PATTERN (A) DEFINE A AS `` > 1)",
			"line 1:70: empty quoted identifier"},
		{pre + "PATTERN (A) DEFINE A AS A.x > (1 + 2)",
			`line 1:83: expected ',' or ')' after the definition of 'A', found end of query`},
		{pre + "PATTERN (A) DEFINE A AS A.x > (1 + 2 DEFINE",
			`line 1:83: expected ')' to close the '(' at line 1:76, found keyword DEFINE`},
		{pre + "PATTERN (A) DEFINE A AS A.x > 1 +)",
			`line 1:79: expected an expression, found ')' near ")"`},
		{pre + "PATTERN (A) DEFINE A AS A.x BETWEEN 1 OR 2)",
			`line 1:84: expected AND in BETWEEN ... AND ..., found keyword OR`},
		{pre + "PATTERN (A) DEFINE A AS CASE WHEN A.x > 1 THEN 1)",
			`line 1:94: expected END to close the CASE at line 1:70, found ')'`},
		{pre + "PATTERN (A) DEFINE A AS CASE END)",
			`line 1:75: expected WHEN in CASE, found keyword END`},
		{pre + "PATTERN (A) DEFINE A AS A.x IS 5)",
			`line 1:77: expected NULL, TRUE, FALSE or DISTINCT FROM after IS, found number 5`},
		{pre + "PATTERN (A) DEFINE A AS A.x > 1, PATTERN (B))",
			`line 1:77: unexpected ',' before keyword PATTERN`},
		{pre + "PATTERN (A) DEFINE A A.x > 1)",
			`line 1:67: expected AS after the variable 'A' in DEFINE, found 'A'`},
		{pre + "PATTERN (A) DEFINE A AS SUM(A.x, ) > 1)",
			`line 1:79: expected an expression, found ')'`},
		{pre + "PATTERN (A) DEFINE A AS SUM(A.x > 1",
			`line 1:81: expected ',' or ')' in the arguments of SUM (opened at line 1:73), found end of query`},
		{pre + "PATTERN (A) DEFINE A AS CAST(A.x AS ) > 1)",
			`line 1:82: expected a type name, found ')'`},
		{pre + "PATTERN (A) DEFINE A AS A.x IN (SELECT 1))",
			`line 1:78: subqueries are not supported in IN`},
		{pre + "PATTERN (A) DEFINE A AS A.* > 1)",
			`line 1:72: 'A.*' is only allowed in COUNT(A.*) and SELECT`},
		{pre + "PATTERN (A) DEFINE A AS A.x # 1)",
			`line 1:74: unexpected character '#'`},
		{pre + "PATTERN (A) DEFINE A AS A.x > 1) /* unterminated",
			`line 1:79: unterminated comment: '/*' without '*/'`},
		{pre + "PATTERN (A) DEFINE A AS A.x > 1) T GROUP BY x",
			`line 1:81: GROUP BY after MATCH_RECOGNIZE is not supported; only SELECT ... FROM ... MATCH_RECOGNIZE (...) [AS alias]`},
		{pre + "PATTERN (A) DEFINE A AS A.x > 1); SELECT 1",
			`line 1:80: unexpected keyword SELECT after the end of the query`},
		{pre + "PATTERN (A) DEFINE A AS A.x > 1) AS",
			`line 1:81: expected an alias after AS, found end of query`},
		{"SELECT SUM(x) FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS A.x > 1)",
			`line 1:8: SELECT list: only columns of the MATCH_RECOGNIZE output (PARTITION BY columns and measures) can be selected; compute expressions in MEASURES`},
		{"SELECT a, FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS A.x > 1)",
			`line 1:9: unexpected ',' before keyword FROM`},
		{"SELECT DISTINCT a FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS A.x > 1)",
			`line 1:8: SELECT DISTINCT is not supported on MATCH_RECOGNIZE`},
		{"SELECT * FROM t WHERE x > 1",
			`line 1:17: expected MATCH_RECOGNIZE after the FROM source, found keyword WHERE (only MATCH_RECOGNIZE queries are supported)`},
		{"SELECT * FROM (SELECT a FROM (SELECT 1)) MATCH_RECOGNIZE (ORDER BY ts PATTERN (A) DEFINE A AS true)",
			`line 1:30: nested subqueries are not supported; FROM (SELECT ... FROM table) is the deepest form`},
		{"DELETE FROM t",
			`line 1:1: expected SELECT at the start of the query, found 'DELETE'`},
		{"",
			`line 1:1: expected SELECT at the start of the query, found end of query`},
		{"SELECT * FROM t MATCH_RECOGNIZE (\n  ORDER BY ts\n  MEASURES\n    LAST(A.price) AS p,\n    A.x +* 2 AS q\n  PATTERN (A)\n  DEFINE A AS true)",
			`line 5:10: expected an expression, found '*' near "* 2 AS q"`},
	}
	for _, c := range cases {
		_, err := Parse(c.src)
		if err == nil {
			t.Errorf("%s\n  no error, want %s", c.src, c.want)
			continue
		}
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("%s: error %T is not *Error", c.src, err)
		}
		if got := err.Error(); !strings.HasPrefix(got, c.want) || strings.Contains(got, "\n") {
			t.Errorf("%s\n got  %s\n want %s", c.src, got, c.want)
		}
	}
}

func TestDepthLimit(t *testing.T) {
	deep := []string{
		strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300),
		strings.Repeat("NOT ", 300) + "a",
		strings.Repeat("- ", 300) + "a",
		"a" + strings.Repeat(" + a", 300),
		"a" + strings.Repeat(" AND a", 300),
		strings.Repeat("f(", 300) + "1" + strings.Repeat(")", 300),
		strings.Repeat("CASE WHEN ", 300) + "a" + strings.Repeat(" THEN 1 END", 300),
	}
	for _, d := range deep {
		_, err := ParseExpr(d)
		if err == nil || !strings.Contains(err.Error(), "expression nested too deeply") {
			t.Errorf("%.30s...: %v", d, err)
		}
	}
	pat := "SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts PATTERN (" + strings.Repeat("(", 300) + "A" + strings.Repeat(")", 300) + ") DEFINE A AS true)"
	if _, err := Parse(pat); err == nil || !strings.Contains(err.Error(), "nested too deeply") {
		t.Errorf("deep pattern: %v", err)
	}
	// Within the limit.
	ok := "a" + strings.Repeat(" + a", 150)
	if _, err := ParseExpr(ok); err != nil {
		t.Errorf("150 terms: %v", err)
	}
}

// Words that SQL:2016 or Trino leave non-reserved name measures, aliases,
// select items and qualified columns; elsewhere they still start clauses.
func TestNonReservedNames(t *testing.T) {
	q := mustParse(t, "SELECT partition, `define` AS after, pattern FROM t MATCH_RECOGNIZE (ORDER BY ts "+
		"MEASURES A.partition AS partition, A.x AS define, COUNT(*) AS pattern ONE ROW PER MATCH PATTERN (A) DEFINE A AS A.x > 0)")
	if err := q.Check(nil); err != nil {
		t.Fatal(err)
	}
	var ms, sel []string
	for _, m := range q.Measures {
		ms = append(ms, m.Expr.String()+" AS "+m.Alias)
	}
	for _, it := range q.Select {
		sel = append(sel, it.OutputName())
	}
	if got := strings.Join(ms, "; "); got != "A.`partition` AS partition; A.x AS define; COUNT(*) AS pattern" {
		t.Errorf("measures: %s", got)
	}
	if got := strings.Join(sel, ","); got != "partition,after,pattern" {
		t.Errorf("select: %s", got)
	}
	roundTrip(t, q)
	// a clause keyword where a name cannot be is still the clause
	_, err := Parse("SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.x AS x, PATTERN (A) DEFINE A AS A.x > 0)")
	if err == nil || !strings.Contains(err.Error(), "unexpected ',' before keyword PATTERN") {
		t.Errorf("got %v", err)
	}
}
