package sql

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// Check validates a parsed query: names against the pattern and, when
// columns is not nil, against the input columns, and the rules of Flink's
// MATCH_RECOGNIZE that the grammar does not express. It returns the first
// problem in source order as an *Error, nil if there is none.
//
// columns are the columns of the FROM table (for FROM (SELECT ...), of
// the subquery's table). nil means unknown: column names are then not
// checked, except against a projection subquery's own output.
//
// The first ORDER BY column is the time attribute. When the columns are
// known and it is not one of them, it is taken as a processing-time
// attribute (ORDER BY proctime): a virtual column that the query may also
// read, unless its name is a likely misspelling of a column, which is
// reported.
//
// Check resolves x.y references where x is not a pattern variable but is
// a known column into nested field accesses (see ColumnRef); it has no
// other effect on q.
func (q *Query) Check(columns []string) error {
	if errs := q.Problems(columns); len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// Problems is Check returning every problem found, in source order.
func (q *Query) Problems(columns []string) []*Error {
	c := &checker{q: q, vars: map[string]*PatternVar{}}
	c.run(columns)
	slices.SortStableFunc(c.errs, func(a, b *Error) int {
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line - b.Pos.Line
		}
		return a.Pos.Col - b.Pos.Col
	})
	return c.errs
}

type checker struct {
	q        *Query
	vars     map[string]*PatternVar // first occurrence of each pattern variable
	varNames []string
	subsets  map[string]bool // SUBSET union variables
	known    bool            // columns known
	cols     map[string]bool
	colList  []string
	errs     []*Error
}

func (c *checker) errorf(p Pos, format string, args ...any) {
	e := errorf(p, format, args...)
	for _, x := range c.errs {
		if x.Error() == e.Error() {
			return // PERMUTE's terms stand in several alternatives: say it once
		}
	}
	c.errs = append(c.errs, e)
}

func (c *checker) run(columns []string) {
	q := c.q
	c.pattern()
	c.subsetClause()

	// Columns visible inside MATCH_RECOGNIZE.
	if columns != nil {
		c.setColumns(columns)
	}
	if pr := q.Projection; pr != nil {
		c.projection(pr)
	}
	if len(q.OrderBy) > 0 {
		t := q.OrderBy[0]
		if t.Desc {
			c.errorf(t.At, "the first ORDER BY column must be the time attribute in ascending order; Flink requires the primary sort order of a stream to be ascending on time")
		}
		if c.known && !c.cols[t.Name] {
			if s := suggest(t.Name, c.colList); s != "" {
				c.errorf(t.At, "no field %s. Did you mean %s?", quoteName(t.Name), quoteName(s))
			} else {
				// A processing-time attribute: a virtual column.
				c.cols[t.Name] = true
				c.colList = append(c.colList, t.Name)
			}
		}
		for _, o := range q.OrderBy[1:] {
			c.column(o.Name, o.At, "")
		}
	}
	for _, p := range q.PartitionBy {
		c.column(p.Name, p.At, "")
	}

	// Skip target.
	if s := q.Skip; s.Kind == SkipToFirst || s.Kind == SkipToLast {
		c.variable(s.Var, s.VarAt)
	}

	if q.ShowTimeouts && q.Within == nil {
		c.errorf(q.ShowAt, "SHOW TIMEOUT MATCHES needs WITHIN: without it a partial match never times out")
	}

	// Within.
	if w := q.Within; w != nil {
		switch {
		case w.YearMonth():
			c.errorf(w.At, "WITHIN needs a day-time interval (DAY, HOUR, MINUTE, SECOND, MILLISECOND); Flink supports only constant intervals with millisecond resolution as time constraints")
		case w.Millis <= 0:
			c.errorf(w.At, "the WITHIN interval must be positive, found %s", w.String())
		}
	}

	// DEFINE.
	seenDef := map[string]Pos{}
	// a PATTERN variable without a DEFINE is the only one a DEFINE not in
	// PATTERN may be meant for; which of the two is misspelt is not
	// known (the DEFINE may be right and PATTERN wrong)
	var undefined []string
	for _, v := range c.varNames {
		if !slices.ContainsFunc(q.Defines, func(d Define) bool { return d.Var == v }) {
			undefined = append(undefined, v)
		}
	}
	for _, d := range q.Defines {
		if first, dup := seenDef[d.Var]; dup {
			c.errorf(d.At, "variable %s is defined twice in DEFINE (first at line %d:%d)", quoteName(d.Var), first.Line, first.Col)
		} else {
			seenDef[d.Var] = d.At
		}
		if _, ok := c.vars[d.Var]; !ok {
			near := ""
			if s := suggest(d.Var, undefined); s != "" {
				near = fmt.Sprintf(", whose %s has no DEFINE: one of the two is misspelt", quoteName(s))
			}
			c.errorf(d.At, "DEFINE for variable %s, which is not in PATTERN (%s)%s", quoteName(d.Var), strings.Join(c.varNames, ", "), near)
		}
		c.expr(d.Expr, exprCtx{define: true})
	}

	// MEASURES.
	partCols := map[string]bool{}
	for _, p := range q.PartitionBy {
		partCols[p.Name] = true
	}
	seenMeas := map[string]Pos{}
	for _, m := range q.Measures {
		if first, dup := seenMeas[m.Alias]; dup {
			c.errorf(m.AliasAt, "measure name %s is used twice (first at line %d:%d)", quoteName(m.Alias), first.Line, first.Col)
		} else {
			seenMeas[m.Alias] = m.AliasAt
		}
		if partCols[m.Alias] {
			c.errorf(m.AliasAt, "measure name %s is also a PARTITION BY column; the output would have two columns of that name", quoteName(m.Alias))
		}
		c.expr(m.Expr, exprCtx{})
	}

	// Outer select list: columns of the MATCH_RECOGNIZE output.
	if !q.SelectStar {
		var out []string
		outSet := map[string]bool{}
		for _, p := range q.PartitionBy {
			out = append(out, p.Name)
			outSet[p.Name] = true
		}
		for _, m := range q.Measures {
			out = append(out, m.Alias)
			outSet[m.Alias] = true
		}
		seenOut := map[string]Pos{}
		for _, s := range q.Select {
			if s.Qualifier != "" && s.Qualifier != q.Alias {
				if q.Alias == "" {
					c.errorf(s.At, "unknown qualifier %s: the MATCH_RECOGNIZE has no alias; write ') AS %s' after it or drop the qualifier", quoteName(s.Qualifier), quoteIdent(s.Qualifier))
				} else {
					c.errorf(s.At, "unknown qualifier %s: the MATCH_RECOGNIZE is aliased as %s", quoteName(s.Qualifier), quoteName(q.Alias))
				}
			}
			if !outSet[s.Name] {
				c.errorf(s.NameAt, "no field %s in the MATCH_RECOGNIZE output (PARTITION BY columns and measures)%s", quoteName(s.Name), didYouMean(s.Name, out))
			}
			name := s.OutputName()
			if first, dup := seenOut[name]; dup {
				c.errorf(s.At, "column %s is selected twice (first at line %d:%d); rename one with AS", quoteName(name), first.Line, first.Col)
			} else {
				seenOut[name] = s.At
			}
		}
	}
}

func (c *checker) setColumns(cols []string) {
	c.known = true
	c.cols = map[string]bool{}
	c.colList = nil
	for _, col := range cols {
		if !c.cols[col] {
			c.cols[col] = true
			c.colList = append(c.colList, col)
		}
	}
}

// projection checks a FROM (SELECT ...) subquery against the input
// columns and makes its output the columns seen by MATCH_RECOGNIZE.
func (c *checker) projection(pr *Projection) {
	check := func(e Expr) {
		Walk(e, func(x Expr) bool {
			if r, ok := x.(*ColumnRef); ok && c.known && !c.cols[r.Name] {
				c.errorf(r.At, "no field %s%s", quoteName(r.Name), didYouMean(r.Name, c.colList))
			}
			return true
		})
	}
	for _, it := range pr.Items {
		check(it.Expr)
	}
	if pr.Where != nil {
		check(pr.Where)
	}
	if pr.Star {
		return // the columns stay those of the table
	}
	var out []string
	seen := map[string]Pos{}
	for i, it := range pr.Items {
		name := it.OutputName(i)
		if first, dup := seen[name]; dup {
			c.errorf(it.At, "column %s appears twice in the subquery (first at line %d:%d); rename one with AS", quoteName(name), first.Line, first.Col)
		}
		seen[name] = it.At
		out = append(out, name)
	}
	c.setColumns(out)
}

// pattern checks the PATTERN clause against Flink's restrictions and
// records its variables.
func (c *checker) pattern() {
	q := c.q
	if q.Pattern == nil {
		return
	}
	// a variable may stand in several alternatives (PERMUTE repeats
	// every one), never twice on one path through the pattern
	var onPath func(t PatternTerm, seen map[string]*PatternVar)
	onPath = func(t PatternTerm, seen map[string]*PatternVar) {
		switch t := t.(type) {
		case *PatternVar:
			if first, dup := seen[t.Name]; dup {
				c.errorf(t.At, "variable %s appears twice in PATTERN (first at line %d:%d); Flink requires pattern variables to be unique", quoteName(t.Name), first.At.Line, first.At.Col)
				return
			}
			seen[t.Name] = t
			if _, known := c.vars[t.Name]; !known {
				c.vars[t.Name] = t
				c.varNames = append(c.varNames, t.Name)
			}
		case *PatternSeq:
			for _, it := range t.Items {
				onPath(it, seen)
			}
		case *PatternGroup:
			onPath(t.Inner, seen)
		case *PatternAlt:
			all := map[string]*PatternVar{}
			for _, a := range t.Alts {
				branch := maps.Clone(seen)
				onPath(a, branch)
				for k, v := range branch {
					if _, ok := all[k]; !ok {
						all[k] = v
					}
				}
			}
			maps.Copy(seen, all)
		}
	}
	onPath(q.Pattern, map[string]*PatternVar{})
	var walk func(t PatternTerm, inGroup bool)
	walk = func(t PatternTerm, inGroup bool) {
		switch t := t.(type) {
		case *PatternVar:
			if qu := t.Quant; inGroup && !qu.IsOne() && !(qu.Min == 0 && qu.Max == 1) {
				// the automaton's loops and times inside group patterns keep
				// or lose partial matches the standard does not
				c.errorf(qu.At, "quantifier '%s' on %s inside a quantified group is not supported; inside a group a variable is single or optional ('?')", qu.String(), quoteName(t.Name))
			}
		case *PatternSeq:
			for _, it := range t.Items {
				walk(it, inGroup)
			}
		case *PatternGroup:
			// a group runs as Flink's group pattern, which cannot be
			// greedy: it would end at the first row the rest accepts
			if qu := t.Quant; inGroup {
				// not what the reference checks the engine's groups against
				c.errorf(t.At, "a quantified group inside a quantified group is not supported")
			} else if Greedy(qu) {
				c.errorf(t.At, "greedy quantifier '%s' on a group is not supported (a group pattern cannot be greedy); make it reluctant ('%s?')", qu.String(), qu.String())
			} else if minOf(t.Inner) == 0 {
				// an iteration without a row: a loop would never end, and
				// what it counts for differs between engines
				c.errorf(t.At, "group (%s) can match no rows, so it cannot be quantified ('%s'); make one of its variables not optional", t.Inner.body(), qu.String())
			}
			walk(t.Inner, true)
		case *PatternAlt:
			var empty *PatternSeq
			for _, a := range t.Alts {
				walk(a, inGroup)
				c.sequenceRules(a.Items, false)
				if minOf(a) > 0 {
					continue
				}
				if empty != nil {
					// the automaton would find the match without rows
					// here once per such alternative
					c.errorf(a.At, "alternatives (%s) and (%s) can both match no rows; make at most one of them optional", empty.String(), a.String())
				}
				empty = a
			}
		}
	}
	walk(q.Pattern, false)

	items := q.Pattern.Items
	if len(items) == 0 {
		return
	}
	allOptional := true
	for _, it := range items {
		if minOf(it) > 0 {
			allOptional = false
		}
	}
	if allOptional {
		c.errorf(q.Pattern.At, "PATTERN (%s) can match no rows at all; Flink requires at least one variable that is not optional", q.Pattern.body())
	}
	c.sequenceRules(items, true)
}

// sequenceRules checks the rules on neighbours in one sequence: nothing
// optional right after a greedy variable, no greedy variable at the end
// (last: of the whole pattern, else of an alternative).
func (c *checker) sequenceRules(items []PatternTerm, last bool) {
	for i := 1; i < len(items); i++ {
		// Flink refuses optional() after a greedy stage and compiles
		// times(0, n) there into an automaton that never leaves the loop
		p, ok := items[i-1].(*PatternVar)
		if !ok || !Greedy(p.Quant) {
			continue
		}
		switch v := items[i].(type) {
		case *PatternVar:
			if v.Quant.Min == 0 {
				c.errorf(v.Quant.At, "optional %s ('%s') right after the greedy quantifier '%s' on %s is not supported by Flink (an optional pattern cannot follow a greedy one); make %s reluctant ('%s?') or %s not optional",
					quoteName(v.Name), v.Quant.String(), p.Quant.String(), quoteName(p.Name), quoteName(p.Name), p.Quant.String(), quoteName(v.Name))
			}
		case *PatternGroup:
			if v.Quant.Min == 0 {
				c.errorf(v.At, "optional group ('%s') right after the greedy quantifier '%s' on %s is not supported by Flink (an optional pattern cannot follow a greedy one); make %s reluctant ('%s?') or the group not optional",
					v.Quant.String(), p.Quant.String(), quoteName(p.Name), quoteName(p.Name), p.Quant.String())
			}
		case *PatternAlt:
			// the same automaton: the loop is left only for a row the
			// alternative takes, so skipping its optional start never ends
			// the match
			for _, a := range v.Alts {
				if startsOptional(a) {
					c.errorf(a.At, "alternative (%s), which starts with an optional term, right after the greedy quantifier '%s' on %s is not supported (an optional pattern cannot follow a greedy one); make %s reluctant ('%s?') or the alternative's start not optional",
						a.String(), p.Quant.String(), quoteName(p.Name), quoteName(p.Name), p.Quant.String())
				}
			}
		}
	}
	if len(items) == 0 {
		return
	}
	if v, ok := items[len(items)-1].(*PatternVar); ok {
		qu := v.Quant
		if Greedy(qu) && last {
			c.errorf(qu.At, "greedy quantifier '%s' on %s, the last variable of PATTERN, is not supported by Flink (greedy quantifiers are not allowed as the last element of a pattern); make it reluctant ('%s?') or end the pattern with a single variable", qu.String(), quoteName(v.Name), qu.String())
		} else if Greedy(qu) {
			// the automaton's greedy loop would keep the row it refuses
			// from every alternative, not only its own
			c.errorf(qu.At, "greedy quantifier '%s' on %s, the last variable of an alternative, is not supported; make it reluctant ('%s?') or end the alternative with a single variable", qu.String(), quoteName(v.Name), qu.String())
		}
	}
}

// Greedy reports whether q is greedy in Flink's sense: a loop or a range
// not written reluctant ('?' and {n} have no greedy property).
func Greedy(q Quantifier) bool { return !q.Reluctant && q.Min != q.Max && !(q.Min == 0 && q.Max == 1) }

// startsOptional reports whether a term may match without its first
// element taking a row: its first variable or group optional, or an
// alternative that does.
func startsOptional(t PatternTerm) bool {
	switch t := t.(type) {
	case *PatternVar:
		return t.Quant.Min == 0
	case *PatternGroup:
		return t.Quant.Min == 0 || startsOptional(t.Inner)
	case *PatternSeq:
		return len(t.Items) == 0 || startsOptional(t.Items[0])
	case *PatternAlt:
		for _, a := range t.Alts {
			if startsOptional(a) {
				return true
			}
		}
	}
	return false
}

// minOf is the least number of rows a term matches.
func minOf(t PatternTerm) int {
	switch t := t.(type) {
	case *PatternVar:
		return t.Quant.Min
	case *PatternSeq:
		n := 0
		for _, it := range t.Items {
			n += minOf(it)
		}
		return n
	case *PatternGroup:
		return t.Quant.Min * minOf(t.Inner)
	case *PatternAlt:
		n := -1
		for _, a := range t.Alts {
			if m := minOf(a); n < 0 || m < n {
				n = m
			}
		}
		return max(n, 0)
	}
	return 0
}

// subsetClause checks SUBSET: new names over pattern variables.
func (c *checker) subsetClause() {
	c.subsets = map[string]bool{}
	for _, s := range c.q.Subsets {
		switch _, isVar := c.vars[s.Name]; {
		case isVar:
			c.errorf(s.At, "SUBSET %s has the name of a pattern variable", quoteName(s.Name))
		case c.subsets[s.Name]:
			c.errorf(s.At, "SUBSET %s is defined twice", quoteName(s.Name))
		}
		c.subsets[s.Name] = true
		for i, v := range s.Vars {
			c.variable(v, s.VarsAt[i])
		}
	}
}

// isVar reports whether name is a pattern or union variable.
func (c *checker) isVar(name string) bool {
	_, ok := c.vars[name]
	return ok || c.subsets[name]
}

// variable reports name if it is not a pattern variable.
func (c *checker) variable(name string, at Pos) bool {
	if _, ok := c.vars[name]; ok {
		return true
	}
	c.errorf(at, "variable %s is not defined in PATTERN (%s)%s", quoteName(name), strings.Join(c.varNames, ", "), didYouMean(name, c.varNames))
	return false
}

// column reports name if the columns are known and it is not one of them.
func (c *checker) column(name string, at Pos, extra string) {
	if !c.known || c.cols[name] {
		return
	}
	c.errorf(at, "no field %s%s%s", quoteName(name), extra, didYouMean(name, c.colList))
}

type exprCtx struct {
	define bool  // in DEFINE (else MEASURES)
	nav    *Call // innermost enclosing navigation
	agg    *Call // enclosing aggregate
}

func (c *checker) expr(e Expr, ctx exprCtx) {
	switch e := e.(type) {
	case nil:
		return
	case *ColumnRef:
		c.columnRef(e)
		return
	case *Unary:
		if (e.Op == "FINAL" || e.Op == "RUNNING") && ctx.define {
			c.errorf(e.At, "%s cannot be used in DEFINE", e.Op)
		}
	case *Call:
		c.call(e, &ctx)
	}
	for _, ch := range Children(e) {
		c.expr(ch, ctx)
	}
}

func (c *checker) columnRef(r *ColumnRef) {
	if r.Var == "" {
		if _, isVar := c.vars[r.Name]; isVar && c.known && !c.cols[r.Name] && len(c.colList) > 0 {
			c.errorf(r.At, "no field %s: %s is a pattern variable; name one of its columns, e.g. %s.%s", quoteName(r.Name), quoteName(r.Name), quoteIdent(r.Name), quoteIdent(c.colList[0]))
			return
		}
		c.column(r.Name, r.NameAt, "")
		return
	}
	if c.isVar(r.Var) {
		c.column(r.Name, r.NameAt, "")
		return
	}
	if c.known && c.cols[r.Var] {
		// A nested field of a ROW-typed column, not a pattern variable.
		r.Fields = append([]string{r.Name}, r.Fields...)
		r.Name, r.NameAt, r.Var = r.Var, r.At, ""
		return
	}
	c.variable(r.Var, r.At)
}

var fixedArity = map[string][2]int{
	"SUM": {1, 1}, "AVG": {1, 1}, "MIN": {1, 1}, "MAX": {1, 1},
	"STDDEV_POP": {1, 1}, "STDDEV_SAMP": {1, 1}, "VAR_POP": {1, 1}, "VAR_SAMP": {1, 1},
	"STDDEV": {1, 1}, "VARIANCE": {1, 1}, "COLLECT": {1, 1}, "LISTAGG": {1, 2},
	"MAX_BY": {2, 2}, "MIN_BY": {2, 2}, "ARBITRARY": {1, 1},
	"COUNT":          {0, 1},
	"CLASSIFIER":     {0, 0},
	"MATCH_PROCTIME": {0, 0},
	"MATCH_ROWTIME":  {0, 1},
	"PREV":           {1, 2}, "NEXT": {1, 2}, "FIRST": {1, 2}, "LAST": {1, 2},
}

// call checks a function call in its context and updates ctx for its
// arguments.
func (c *checker) call(e *Call, ctx *exprCtx) {
	if ar, ok := fixedArity[e.Name]; ok && !e.Star {
		if n := len(e.Args); n < ar[0] || n > ar[1] {
			c.errorf(e.At, "%s takes %s, found %d", e.Name, arityText(e.Name, ar), n)
		}
	}
	if e.Star && e.Name != "COUNT" {
		c.errorf(e.At, "%s(*) is not allowed; only COUNT takes *", e.Name)
	}
	if e.StarVar != "" && !c.subsets[e.StarVar] {
		c.variable(e.StarVar, e.StarAt)
	}
	if e.Name == "COUNT" && !e.Star && len(e.Args) == 0 {
		c.errorf(e.At, "COUNT needs an argument or *: COUNT(*) or COUNT(A.col)")
	}
	switch {
	case e.IsNavigation():
		if e.Distinct {
			c.errorf(e.At, "DISTINCT is not allowed in %s", e.Name)
		}
		if len(e.Args) == 2 {
			if l, ok := e.Args[1].(*Literal); !ok || l.Kind != LitInt || l.Int < 0 {
				c.errorf(e.Args[1].Pos(), "the offset of %s must be a non-negative integer literal, found %s", e.Name, e.Args[1].String())
			}
		}
		if ctx.agg != nil {
			c.errorf(e.At, "%s cannot be used inside the aggregate %s", e.Name, ctx.agg.Name)
		}
		switch e.Name {
		case "PREV", "NEXT":
			if e.Name == "NEXT" && ctx.define {
				c.errorf(e.At, "NEXT cannot be used in DEFINE: it reads a row after the current one, which a stream has not seen yet (NEXT may be used in MEASURES)")
			}
			if ctx.nav != nil {
				c.errorf(e.At, "%s cannot be nested inside %s", e.Name, ctx.nav.Name)
			}
			if len(e.Args) > 0 {
				// FIRST/LAST may only be the whole argument: it picks the
				// row PREV/NEXT counts from (PREV(FIRST(A.price), 2))
				inner, whole := e.Args[0].(*Call)
				whole = whole && (inner.Name == "FIRST" || inner.Name == "LAST")
				Walk(e.Args[0], func(x Expr) bool {
					if l, ok := x.(*Call); ok && (l.Name == "FIRST" || l.Name == "LAST") && !(whole && l == inner) {
						c.errorf(l.At, "%s inside %s must be its whole first argument, as in %s(%s(A.col), 1)", l.Name, e.Name, e.Name, l.Name)
						return false
					}
					return true
				})
			}
			ctx.nav = e
		case "FIRST", "LAST":
			if ctx.nav != nil && !((ctx.nav.Name == "PREV" || ctx.nav.Name == "NEXT") && ctx.nav.Args[0] == Expr(e)) {
				c.errorf(e.At, "%s cannot be nested inside %s", e.Name, ctx.nav.Name)
			}
			ctx.nav = e
		}
		if len(e.Args) > 0 {
			c.singleVariable(e, e.Args[0], "navigation functions read the rows of one variable")
		}
	case e.IsAggregate():
		if e.Distinct {
			c.errorf(e.At, "DISTINCT aggregates are not supported by Flink's MATCH_RECOGNIZE")
		}
		if ctx.agg != nil {
			c.errorf(e.At, "aggregate %s cannot be nested inside the aggregate %s", e.Name, ctx.agg.Name)
		}
		if ctx.nav != nil {
			c.errorf(e.At, "aggregate %s cannot be used inside %s", e.Name, ctx.nav.Name)
		}
		ctx.agg = e
		// (all arguments together: MAX_BY(A.x, B.y) mixes two)
		c.singleVariable(e, e, "an aggregate runs over the rows of one variable")
	}
}

func arityText(name string, ar [2]int) string {
	switch {
	case IsNavigation(name):
		return "an expression and an optional offset: " + name + "(A.col [, n])"
	case ar[0] == ar[1] && ar[0] == 0:
		return "no arguments"
	case ar[0] == ar[1] && ar[0] == 1:
		return "one argument"
	case ar[0] == 0 && ar[1] == 1:
		return "at most one argument"
	}
	return fmt.Sprintf("%d to %d arguments", ar[0], ar[1])
}

// singleVariable reports arg if it refers to columns of more than one
// pattern variable.
func (c *checker) singleVariable(call *Call, arg Expr, why string) {
	var vs []string
	Walk(arg, func(x Expr) bool {
		if r, ok := x.(*ColumnRef); ok && r.Var != "" {
			if c.isVar(r.Var) && !slices.Contains(vs, r.Var) {
				vs = append(vs, r.Var)
			}
		}
		return true
	})
	if len(vs) > 1 {
		c.errorf(call.At, "%s(...) refers to more than one pattern variable (%s); %s", call.Name, strings.Join(vs, ", "), why)
	}
}

// quoteName quotes a name for a message: 'name'.
func quoteName(s string) string { return "'" + s + "'" }

// didYouMean returns ". Did you mean 'x'?" for the best candidate, or "".
func didYouMean(name string, cands []string) string {
	if s := suggest(name, cands); s != "" {
		return ". Did you mean " + quoteName(s) + "?"
	}
	return ""
}

// suggest returns the candidate closest to name: one equal but for case,
// else one within Damerau-Levenshtein distance 2 (and less than name's
// length); "" if none. Ties go to the earliest candidate.
func suggest(name string, cands []string) string {
	for _, c := range cands {
		if c != name && strings.EqualFold(c, name) {
			return c
		}
	}
	best, bestD := "", 3
	ln := strings.ToLower(name)
	n := utf8.RuneCountInString(name)
	for _, c := range cands {
		if c == name {
			continue
		}
		if d := distance(ln, strings.ToLower(c)); d < bestD && d < n {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the optimal-string-alignment (restricted Damerau-Levenshtein)
// distance between a and b, in runes.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		if a == b {
			return 0
		}
		return 1 << 20
	}
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
