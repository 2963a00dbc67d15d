package nfa

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/cepcluster/cep/nfa/expr"
	"github.com/cepcluster/cep/nfa/sql"
	"github.com/cepcluster/cep/nfa/sqleval"
)

// CompileSQL compiles a Flink SQL MATCH_RECOGNIZE query into the same engine
// that pattern documents use. name names the pattern (records and state);
// when empty it is derived from the query's alias, else "query".
//
// The translation is Flink's: variables follow each other with strict
// contiguity (next); quantifiers become oneOrMore/times/timesOrMore with
// consecutive(), greedy unless written reluctant; WITHIN is the pattern's
// window; AFTER MATCH SKIP maps onto the skip strategies (TO NEXT ROW when
// absent). DEFINE clauses are evaluated with running semantics and MEASURES
// with final semantics.
func CompileSQL(src, name string) (*Pattern, error) { return CompileSQLColumns(src, name, nil) }

// CompileSQLColumns is CompileSQL for a source whose columns are known, so
// that a misspelt column is reported ("no field 'amout'. Did you mean
// 'amount'?"). columns nil means unknown.
func CompileSQLColumns(src, name string, columns []string) (*Pattern, error) {
	if err := checkDocumentSize(len(src)); err != nil {
		return nil, err
	}
	q, err := sql.Parse(src)
	if err != nil {
		return nil, err
	}
	if err := q.Check(columns); err != nil {
		return nil, err
	}
	if err := sqleval.Supported(q); err != nil {
		return nil, err
	}
	if name == "" {
		name = SanitizeName(q.Alias)
	}
	s := &Spec{Name: name, Source: Sources{q.Source}}
	// distinct variables (PERMUTE names each in many alternatives)
	vars := map[string]bool{}
	for _, v := range q.Pattern.Vars() {
		vars[v.Name] = true
	}
	if len(vars) > MaxSQLPatternVars {
		return nil, overLimit("", "PATTERN", "MaxSQLPatternVars", "number of PATTERN variables", int64(len(vars)), MaxSQLPatternVars)
	}
	s.Stages = sqlStages(q.Pattern.Items, new(int))
	if q.Within != nil {
		s.Within = &Duration{Millis: q.Within.Millis}
	}
	switch q.Skip.Kind {
	case sql.SkipToNextRow:
		s.Skip = "skipToNext"
	case sql.SkipPastLastRow:
		s.Skip = "skipPastLastEvent"
	case sql.SkipToFirst:
		s.Skip = "skipToFirst:" + q.Skip.Var
	case sql.SkipToLast:
		s.Skip = "skipToLast:" + q.Skip.Var
	}
	procCol := ""
	timeCol := q.OrderBy[0].Name
	if strings.EqualFold(timeCol, "proctime") {
		procCol = timeCol
	}
	subsets := q.SubsetMap()
	preds := map[string]predicate{}
	for _, d := range q.Defines {
		preds[d.Var] = newDefinePredicate(d.Var, d.Expr, procCol)
		preds[d.Var].(*definePredicate).subsets = subsets
	}
	p, err := compileWith(s, preds)
	if err != nil {
		return nil, err
	}
	p.sql = true
	p.sqlFields = sqlFieldsRead(q)
	p.sqlTimeouts = q.ShowTimeouts
	if pr := q.Projection; pr != nil {
		p.project = func(e expr.Event) (expr.Event, bool, error) {
			env := &sqleval.Env{Rows: []sqleval.Row{{Data: e}}, ProcCol: procCol}
			if pr.Where != nil {
				v, err := env.Eval(pr.Where)
				if err != nil {
					return nil, false, err
				}
				if b, _ := v.(bool); !b {
					return nil, false, nil
				}
			}
			if pr.Star {
				return e, true, nil
			}
			out := make(expr.Event, len(pr.Items))
			for i, it := range pr.Items {
				v, err := env.Eval(it.Expr)
				if err != nil {
					return nil, false, fmt.Errorf("%s: %v", it.OutputName(i), err)
				}
				out[it.OutputName(i)] = v
			}
			return out, true, nil
		}
	}
	if procCol == "" {
		col := timeCol
		p.timeFn = func(e expr.Event) (int64, error) {
			v, ok := e[col]
			if !ok || v == nil {
				return 0, fmt.Errorf("ORDER BY %s: the event has no %s", col, col)
			}
			ts, err := expr.TimeMillis(v)
			if err != nil {
				return 0, fmt.Errorf("ORDER BY %s: %v", col, err)
			}
			return ts, nil
		}
	}
	if len(q.OrderBy) > 1 {
		order := q.OrderBy[1:]
		p.tieLess = func(a, b expr.Event) bool {
			for _, o := range order {
				x, y := a[o.Name], b[o.Name]
				var c int
				switch {
				case x == nil && y == nil:
					continue
				case x == nil:
					c = -1
				case y == nil:
					c = 1
				default:
					c, _ = sqleval.Compare(x, y)
				}
				if o.Desc {
					c = -c
				}
				if c != 0 {
					return c < 0
				}
			}
			return false
		}
	}
	partition := make([]string, len(q.PartitionBy))
	for i, c := range q.PartitionBy {
		partition[i] = c.Name
	}
	if len(partition) > 0 {
		p.keyFn = func(e expr.Event) (string, error) { return partitionKey(e, partition), nil }
		var exprs []string
		for _, c := range partition {
			exprs = append(exprs, "e."+c)
		}
		p.keyExpr = strings.Join(exprs, ",")
	}
	measures := q.Measures
	var selected []string
	if !q.SelectStar {
		for _, it := range q.Select {
			selected = append(selected, it.Name)
		}
	}
	p.rowFn = func(m *Matcher, pa path) []Field {
		env := &sqleval.Env{Now: m.wm, ProcCol: procCol, Subsets: subsets}
		for _, n := range pa {
			env.Rows = append(env.Rows, sqleval.Row{Var: m.p.stageNames[n.key.stage], Time: n.ev.ts, Data: n.ev.data})
		}
		env.Cur = len(env.Rows) - 1
		var cols []Field
		if len(env.Rows) > 0 {
			for _, c := range partition {
				cols = append(cols, Field{Name: c, Value: env.Rows[0].Data[c]})
			}
		}
		for _, ms := range measures {
			v, err := env.Eval(ms.Expr)
			if err != nil {
				m.emitFailed(ms.Alias, err)
				v = nil
			}
			cols = append(cols, Field{Name: ms.Alias, Value: v})
		}
		if selected == nil {
			return cols
		}
		out := make([]Field, 0, len(q.Select))
		for i, name := range selected {
			var v any
			for _, c := range cols {
				if c.Name == name {
					v = c.Value
				}
			}
			out = append(out, Field{Name: q.Select[i].OutputName(), Value: v})
		}
		return out
	}
	// (MEASURES read a match's events by stage, as a sequence's paths
	// have them)
	p.seq = seqPlanOf(p)
	p.bounds = p.computeTimeBounds()
	return p, nil
}

// sqlStages lowers PATTERN terms to stages that follow each other with
// strict contiguity; a quantified group becomes a group stage named (n),
// a name no variable has (a group's name holds no rows), and an
// alternation a stage (n) with the alternatives' stages (Stage.Alts).
func sqlStages(items []sql.PatternTerm, groups *int) []Stage {
	var out []Stage
	for i, it := range items {
		var st Stage
		switch t := it.(type) {
		case *sql.PatternVar:
			st.Name = t.Name
			applySQLQuantifier(&st, t.Quant)
		case *sql.PatternGroup:
			*groups++
			st.Name = fmt.Sprintf("(%d)", *groups)
			st.Group = sqlStages(t.Inner.Items, groups)
			applySQLQuantifier(&st, t.Quant)
			st.Greedy = false // Check lets no greedy group through
		case *sql.PatternAlt:
			// a stage that branches to each alternative in order; like a
			// group's, its name holds no rows
			*groups++
			st.Name = fmt.Sprintf("(%d)", *groups)
			for _, a := range t.Alts {
				st.Alts = append(st.Alts, sqlStages(a.Items, groups))
			}
		}
		if i > 0 {
			st.Contiguity = "next"
		}
		out = append(out, st)
	}
	return out
}

func applySQLQuantifier(st *Stage, q sql.Quantifier) {
	greedy := !q.Reluctant
	switch {
	case q.Min == 1 && q.Max == 1:
	case q.Min == 0 && q.Max == 1:
		st.Optional = true
	case q.Max < 0 && q.Min <= 1:
		st.OneOrMore, st.Consecutive, st.Greedy = true, true, greedy
		st.Optional = q.Min == 0
	case q.Max < 0:
		n := q.Min
		st.TimesOrMore, st.Consecutive, st.Greedy = &n, true, greedy
	case q.Min == q.Max:
		st.Times, st.Consecutive = &Times{From: q.Min, To: q.Max}, true
	default:
		st.Times, st.Consecutive, st.Greedy = &Times{From: q.Min, To: q.Max}, true, greedy
	}
}

// usesMatch reports whether a DEFINE expression for variable v depends on
// the partial match (other variables, navigation, aggregates) rather than
// on the current row alone.
func usesMatch(v string, e sql.Expr) bool {
	uses := false
	sql.Walk(e, func(x sql.Expr) bool {
		switch x := x.(type) {
		case *sql.Call:
			if x.IsNavigation() || x.IsAggregate() || x.Name == "MATCH_ROWTIME" || x.Name == "CLASSIFIER" || x.Name == "CURRENT_TIMESTAMP" || x.Name == "MATCH_PROCTIME" {
				uses = true
			}
		case *sql.ColumnRef:
			if x.Var != "" && x.Var != v {
				uses = true
			}
		}
		return !uses
	})
	return uses
}

type definePredicate struct {
	v       string
	e       sql.Expr
	procCol string
	usesCtx bool
	subsets map[string][]string // SUBSET
	// col = 'lit' on the current row (DEFINE A AS type = 'LOGIN'): a row
	// whose column holds a string is decided without the evaluator
	eq           bool
	eqCol, eqLit string
}

func newDefinePredicate(v string, e sql.Expr, procCol string) *definePredicate {
	d := &definePredicate{v: v, e: e, procCol: procCol, usesCtx: usesMatch(v, e)}
	if b, ok := e.(*sql.Binary); ok && b.Op == "=" {
		col, lit := b.L, b.R
		if _, isLit := col.(*sql.Literal); isLit {
			col, lit = lit, col
		}
		c, cok := col.(*sql.ColumnRef)
		l, lok := lit.(*sql.Literal)
		if cok && lok && l.Kind == sql.LitString && len(c.Fields) == 0 && (c.Var == "" || c.Var == v) {
			d.eq, d.eqCol, d.eqLit = true, c.Name, l.Str
		}
	}
	return d
}

func (d *definePredicate) UsesContext() bool { return d.usesCtx }

// testColumn decides col = 'lit' from the column's value x when it is a
// string, as the evaluator would; decided is false otherwise (a missing
// column included: the general path says what then).
func (d *definePredicate) testColumn(x any) (v, decided bool) {
	s, ok := x.(string)
	return ok && s == d.eqLit, ok
}

func (d *definePredicate) Eval(e expr.Event, ctx *evalCtx) (bool, error) {
	if d.eq {
		if v, decided := d.testColumn(e[d.eqCol]); decided {
			return v, nil
		}
	}
	// the rows live in the matcher's scratch buffer: nothing keeps them
	// beyond this evaluation
	env := &sqleval.Env{Now: ctx.m.wm, ProcCol: d.procCol, Subsets: d.subsets, Rows: ctx.m.sc.sqlRows[:0]}
	defer func(env *sqleval.Env) {
		clear(env.Rows)
		ctx.m.sc.sqlRows = env.Rows[:0]
	}(env)
	env.Rows = append(env.Rows, sqleval.Row{Var: d.v, Time: ctx.ev.ts, Data: e})
	env.Cur = 0
	var w pathWalker
	read := 0 // rows Past gave or was asked for
	if d.usesCtx && ctx.cs != nil && ctx.m.test.noLazyRows {
		w.lost = true // the reference: every row first
	} else if d.usesCtx && ctx.cs != nil {
		// the partial match's rows, read back from its last one only as far
		// as the condition looks (LAST(B.x, 1) reads two, whatever the
		// match's length)
		w = pathWalker{n: ctx.cs.prev, ver: ctx.cs.ver}
		env.Past = func(int) (sqleval.Row, bool) {
			read++
			n := w.next()
			if n == nil {
				return sqleval.Row{}, false
			}
			return sqleval.Row{Var: ctx.m.p.stageNames[n.key.stage], Time: n.ev.ts, Data: n.ev.data}, true
		}
	}
	var v any
	var err error
	if !w.lost {
		v, err = env.Eval(d.e)
	}
	// at most the last row, which every partial match at its node shares
	ctx.lastRow = !w.lost && read <= 1 && d.usesCtx && ctx.cs != nil
	if w.lost {
		// not a path a partial match made: read it as extraction does
		env = &sqleval.Env{Now: ctx.m.wm, ProcCol: d.procCol, Subsets: d.subsets}
		for _, r := range ctx.rows() {
			env.Rows = append(env.Rows, sqleval.Row{Var: r.stage, Time: r.ts, Data: r.data})
		}
		env.Rows = append(env.Rows, sqleval.Row{Var: d.v, Time: ctx.ev.ts, Data: e})
		env.Cur = len(env.Rows) - 1
		v, err = env.Eval(d.e)
	}
	if err != nil {
		return false, err
	}
	b, _ := v.(bool)
	return b, nil
}

func partitionKey(e expr.Event, cols []string) string {
	if len(cols) == 1 {
		v := e[cols[0]]
		if v == nil {
			return ""
		}
		if k, err := expr.KeyString(v); err == nil {
			return k
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	vals := make([]any, len(cols))
	for i, c := range cols {
		vals[i] = e[c]
	}
	b, _ := json.Marshal(vals)
	return string(b)
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)

// SanitizeName turns a file name or alias into a valid pattern name.
func SanitizeName(s string) string {
	s = nonName.ReplaceAllString(strings.ToLower(s), "-")
	s = strings.Trim(s, "-")
	if len(s) > 63 {
		s = s[:63]
	}
	if s == "" {
		return "query"
	}
	return s
}

// IsSQL reports whether a document looks like a MATCH_RECOGNIZE query
// rather than a pattern document.
func IsSQL(doc []byte) bool {
	s := strings.TrimSpace(string(doc))
	for strings.HasPrefix(s, "--") || strings.HasPrefix(s, "/*") {
		if strings.HasPrefix(s, "--") {
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				return false
			}
			s = strings.TrimSpace(s[i+1:])
		} else {
			i := strings.Index(s, "*/")
			if i < 0 {
				return false
			}
			s = strings.TrimSpace(s[i+2:])
		}
	}
	return len(s) >= 6 && strings.EqualFold(s[:6], "select")
}
