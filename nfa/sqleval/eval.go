package sqleval

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

// Row is one row of a match with the variable it is mapped to.
type Row struct {
	Var  string
	Time int64
	Data expr.Event
}

// Env is what an expression sees.
type Env struct {
	Rows    []Row
	Cur     int    // the current row (DEFINE) or the last row (MEASURES)
	Now     int64  // CURRENT_TIMESTAMP / MATCH_PROCTIME
	ProcCol string // the processing-time column (ORDER BY proctime), "" for none
	// Subsets are the SUBSET union variables: a reference to one reads
	// the rows of any of its variables (sql.Query.SubsetMap)
	Subsets map[string][]string
	// Past, when set, supplies the rows before Rows lazily, newest first:
	// Past(0) is the row just before Rows[0] (false: there are no more).
	// A condition reading the last few rows of a long match (PREV,
	// LAST(v.x, n), a plain v.x) then reads only those; FIRST and the
	// aggregates read them all (see full).
	Past  func(i int) (Row, bool)
	past  []Row // the rows Past gave, newest first
	ended bool  // Past has no more rows
	bound *Row  // inside navigation/aggregates: every reference reads this row
}

// pastRow returns the i-th row before Rows[0], asking Past for it once.
func (env *Env) pastRow(i int) *Row {
	for len(env.past) <= i && !env.ended {
		r, ok := env.Past(len(env.past))
		if !ok {
			env.ended = true
			break
		}
		env.past = append(env.past, r)
	}
	if i < len(env.past) {
		return &env.past[i]
	}
	return nil
}

// full moves every row Past supplies into Rows, in order, for what reads
// them all.
func (env *Env) full() {
	if env.Past == nil {
		return
	}
	for i := 0; env.pastRow(i) != nil; i++ {
	}
	rows := make([]Row, 0, len(env.past)+len(env.Rows))
	for i := len(env.past) - 1; i >= 0; i-- {
		rows = append(rows, env.past[i])
	}
	// a row pointer taken before (env.bound) keeps reading the same
	// values from the old arrays
	rows = append(rows, env.Rows...)
	env.Cur += len(env.past)
	env.Rows, env.Past, env.past = rows, nil, nil
}

// back returns the i-th row counting back from the last one (0: the
// last), or nil.
func (env *Env) back(i int) *Row {
	if i < len(env.Rows) {
		return &env.Rows[len(env.Rows)-1-i]
	}
	if env.Past == nil {
		return nil
	}
	return env.pastRow(i - len(env.Rows))
}

// lastIndex is lastOf's row as an index for back.
func (env *Env) lastIndex(v string, n int) (int, bool) {
	for i := 0; ; i++ {
		r := env.back(i)
		if r == nil {
			return 0, false
		}
		if env.mapped(r, v) {
			if n == 0 {
				return i, true
			}
			n--
		}
	}
}

// lastOf returns the n-th row counting back from the last one mapped to v
// (all rows for ""), or nil, reading only as far back as it must.
func (env *Env) lastOf(v string, n int) *Row {
	for i := 0; ; i++ {
		r := env.back(i)
		if r == nil {
			return nil
		}
		if env.mapped(r, v) {
			if n == 0 {
				return r
			}
			n--
		}
	}
}

var errType = errors.New("type mismatch")

func (env *Env) column(r *Row, c *sql.ColumnRef) any {
	if r == nil {
		return nil
	}
	v, ok := r.Data[c.Name]
	if !ok {
		if env.ProcCol != "" && strings.EqualFold(c.Name, env.ProcCol) {
			return r.Time
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
func (env *Env) rowFor(v string) *Row {
	if v == "" {
		if env.Cur >= 0 && env.Cur < len(env.Rows) {
			return &env.Rows[env.Cur]
		}
		return nil
	}
	return env.lastOf(v, 0)
}

// mapped reports whether row r is mapped to variable v: v itself, a union
// variable holding r's variable, or "" (every row).
func (env *Env) mapped(r *Row, v string) bool {
	if v == "" || r.Var == v {
		return true
	}
	for _, u := range env.Subsets[v] {
		if u == r.Var {
			return true
		}
	}
	return false
}

// rowsOf returns the rows mapped to v (all rows for "").
func (env *Env) rowsOf(v string) []*Row {
	env.full()
	var out []*Row
	for i := range env.Rows {
		if env.mapped(&env.Rows[i], v) {
			out = append(out, &env.Rows[i])
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

// Eval evaluates e over env's rows; nil is SQL NULL. Each kind of
// expression has a function of its own.
func (env *Env) Eval(e sql.Expr) (any, error) {
	switch e := e.(type) {
	case *sql.Literal:
		return literal(e), nil
	case *sql.Interval:
		return interval(e)
	case *sql.ColumnRef:
		if env.bound != nil {
			return env.column(env.bound, e), nil
		}
		return env.column(env.rowFor(e.Var), e), nil
	case *sql.Unary:
		return env.unary(e)
	case *sql.Binary:
		return env.binary(e)
	case *sql.IsNull:
		x, err := env.Eval(e.X)
		if err != nil {
			return nil, err
		}
		return (x == nil) != e.Not, nil
	case *sql.IsBool:
		return env.isBool(e)
	case *sql.Between:
		return env.between(e)
	case *sql.In:
		return env.in(e)
	case *sql.Like:
		return env.like(e)
	case *sql.Case:
		return env.caseOf(e)
	case *sql.Cast:
		return env.cast(e)
	case *sql.Call:
		return env.call(e)
	}
	return nil, fmt.Errorf("line %s: unsupported expression %s", e.Pos(), e)
}

func literal(e *sql.Literal) any {
	switch e.Kind {
	case sql.LitNull:
		return nil
	case sql.LitBool:
		return e.Bool
	case sql.LitInt:
		return e.Int
	case sql.LitDecimal, sql.LitFloat:
		return e.Float
	}
	return e.Str
}

func interval(e *sql.Interval) (any, error) {
	if e.Months != 0 {
		return nil, fmt.Errorf("line %s: year-month intervals are not supported", e.At)
	}
	return e.Millis, nil
}

func (env *Env) unary(e *sql.Unary) (any, error) {
	x, err := env.Eval(e.X)
	if err != nil || x == nil {
		return nil, err
	}
	switch e.Op {
	case "NOT":
		b, ok := x.(bool)
		if !ok {
			return nil, errType
		}
		return !b, nil
	case "-":
		switch n := x.(type) {
		case int64:
			return -n, nil
		case float64:
			return -n, nil
		}
		return nil, errType
	}
	return x, nil // +, FINAL, RUNNING
}

func (env *Env) isBool(e *sql.IsBool) (any, error) {
	x, err := env.Eval(e.X)
	if err != nil {
		return nil, err
	}
	b, ok := x.(bool)
	res := ok && b == e.Value
	return res != e.Not, nil
}

func (env *Env) between(e *sql.Between) (any, error) {
	x, err := env.Eval(e.X)
	if err != nil {
		return nil, err
	}
	lo, err := env.Eval(e.Lo)
	if err != nil {
		return nil, err
	}
	hi, err := env.Eval(e.Hi)
	if err != nil {
		return nil, err
	}
	if x == nil || lo == nil || hi == nil {
		return nil, nil
	}
	if e.Symmetric {
		if c, ok := Compare(lo, hi); ok && c > 0 {
			lo, hi = hi, lo
		}
	}
	c1, ok1 := Compare(x, lo)
	c2, ok2 := Compare(x, hi)
	if !ok1 || !ok2 {
		return nil, errType
	}
	return (c1 >= 0 && c2 <= 0) != e.Not, nil
}

func (env *Env) in(e *sql.In) (any, error) {
	x, err := env.Eval(e.X)
	if err != nil || x == nil {
		return nil, err
	}
	sawNull := false
	for _, it := range e.List {
		y, err := env.Eval(it)
		if err != nil {
			return nil, err
		}
		if y == nil {
			sawNull = true
			continue
		}
		if c, ok := Compare(x, y); ok && c == 0 {
			return !e.Not, nil
		}
	}
	if sawNull {
		return nil, nil
	}
	return e.Not, nil
}

func (env *Env) like(e *sql.Like) (any, error) {
	x, err := env.Eval(e.X)
	if err != nil {
		return nil, err
	}
	p, err := env.Eval(e.Pattern)
	if err != nil {
		return nil, err
	}
	if x == nil || p == nil {
		return nil, nil
	}
	esc := rune(-1)
	if e.Escape != nil {
		ev, err := env.Eval(e.Escape)
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
		return nil, errType
	}
	return matchLike(xs, ps, esc) != e.Not, nil
}

func (env *Env) caseOf(e *sql.Case) (any, error) {
	var op any
	if e.Operand != nil {
		var err error
		if op, err = env.Eval(e.Operand); err != nil {
			return nil, err
		}
	}
	for _, w := range e.Whens {
		c, err := env.Eval(w.Cond)
		if err != nil {
			return nil, err
		}
		hit := false
		if e.Operand != nil {
			if op != nil && c != nil {
				cmp, ok := Compare(op, c)
				hit = ok && cmp == 0
			}
		} else {
			b, ok := c.(bool)
			hit = ok && b
		}
		if hit {
			return env.Eval(w.Then)
		}
	}
	if e.Else != nil {
		return env.Eval(e.Else)
	}
	return nil, nil
}

func (env *Env) cast(e *sql.Cast) (any, error) {
	x, err := env.Eval(e.X)
	if err != nil {
		return nil, err
	}
	v, err := castTo(x, e.Type.Name)
	if err != nil && e.Try {
		return nil, nil
	}
	return v, err
}

func (env *Env) binary(e *sql.Binary) (any, error) {
	switch e.Op {
	case "AND", "OR":
		return env.andOr(e)
	}
	l, err := env.Eval(e.L)
	if err != nil {
		return nil, err
	}
	r, err := env.Eval(e.R)
	if err != nil {
		return nil, err
	}
	switch e.Op {
	case "IS DISTINCT FROM", "IS NOT DISTINCT FROM":
		same := l == nil && r == nil
		if l != nil && r != nil {
			c, ok := Compare(l, r)
			same = ok && c == 0
		}
		return same == (e.Op == "IS NOT DISTINCT FROM"), nil
	}
	if l == nil || r == nil {
		return nil, nil
	}
	switch e.Op {
	case "=", "<>", "<", "<=", ">", ">=":
		return compareOp(e, l, r)
	case "||":
		return toString(l) + toString(r), nil
	}
	return arith(e.Op, l, r)
}

// andOr is AND and OR in three-valued logic; the right side is not
// evaluated where the left decides.
func (env *Env) andOr(e *sql.Binary) (any, error) {
	l, err := env.Eval(e.L)
	if err != nil {
		return nil, err
	}
	lb, lok := l.(bool)
	if l != nil && !lok {
		return nil, errType
	}
	// short-circuit where the result is already known
	if lok && e.Op == "AND" && !lb {
		return false, nil
	}
	if lok && e.Op == "OR" && lb {
		return true, nil
	}
	r, err := env.Eval(e.R)
	if err != nil {
		return nil, err
	}
	rb, rok := r.(bool)
	if r != nil && !rok {
		return nil, errType
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

// compareOp is = <> < <= > >= on two non-null values.
func compareOp(e *sql.Binary, l, r any) (any, error) {
	c, ok := Compare(l, r)
	if !ok {
		return nil, fmt.Errorf("line %s: cannot compare %s with %s", e.OpAt, typeName(l), typeName(r))
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
}

func (env *Env) call(c *sql.Call) (any, error) {
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
		v, err := env.Eval(a)
		if err != nil {
			return nil, err
		}
		args[i] = v
	}
	switch c.Name {
	case "CURRENT_TIMESTAMP", "LOCALTIMESTAMP", "NOW", "MATCH_PROCTIME", "PROCTIME":
		return env.Now, nil
	case "MATCH_ROWTIME":
		if len(env.Rows) == 0 {
			return nil, nil
		}
		return env.Rows[len(env.Rows)-1].Time, nil
	case "CLASSIFIER":
		// inside navigation (FIRST(CLASSIFIER())) it is the navigated
		// row's variable, as for a column
		if env.bound != nil {
			return env.bound.Var, nil
		}
		if r := env.rowFor(""); r != nil {
			return r.Var, nil
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
		return nil, errType
	case "UPPER", "LOWER", "CHAR_LENGTH", "CHARACTER_LENGTH", "TRIM":
		if args[0] == nil {
			return nil, nil
		}
		s, ok := args[0].(string)
		if !ok {
			return nil, errType
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
		return arith("%", args[0], args[1])
	case "POWER":
		a, ok1 := toFloat(args[0])
		b, ok2 := toFloat(args[1])
		if args[0] == nil || args[1] == nil {
			return nil, nil
		}
		if !ok1 || !ok2 {
			return nil, errType
		}
		return math.Pow(a, b), nil
	}
	return nil, fmt.Errorf("line %s: function %s is not supported", c.At, c.Name)
}

// functions are the functions besides navigation and aggregates.
var functions = map[string]int{ // name → arity (-1: any)
	"CURRENT_TIMESTAMP": 0, "LOCALTIMESTAMP": 0, "NOW": 0, "MATCH_PROCTIME": 0, "PROCTIME": 0,
	"MATCH_ROWTIME": -1, "CLASSIFIER": 0, "ABS": 1, "UPPER": 1, "LOWER": 1, "CHAR_LENGTH": 1,
	"CHARACTER_LENGTH": 1, "TRIM": 1, "COALESCE": -1, "MOD": 2, "POWER": 2,
}

var aggregates = map[string]bool{"COUNT": true, "SUM": true, "AVG": true, "MIN": true, "MAX": true,
	"MAX_BY": true, "MIN_BY": true, "ARBITRARY": true}

// Supported rejects what the evaluator cannot do, with a position: NEXT
// outside MEASURES,
// aggregates and functions it does not know. Run it after q.Check.
func Supported(q *sql.Query) error {
	var err error
	inMeasures := false
	visit := func(e sql.Expr) bool {
		if err != nil {
			return false
		}
		c, ok := e.(*sql.Call)
		if !ok {
			return true
		}
		switch {
		case c.IsNavigation():
			if c.Name == "NEXT" && !inMeasures {
				err = &sql.Error{Pos: c.At, Msg: "NEXT is supported only in MEASURES (elsewhere it reads a row after the current one)"}
			}
		case c.IsAggregate():
			if !aggregates[c.Name] {
				err = &sql.Error{Pos: c.At, Msg: fmt.Sprintf("aggregate %s is not supported (use COUNT, SUM, AVG, MIN, MAX, MAX_BY, MIN_BY or ARBITRARY)", c.Name)}
			}
		case c.Name == "MATCH_NUMBER":
			// it numbers a partition's matches: a count per partition kept
			// for ever, which the engine's saved state has no place for
			err = &sql.Error{Pos: c.At, Msg: "MATCH_NUMBER() is not supported: the engine keeps no count of a partition's matches"}
		default:
			if _, ok := functions[c.Name]; !ok {
				err = &sql.Error{Pos: c.At, Msg: fmt.Sprintf("function %s is not supported", c.Spelling)}
			}
		}
		return err == nil
	}
	for _, d := range q.Defines {
		sql.Walk(d.Expr, visit)
	}
	inMeasures = true
	for _, m := range q.Measures {
		sql.Walk(m.Expr, visit)
	}
	inMeasures = false
	if q.Projection != nil {
		for _, it := range q.Projection.Items {
			sql.Walk(it.Expr, visit)
		}
		if q.Projection.Where != nil {
			sql.Walk(q.Projection.Where, visit)
		}
	}
	return err
}

func (env *Env) navigate(c *sql.Call) (any, error) {
	n, _ := c.Offset()
	arg := c.Args[0]
	var row *Row
	switch c.Name {
	case "LAST":
		if n < 0 {
			return nil, nil
		}
		row = env.lastOf(refVar(arg), int(n))
		if row == nil {
			return nil, nil
		}
	case "FIRST":
		rows := env.rowsOf(refVar(arg))
		i := int(n)
		if i < 0 || i >= len(rows) {
			return nil, nil
		}
		row = rows[i]
	case "PREV", "NEXT":
		// the row the argument reads (the last row of its variable, the
		// current row without one, or the row a FIRST/LAST argument
		// picks), then n rows back or forward within the match
		at, ok := env.anchor(arg)
		if !ok || n < 0 {
			return nil, nil
		}
		if c.Name == "PREV" {
			at += int(n)
		} else {
			at -= int(n)
		}
		if at < 0 {
			return nil, nil // after the last row seen
		}
		if row = env.back(at); row == nil {
			return nil, nil
		}
		if l, nested := arg.(*sql.Call); nested && (l.Name == "FIRST" || l.Name == "LAST") {
			arg = l.Args[0]
		}
	default:
		return nil, fmt.Errorf("line %s: %s is not supported", c.At, c.Name)
	}
	saved := env.bound
	env.bound = row
	v, err := env.Eval(arg)
	env.bound = saved
	return v, err
}

// anchor returns where (counting back from the last row, as back does)
// the row is that physical navigation over e counts from.
func (env *Env) anchor(e sql.Expr) (int, bool) {
	if l, ok := e.(*sql.Call); ok && (l.Name == "FIRST" || l.Name == "LAST") {
		n, _ := l.Offset()
		if n < 0 {
			return 0, false
		}
		v := refVar(l.Args[0])
		if l.Name == "LAST" {
			return env.lastIndex(v, int(n))
		}
		env.full()
		for i := range env.Rows {
			if env.mapped(&env.Rows[i], v) {
				if n == 0 {
					return len(env.Rows) - 1 - i, true
				}
				n--
			}
		}
		return 0, false
	}
	v := refVar(e)
	if v == "" {
		// the current row: the last one, in DEFINE and in MEASURES
		return len(env.Rows) - 1 - env.Cur, env.Cur >= 0 && env.Cur < len(env.Rows)
	}
	return env.lastIndex(v, 0)
}

func (env *Env) aggregate(c *sql.Call) (any, error) {
	var rows []*Row
	switch {
	case c.Star:
		rows = env.rowsOf(c.StarVar) // all rows for COUNT(*)
	case c.Name == "MAX_BY" || c.Name == "MIN_BY":
		v := refVar(c.Args[0])
		if v == "" {
			v = refVar(c.Args[1])
		}
		rows = env.rowsOf(v)
		return env.maxBy(c, rows)
	default:
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
		v, err := env.Eval(c.Args[0])
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
	case "ARBITRARY":
		// the first non-null value in row order (Trino: any one)
		if len(vals) == 0 {
			return nil, nil
		}
		return vals[0], nil
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
			cmp, ok := Compare(v, best)
			if !ok {
				return nil, errType
			}
			if (c.Name == "MIN" && cmp < 0) || (c.Name == "MAX" && cmp > 0) {
				best = v
			}
		}
		return best, nil
	}
	return nil, fmt.Errorf("line %s: aggregate %s is not supported", c.At, c.Name)
}

// maxBy is MAX_BY(x, key) / MIN_BY(x, key): x on the row whose key is
// greatest / least, rows with a NULL key left out; of rows with equal
// keys the first in row order (Trino leaves it open).
func (env *Env) maxBy(c *sql.Call, rows []*Row) (any, error) {
	saved := env.bound
	defer func() { env.bound = saved }()
	var best *Row
	var bestKey any
	for _, r := range rows {
		env.bound = r
		k, err := env.Eval(c.Args[1])
		if err != nil {
			return nil, err
		}
		if k == nil {
			continue
		}
		if best != nil {
			cmp, ok := Compare(k, bestKey)
			if !ok {
				return nil, errType
			}
			if (c.Name == "MAX_BY" && cmp <= 0) || (c.Name == "MIN_BY" && cmp >= 0) {
				continue
			}
		}
		best, bestKey = r, k
	}
	if best == nil {
		return nil, nil
	}
	env.bound = best
	return env.Eval(c.Args[0])
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// Compare orders two non-null values of compatible types.
func Compare(a, b any) (int, bool) {
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return cmp3(x < y, x > y), true
		case float64:
			return cmp3(float64(x) < y, float64(x) > y), true
		}
	case float64:
		if y, ok := toFloat(b); ok {
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

func arith(op string, l, r any) (any, error) {
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
	lf, ok1 := toFloat(l)
	rf, ok2 := toFloat(r)
	if !ok1 || !ok2 {
		return nil, errType
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

func toString(v any) string {
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

func typeName(v any) string {
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

func castTo(v any, typ string) (any, error) {
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
		return toString(v), nil
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
	return nil, fmt.Errorf("cannot cast %s to %s", typeName(v), typ)
}

// like matches s against a LIKE pattern (% any run, _ one character).
func matchLike(s, p string, esc rune) bool {
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
