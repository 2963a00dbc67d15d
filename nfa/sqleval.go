package nfa

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cepcluster/cep/nfa/expr"
	"github.com/cepcluster/cep/nfa/sql"
)

// This file evaluates MATCH_RECOGNIZE expressions (DEFINE and MEASURES)
// over the rows of a match, with SQL semantics: NULL and three-valued logic,
// integer and floating-point arithmetic, and Flink's running (DEFINE) and
// final (MEASURES) semantics for pattern variables, navigation (FIRST, LAST,
// PREV) and aggregates.

// sqlRow is one row of a match with the variable it is mapped to.
type sqlRow struct {
	v    string
	ts   int64
	data expr.Event
}

// sqlEnv is what an expression sees.
type sqlEnv struct {
	rows    []sqlRow
	cur     int     // the current row (DEFINE) or the last row (MEASURES)
	bound   *sqlRow // inside navigation/aggregates: every reference reads this row
	now     int64   // CURRENT_TIMESTAMP / MATCH_PROCTIME
	procCol string  // the processing-time column (ORDER BY proctime), "" for none
}

var errSQLType = errors.New("type mismatch")

func (env *sqlEnv) column(r *sqlRow, c *sql.ColumnRef) any {
	if r == nil {
		return nil
	}
	v, ok := r.data[c.Name]
	if !ok {
		if env.procCol != "" && strings.EqualFold(c.Name, env.procCol) {
			return r.ts
		}
		return nil
	}
	for _, f := range c.Fields {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[f]
	}
	return v
}

// rowFor resolves a (non-bound) reference to variable v: the last row mapped
// to it so far, or the current row for an unqualified reference.
func (env *sqlEnv) rowFor(v string) *sqlRow {
	if v == "" {
		if env.cur >= 0 && env.cur < len(env.rows) {
			return &env.rows[env.cur]
		}
		return nil
	}
	for i := len(env.rows) - 1; i >= 0; i-- {
		if env.rows[i].v == v {
			return &env.rows[i]
		}
	}
	return nil
}

// rowsOf returns the rows mapped to v (all rows for "").
func (env *sqlEnv) rowsOf(v string) []*sqlRow {
	var out []*sqlRow
	for i := range env.rows {
		if v == "" || env.rows[i].v == v {
			out = append(out, &env.rows[i])
		}
	}
	return out
}

// refVar returns the pattern variable an expression refers to ("" for
// unqualified columns only); the checker guarantees there is at most one.
func refVar(e sql.Expr) string {
	v := ""
	sql.Walk(e, func(x sql.Expr) bool {
		if c, ok := x.(*sql.ColumnRef); ok && c.Var != "" {
			v = c.Var
		}
		return true
	})
	return v
}

func (env *sqlEnv) eval(e sql.Expr) (any, error) {
	switch e := e.(type) {
	case *sql.Literal:
		switch e.Kind {
		case sql.LitNull:
			return nil, nil
		case sql.LitBool:
			return e.Bool, nil
		case sql.LitInt:
			return e.Int, nil
		case sql.LitDecimal, sql.LitFloat:
			return e.Float, nil
		default:
			return e.Str, nil
		}
	case *sql.Interval:
		if e.Months != 0 {
			return nil, fmt.Errorf("line %s: year-month intervals are not supported", e.At)
		}
		return e.Millis, nil
	case *sql.ColumnRef:
		if env.bound != nil {
			return env.column(env.bound, e), nil
		}
		return env.column(env.rowFor(e.Var), e), nil
	case *sql.Unary:
		x, err := env.eval(e.X)
		if err != nil || x == nil {
			return nil, err
		}
		switch e.Op {
		case "NOT":
			b, ok := x.(bool)
			if !ok {
				return nil, errSQLType
			}
			return !b, nil
		case "-":
			switch n := x.(type) {
			case int64:
				return -n, nil
			case float64:
				return -n, nil
			}
			return nil, errSQLType
		default: // +, FINAL, RUNNING
			return x, nil
		}
	case *sql.Binary:
		return env.binary(e)
	case *sql.IsNull:
		x, err := env.eval(e.X)
		if err != nil {
			return nil, err
		}
		return (x == nil) != e.Not, nil
	case *sql.IsBool:
		x, err := env.eval(e.X)
		if err != nil {
			return nil, err
		}
		b, ok := x.(bool)
		res := ok && b == e.Value
		return res != e.Not, nil
	case *sql.Between:
		x, err := env.eval(e.X)
		if err != nil {
			return nil, err
		}
		lo, err := env.eval(e.Lo)
		if err != nil {
			return nil, err
		}
		hi, err := env.eval(e.Hi)
		if err != nil {
			return nil, err
		}
		if x == nil || lo == nil || hi == nil {
			return nil, nil
		}
		if e.Symmetric {
			if c, ok := sqlCompare(lo, hi); ok && c > 0 {
				lo, hi = hi, lo
			}
		}
		c1, ok1 := sqlCompare(x, lo)
		c2, ok2 := sqlCompare(x, hi)
		if !ok1 || !ok2 {
			return nil, errSQLType
		}
		return (c1 >= 0 && c2 <= 0) != e.Not, nil
	case *sql.In:
		x, err := env.eval(e.X)
		if err != nil || x == nil {
			return nil, err
		}
		sawNull := false
		for _, it := range e.List {
			y, err := env.eval(it)
			if err != nil {
				return nil, err
			}
			if y == nil {
				sawNull = true
				continue
			}
			if c, ok := sqlCompare(x, y); ok && c == 0 {
				return !e.Not, nil
			}
		}
		if sawNull {
			return nil, nil
		}
		return e.Not, nil
	case *sql.Like:
		x, err := env.eval(e.X)
		if err != nil {
			return nil, err
		}
		p, err := env.eval(e.Pattern)
		if err != nil {
			return nil, err
		}
		if x == nil || p == nil {
			return nil, nil
		}
		esc := rune(-1)
		if e.Escape != nil {
			ev, err := env.eval(e.Escape)
			if err != nil {
				return nil, err
			}
			if s, ok := ev.(string); ok && utf8.RuneCountInString(s) == 1 {
				esc, _ = utf8.DecodeRuneInString(s)
			}
		}
		xs, ok1 := x.(string)
		ps, ok2 := p.(string)
		if !ok1 || !ok2 {
			return nil, errSQLType
		}
		return sqlLike(xs, ps, esc) != e.Not, nil
	case *sql.Case:
		var op any
		if e.Operand != nil {
			var err error
			if op, err = env.eval(e.Operand); err != nil {
				return nil, err
			}
		}
		for _, w := range e.Whens {
			c, err := env.eval(w.Cond)
			if err != nil {
				return nil, err
			}
			hit := false
			if e.Operand != nil {
				if op != nil && c != nil {
					cmp, ok := sqlCompare(op, c)
					hit = ok && cmp == 0
				}
			} else {
				b, ok := c.(bool)
				hit = ok && b
			}
			if hit {
				return env.eval(w.Then)
			}
		}
		if e.Else != nil {
			return env.eval(e.Else)
		}
		return nil, nil
	case *sql.Cast:
		x, err := env.eval(e.X)
		if err != nil {
			return nil, err
		}
		v, err := sqlCast(x, e.Type.Name)
		if err != nil && e.Try {
			return nil, nil
		}
		return v, err
	case *sql.Call:
		return env.call(e)
	}
	return nil, fmt.Errorf("line %s: unsupported expression %s", e.Pos(), e)
}

func (env *sqlEnv) binary(e *sql.Binary) (any, error) {
	switch e.Op {
	case "AND", "OR":
		l, err := env.eval(e.L)
		if err != nil {
			return nil, err
		}
		lb, lok := l.(bool)
		if l != nil && !lok {
			return nil, errSQLType
		}
		// short-circuit where the result is already known
		if lok && e.Op == "AND" && !lb {
			return false, nil
		}
		if lok && e.Op == "OR" && lb {
			return true, nil
		}
		r, err := env.eval(e.R)
		if err != nil {
			return nil, err
		}
		rb, rok := r.(bool)
		if r != nil && !rok {
			return nil, errSQLType
		}
		if e.Op == "AND" {
			switch {
			case rok && !rb:
				return false, nil
			case l == nil || r == nil:
				return nil, nil
			}
			return true, nil
		}
		switch {
		case rok && rb:
			return true, nil
		case l == nil || r == nil:
			return nil, nil
		}
		return false, nil
	}
	l, err := env.eval(e.L)
	if err != nil {
		return nil, err
	}
	r, err := env.eval(e.R)
	if err != nil {
		return nil, err
	}
	switch e.Op {
	case "IS DISTINCT FROM", "IS NOT DISTINCT FROM":
		same := l == nil && r == nil
		if l != nil && r != nil {
			c, ok := sqlCompare(l, r)
			same = ok && c == 0
		}
		return same == (e.Op == "IS NOT DISTINCT FROM"), nil
	}
	if l == nil || r == nil {
		return nil, nil
	}
	switch e.Op {
	case "=", "<>", "<", "<=", ">", ">=":
		c, ok := sqlCompare(l, r)
		if !ok {
			return nil, fmt.Errorf("line %s: cannot compare %s with %s", e.OpAt, sqlTypeName(l), sqlTypeName(r))
		}
		switch e.Op {
		case "=":
			return c == 0, nil
		case "<>":
			return c != 0, nil
		case "<":
			return c < 0, nil
		case "<=":
			return c <= 0, nil
		case ">":
			return c > 0, nil
		}
		return c >= 0, nil
	case "||":
		return sqlString(l) + sqlString(r), nil
	}
	return sqlArith(e.Op, l, r)
}

func (env *sqlEnv) call(c *sql.Call) (any, error) {
	if c.IsNavigation() {
		return env.navigate(c)
	}
	if c.IsAggregate() {
		return env.aggregate(c)
	}
	args := make([]any, len(c.Args))
	for i, a := range c.Args {
		if _, ok := a.(*sql.UnitArg); ok {
			continue
		}
		v, err := env.eval(a)
		if err != nil {
			return nil, err
		}
		args[i] = v
	}
	switch c.Name {
	case "CURRENT_TIMESTAMP", "LOCALTIMESTAMP", "NOW", "MATCH_PROCTIME", "PROCTIME":
		return env.now, nil
	case "MATCH_ROWTIME":
		if len(env.rows) == 0 {
			return nil, nil
		}
		return env.rows[len(env.rows)-1].ts, nil
	case "CLASSIFIER":
		if r := env.rowFor(""); r != nil {
			return r.v, nil
		}
		return nil, nil
	case "ABS":
		switch x := args[0].(type) {
		case int64:
			if x < 0 {
				return -x, nil
			}
			return x, nil
		case float64:
			return math.Abs(x), nil
		case nil:
			return nil, nil
		}
		return nil, errSQLType
	case "UPPER", "LOWER", "CHAR_LENGTH", "CHARACTER_LENGTH", "TRIM":
		if args[0] == nil {
			return nil, nil
		}
		s, ok := args[0].(string)
		if !ok {
			return nil, errSQLType
		}
		switch c.Name {
		case "UPPER":
			return strings.ToUpper(s), nil
		case "LOWER":
			return strings.ToLower(s), nil
		case "TRIM":
			return strings.TrimSpace(s), nil
		}
		return int64(utf8.RuneCountInString(s)), nil
	case "COALESCE":
		for _, a := range args {
			if a != nil {
				return a, nil
			}
		}
		return nil, nil
	case "MOD":
		return sqlArith("%", args[0], args[1])
	case "POWER":
		a, ok1 := sqlFloat(args[0])
		b, ok2 := sqlFloat(args[1])
		if args[0] == nil || args[1] == nil {
			return nil, nil
		}
		if !ok1 || !ok2 {
			return nil, errSQLType
		}
		return math.Pow(a, b), nil
	}
	return nil, fmt.Errorf("line %s: function %s is not supported", c.At, c.Name)
}

// sqlFunctions are the functions besides navigation and aggregates.
var sqlFunctions = map[string]int{ // name → arity (-1: any)
	"CURRENT_TIMESTAMP": 0, "LOCALTIMESTAMP": 0, "NOW": 0, "MATCH_PROCTIME": 0, "PROCTIME": 0,
	"MATCH_ROWTIME": -1, "CLASSIFIER": 0, "ABS": 1, "UPPER": 1, "LOWER": 1, "CHAR_LENGTH": 1,
	"CHARACTER_LENGTH": 1, "TRIM": 1, "COALESCE": -1, "MOD": 2, "POWER": 2,
}

var sqlAggregates = map[string]bool{"COUNT": true, "SUM": true, "AVG": true, "MIN": true, "MAX": true}

func (env *sqlEnv) navigate(c *sql.Call) (any, error) {
	n, _ := c.Offset()
	arg := c.Args[0]
	var row *sqlRow
	switch c.Name {
	case "FIRST", "LAST":
		rows := env.rowsOf(refVar(arg))
		i := int(n)
		if c.Name == "LAST" {
			i = len(rows) - 1 - int(n)
		}
		if i < 0 || i >= len(rows) {
			return nil, nil
		}
		row = rows[i]
	case "PREV":
		i := env.cur - int(n)
		if i < 0 || i >= len(env.rows) {
			return nil, nil
		}
		row = &env.rows[i]
	default:
		return nil, fmt.Errorf("line %s: %s is not supported", c.At, c.Name)
	}
	saved := env.bound
	env.bound = row
	v, err := env.eval(arg)
	env.bound = saved
	return v, err
}

func (env *sqlEnv) aggregate(c *sql.Call) (any, error) {
	var rows []*sqlRow
	if c.Star {
		rows = env.rowsOf("")
	} else {
		rows = env.rowsOf(refVar(c.Args[0]))
	}
	saved := env.bound
	defer func() { env.bound = saved }()
	var vals []any
	seen := map[string]bool{}
	for _, r := range rows {
		if c.Star {
			vals = append(vals, true)
			continue
		}
		env.bound = r
		v, err := env.eval(c.Args[0])
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		if c.Distinct {
			k := fmt.Sprintf("%T:%v", v, v)
			if seen[k] {
				continue
			}
			seen[k] = true
		}
		vals = append(vals, v)
	}
	switch c.Name {
	case "COUNT":
		return int64(len(vals)), nil
	case "SUM", "AVG":
		if len(vals) == 0 {
			return nil, nil
		}
		var si int64
		var sf float64
		isFloat := false
		for _, v := range vals {
			switch x := v.(type) {
			case int64:
				si += x
				sf += float64(x)
			case float64:
				isFloat = true
				sf += x
			default:
				return nil, fmt.Errorf("line %s: %s of a non-number", c.At, c.Name)
			}
		}
		if c.Name == "SUM" {
			if isFloat {
				return sf, nil
			}
			return si, nil
		}
		if isFloat {
			return sf / float64(len(vals)), nil
		}
		return si / int64(len(vals)), nil // Flink: AVG of integers is an integer
	case "MIN", "MAX":
		var best any
		for _, v := range vals {
			if best == nil {
				best = v
				continue
			}
			cmp, ok := sqlCompare(v, best)
			if !ok {
				return nil, errSQLType
			}
			if (c.Name == "MIN" && cmp < 0) || (c.Name == "MAX" && cmp > 0) {
				best = v
			}
		}
		return best, nil
	}
	return nil, fmt.Errorf("line %s: aggregate %s is not supported", c.At, c.Name)
}

func sqlFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// sqlCompare orders two non-null values of compatible types.
func sqlCompare(a, b any) (int, bool) {
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return cmp3(x < y, x > y), true
		case float64:
			return cmp3(float64(x) < y, float64(x) > y), true
		}
	case float64:
		if y, ok := sqlFloat(b); ok {
			return cmp3(x < y, x > y), true
		}
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), true
		}
	case bool:
		if y, ok := b.(bool); ok {
			return cmp3(!x && y, x && !y), true
		}
	}
	return 0, false
}

func cmp3(less, greater bool) int {
	switch {
	case less:
		return -1
	case greater:
		return 1
	}
	return 0
}

func sqlArith(op string, l, r any) (any, error) {
	if l == nil || r == nil {
		return nil, nil
	}
	li, lInt := l.(int64)
	ri, rInt := r.(int64)
	if lInt && rInt {
		switch op {
		case "+":
			return li + ri, nil
		case "-":
			return li - ri, nil
		case "*":
			return li * ri, nil
		case "/", "%":
			if ri == 0 {
				return nil, errors.New("division by zero")
			}
			if op == "/" {
				return li / ri, nil
			}
			return li % ri, nil
		}
	}
	lf, ok1 := sqlFloat(l)
	rf, ok2 := sqlFloat(r)
	if !ok1 || !ok2 {
		return nil, errSQLType
	}
	switch op {
	case "+":
		return lf + rf, nil
	case "-":
		return lf - rf, nil
	case "*":
		return lf * rf, nil
	case "/":
		if rf == 0 {
			return nil, errors.New("division by zero")
		}
		return lf / rf, nil
	case "%":
		if rf == 0 {
			return nil, errors.New("division by zero")
		}
		return math.Mod(lf, rf), nil
	}
	return nil, fmt.Errorf("operator %s is not supported", op)
}

func sqlString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		if x {
			return "TRUE"
		}
		return "FALSE"
	}
	return fmt.Sprint(v)
}

func sqlTypeName(v any) string {
	switch v.(type) {
	case int64:
		return "INTEGER"
	case float64:
		return "DOUBLE"
	case string:
		return "STRING"
	case bool:
		return "BOOLEAN"
	}
	return "a value"
}

func sqlCast(v any, typ string) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch typ {
	case "INT", "INTEGER", "BIGINT", "SMALLINT", "TINYINT":
		switch x := v.(type) {
		case int64:
			return x, nil
		case float64:
			return int64(x), nil
		case string:
			n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("cannot cast %q to %s", x, typ)
			}
			return n, nil
		case bool:
			if x {
				return int64(1), nil
			}
			return int64(0), nil
		}
	case "DOUBLE", "FLOAT", "REAL", "DECIMAL", "NUMERIC", "DOUBLE PRECISION":
		switch x := v.(type) {
		case int64:
			return float64(x), nil
		case float64:
			return x, nil
		case string:
			f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			if err != nil {
				return nil, fmt.Errorf("cannot cast %q to %s", x, typ)
			}
			return f, nil
		}
	case "VARCHAR", "STRING", "CHAR":
		return sqlString(v), nil
	case "BOOLEAN":
		switch x := v.(type) {
		case bool:
			return x, nil
		case string:
			b, err := strconv.ParseBool(strings.ToLower(strings.TrimSpace(x)))
			if err != nil {
				return nil, fmt.Errorf("cannot cast %q to BOOLEAN", x)
			}
			return b, nil
		}
	default:
		if strings.HasPrefix(typ, "TIMESTAMP") {
			ms, err := expr.TimeMillis(v)
			if err != nil {
				return nil, err
			}
			return ms, nil
		}
		return nil, fmt.Errorf("cast to %s is not supported", typ)
	}
	return nil, fmt.Errorf("cannot cast %s to %s", sqlTypeName(v), typ)
}

// sqlLike matches s against a LIKE pattern (% any run, _ one character).
func sqlLike(s, p string, esc rune) bool {
	sr, pr := []rune(s), []rune(p)
	var match func(i, j int) bool
	memo := map[[2]int]bool{}
	match = func(i, j int) bool {
		k := [2]int{i, j}
		if v, ok := memo[k]; ok {
			return v
		}
		var res bool
		switch {
		case j == len(pr):
			res = i == len(sr)
		case pr[j] == esc && j+1 < len(pr):
			res = i < len(sr) && sr[i] == pr[j+1] && match(i+1, j+2)
		case pr[j] == '%':
			res = match(i, j+1) || (i < len(sr) && match(i+1, j))
		case pr[j] == '_':
			res = i < len(sr) && match(i+1, j+1)
		default:
			res = i < len(sr) && sr[i] == pr[j] && match(i+1, j+1)
		}
		memo[k] = res
		return res
	}
	return match(0, 0)
}
