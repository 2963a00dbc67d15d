package sqleval

import (
	"fmt"
	"testing"

	"github.com/cepcluster/cep/nfa/sql"
)

// Every kind of expression, with NULLs, type errors and each branch of
// three-valued logic, evaluated over one match: rows A, A, B (the
// current row). The results are the evaluator's as it was before it
// was split into a function per kind.
func TestEvalEachKind(t *testing.T) {
	rows := []Row{
		{Var: "A", Time: 10, Data: map[string]any{"id": int64(1), "price": 10.5, "t": "x", "n": nil, "ok": true, "s": " Ab ", "nest": map[string]any{"f": int64(7)}}},
		{Var: "A", Time: 20, Data: map[string]any{"id": int64(2), "price": int64(12), "t": "y", "ok": false, "s": "a_%c"}},
		{Var: "B", Time: 30, Data: map[string]any{"id": int64(3), "price": 9.0, "t": "z", "ok": nil, "s": "2024"}},
	}
	cases := []struct{ expr, want string }{
		{"NULL", "<nil> <nil>"},
		{"TRUE", "bool true"},
		{"42", "int64 42"},
		{"1.5", "float64 1.5"},
		{"1e3", "float64 1000"},
		{"'s'", "string s"},
		{"INTERVAL '2' SECOND", "int64 2000"},
		{"INTERVAL '1' YEAR", "error: line 1:1: year-month intervals are not supported"},
		{"price", "float64 9"},
		{"A.price", "int64 12"},
		{"nest.f", "<nil> <nil>"},
		{"A.nest", "<nil> <nil>"},
		{"missing", "<nil> <nil>"},
		{"-price", "float64 -9"},
		{"-A.id", "int64 -2"},
		{"-t", "error: type mismatch"},
		{"+t", "string z"},
		{"NOT ok", "<nil> <nil>"},
		{"NOT A.ok", "bool true"},
		{"NOT t", "error: type mismatch"},
		{"FINAL A.id", "int64 2"},
		{"A.ok AND ok", "bool false"},
		{"ok AND A.ok", "bool false"},
		{"ok AND TRUE", "<nil> <nil>"},
		{"TRUE AND TRUE", "bool true"},
		{"ok OR TRUE", "bool true"},
		{"ok OR FALSE", "<nil> <nil>"},
		{"FALSE OR FALSE", "bool false"},
		{"TRUE OR t", "bool true"},
		{"t AND TRUE", "error: type mismatch"},
		{"TRUE AND t", "error: type mismatch"},
		{"n IS DISTINCT FROM NULL", "bool false"},
		{"id IS NOT DISTINCT FROM 3", "bool true"},
		{"id IS DISTINCT FROM 't'", "bool true"},
		{"id = 3", "bool true"},
		{"id <> 3", "bool false"},
		{"id < 3.5", "bool true"},
		{"id <= 2", "bool false"},
		{"price > A.price", "bool false"},
		{"t >= 'z'", "bool true"},
		{"ok = TRUE", "<nil> <nil>"},
		{"id = 't'", "error: line 1:4: cannot compare INTEGER with STRING"},
		{"t || id || price || A.ok", "string z39FALSE"},
		{"id + 1", "int64 4"},
		{"id - 0.5", "float64 2.5"},
		{"id * 2", "int64 6"},
		{"id / 2", "int64 1"},
		{"id % 2", "int64 1"},
		{"price / 2", "float64 4.5"},
		{"price % 2", "float64 1"},
		{"id / 0", "error: division by zero"},
		{"price / 0", "error: division by zero"},
		{"price % 0", "error: division by zero"},
		{"t + 1", "error: type mismatch"},
		{"n + 1", "<nil> <nil>"},
		{"n IS NULL", "bool true"},
		{"id IS NOT NULL", "bool true"},
		{"A.ok IS FALSE", "bool true"},
		{"ok IS NOT TRUE", "bool true"},
		{"ok IS UNKNOWN", "bool true"},
		{"id BETWEEN 1 AND 3", "bool true"},
		{"id NOT BETWEEN 1 AND 3", "bool false"},
		{"id BETWEEN 4 AND 1", "bool false"},
		{"id BETWEEN SYMMETRIC 4 AND 1", "bool true"},
		{"id BETWEEN n AND 4", "<nil> <nil>"},
		{"id BETWEEN 't' AND 4", "error: type mismatch"},
		{"id IN (1, 2, 3)", "bool true"},
		{"id NOT IN (1, 2)", "bool true"},
		{"id IN (1, NULL)", "<nil> <nil>"},
		{"n IN (1)", "<nil> <nil>"},
		{"id IN ('x', 3)", "bool true"},
		{"t LIKE 'z'", "bool true"},
		{"A.s LIKE 'a!_!%_' ESCAPE '!'", "bool true"},
		{"A.s LIKE 'a%'", "bool true"},
		{"A.s NOT LIKE '_'", "bool true"},
		{"n LIKE 'a'", "<nil> <nil>"},
		{"id LIKE '3'", "error: type mismatch"},
		{"CASE WHEN id > 5 THEN 'big' WHEN id > 2 THEN 'mid' ELSE 'small' END", "string mid"},
		{"CASE WHEN id > 5 THEN 'big' END", "<nil> <nil>"},
		{"CASE id WHEN 1 THEN 'one' WHEN 3 THEN 'three' END", "string three"},
		{"CASE n WHEN NULL THEN 'null' ELSE 'else' END", "string else"},
		{"CAST(s AS INT)", "int64 2024"},
		{"CAST(price AS BIGINT)", "int64 9"},
		{"CAST(A.ok AS INTEGER)", "int64 0"},
		{"CAST(id AS DOUBLE)", "float64 3"},
		{"CAST('1.5' AS DECIMAL)", "float64 1.5"},
		{"CAST(id AS VARCHAR)", "string 3"},
		{"CAST('TRUE' AS BOOLEAN)", "bool true"},
		{"CAST(1000 AS TIMESTAMP(3))", "int64 1000"},
		{"CAST(t AS INT)", "error: cannot cast \"z\" to INT"},
		{"TRY_CAST(t AS INT)", "<nil> <nil>"},
		{"CAST(t AS DATE)", "error: cast to DATE is not supported"},
		{"CAST(n AS INT)", "<nil> <nil>"},
		{"CURRENT_TIMESTAMP", "int64 99"},
		{"MATCH_ROWTIME()", "int64 30"},
		{"CLASSIFIER()", "string B"},
		{"FIRST(CLASSIFIER())", "string A"},
		{"LAST(CLASSIFIER())", "string B"},
		{"LAST(CLASSIFIER(), 1)", "string A"},
		{"PREV(CLASSIFIER())", "string A"},
		{"FIRST(CLASSIFIER(), 3)", "<nil> <nil>"},
		{"ABS(-A.id)", "int64 2"},
		{"ABS(-price)", "float64 9"},
		{"ABS(t)", "error: type mismatch"},
		{"UPPER(t)", "string Z"},
		{"LOWER('AB')", "string ab"},
		{"TRIM(FIRST(A.s))", "string Ab"},
		{"CHAR_LENGTH(FIRST(A.s))", "int64 4"},
		{"UPPER(id)", "error: type mismatch"},
		{"COALESCE(n, NULL, id)", "int64 3"},
		{"MOD(7, 3)", "int64 1"},
		{"POWER(2, 10)", "float64 1024"},
		{"POWER(n, 2)", "<nil> <nil>"},
		{"FOO(1)", "error: line 1:1: function FOO is not supported"},
		{"FIRST(A.id)", "int64 1"},
		{"LAST(A.id)", "int64 2"},
		{"LAST(A.id, 1)", "int64 1"},
		{"FIRST(A.id, 5)", "<nil> <nil>"},
		{"PREV(id)", "int64 2"},
		{"PREV(id, 2)", "int64 1"},
		{"PREV(id, 3)", "<nil> <nil>"},
		{"NEXT(id)", "error: line 1:1: NEXT is not supported"},
		{"COUNT(*)", "int64 3"},
		{"COUNT(A.id)", "int64 2"},
		{"COUNT(A.n)", "int64 0"},
		{"SUM(A.price)", "float64 22.5"},
		{"SUM(A.id)", "int64 3"},
		{"AVG(A.id)", "int64 1"},
		{"AVG(price)", "float64 10.5"},
		{"AVG(A.n)", "<nil> <nil>"},
		{"SUM(A.t)", "error: line 1:1: SUM of a non-number"},
		{"MIN(price)", "float64 9"},
		{"MAX(t)", "string z"},
		{"MAX(A.ok)", "bool true"},
		{"MIN(CASE WHEN id > 1 THEN id ELSE t END)", "error: type mismatch"},
		{"COUNT(DISTINCT A.t)", "int64 2"},
		{"STDDEV_POP(id)", "error: line 1:1: aggregate STDDEV_POP is not supported"},
	}
	for _, c := range cases {
		e, err := sql.ParseExpr(c.expr)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		env := &Env{Rows: rows, Cur: len(rows) - 1, Now: 99}
		v, err := env.Eval(e)
		got := fmt.Sprintf("%T %v", v, v)
		if err != nil {
			got = "error: " + err.Error()
		}
		if got != c.want {
			t.Errorf("%s = %s, want %s", c.expr, got, c.want)
		}
	}
}
