package sql

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxDepth bounds the nesting of expressions and pattern groups. Deeper
// input is rejected with "expression nested too deeply", so that no input
// can exhaust the stack of the parser or of a tree walk over its result.
const MaxDepth = 200

// Parse parses one MATCH_RECOGNIZE query (an optional trailing semicolon
// is allowed). It checks the syntax and rejects constructs that Flink's
// MATCH_RECOGNIZE cannot run and that have no place in the AST
// (alternation, PERMUTE, anchors, exclusions, ALL ROWS PER MATCH). Name resolution and the remaining Flink rules are in
// Query.Check, which a caller should run before compiling the query.
//
// The error, if any, is an *Error.
func Parse(src string) (q *Query, err error) {
	toks, lerr := lex(src)
	if lerr != nil {
		lerr.Near = nearSnippet(src, lerr.Pos)
		return nil, lerr
	}
	p := &parser{src: src, toks: toks}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*Error)
			if !ok {
				panic(r)
			}
			q, err = nil, e
		}
	}()
	return p.query(), nil
}

// ParseExpr parses a single expression, as it would appear in DEFINE or
// MEASURES. It is meant for tests and tools.
func ParseExpr(src string) (e Expr, err error) {
	toks, lerr := lex(src)
	if lerr != nil {
		lerr.Near = nearSnippet(src, lerr.Pos)
		return nil, lerr
	}
	p := &parser{src: src, toks: toks}
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(*Error)
			if !ok {
				panic(r)
			}
			e, err = nil, pe
		}
	}()
	e = p.expr()
	if t := p.peek(); t.kind != tEOF {
		p.failAt(t, "unexpected %s after the expression", t.describe())
	}
	return e, nil
}

type parser struct {
	src   string
	toks  []token
	i     int
	depth int
}

// fail aborts parsing with an error at pos; Parse recovers it.
func (p *parser) fail(pos Pos, format string, args ...any) {
	panic(&Error{Pos: pos, Msg: fmt.Sprintf(format, args...), Near: nearSnippet(p.src, pos)})
}

func (p *parser) failAt(t token, format string, args ...any) {
	e := &Error{Pos: t.pos, Msg: fmt.Sprintf(format, args...)}
	if t.kind != tEOF {
		e.Near = nearSnippet(p.src, t.pos)
	}
	panic(e)
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) peekN(k int) token {
	if p.i+k < len(p.toks) {
		return p.toks[p.i+k]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) advance() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) acceptKw(kw string) bool {
	if p.peek().is(kw) {
		p.advance()
		return true
	}
	return false
}

func (p *parser) acceptOp(op string) bool {
	if p.peek().isOp(op) {
		p.advance()
		return true
	}
	return false
}

// expectKw consumes keyword kw or fails with "expected <what>, found ...".
func (p *parser) expectKw(kw, what string) token {
	t := p.peek()
	if !t.is(kw) {
		p.failAt(t, "expected %s, found %s", what, t.describe())
	}
	return p.advance()
}

func (p *parser) expectOp(op, what string) token {
	t := p.peek()
	if !t.isOp(op) {
		p.failAt(t, "expected %s, found %s", what, t.describe())
	}
	return p.advance()
}

// isName reports whether t can be a name: a quoted identifier or an
// unquoted one that is not reserved.
func isName(t token) bool {
	return t.kind == tQIdent || t.kind == tIdent && !isReserved(t.text)
}

// name consumes a name (column, variable, alias).
func (p *parser) name(what string) (string, Pos) {
	t := p.peek()
	if !isName(t) {
		p.failAt(t, "expected %s, found %s", what, t.describe())
	}
	p.advance()
	return t.text, t.pos
}

// alias consumes a name after AS, where a non-reserved keyword
// (MEASURES AS partition) cannot be read as anything else.
func (p *parser) alias(what string) (string, Pos) {
	if t := p.peek(); t.kind == tIdent && nonReserved[strings.ToUpper(t.text)] {
		p.advance()
		return t.text, t.pos
	}
	return p.name(what)
}

func (p *parser) enter() {
	p.depth++
	if p.depth > MaxDepth {
		p.failAt(p.peek(), "expression nested too deeply (more than %d levels)", MaxDepth)
	}
}

func (p *parser) leave() { p.depth-- }

// ---- query structure ----

func (p *parser) query() *Query {
	q := &Query{}
	q.At = p.expectKw("SELECT", "SELECT at the start of the query").pos
	if t := p.peek(); t.is("DISTINCT") || t.is("ALL") {
		p.failAt(t, "SELECT %s is not supported on MATCH_RECOGNIZE", strings.ToUpper(t.text))
	}
	p.selectList(q)
	p.expectKw("FROM", "',' or FROM after the select list")
	q.SourceAt = p.peek().pos
	if p.acceptOp("(") {
		q.Projection = p.projection()
		q.Source = q.Projection.Table
		p.expectOp(")", "')' to close the subquery in FROM")
	} else {
		q.Source, _ = p.name("a table name after FROM")
		if t := p.peek(); t.isOp(".") {
			p.failAt(t, "qualified table names are not supported; name the table without a catalog or database")
		}
	}
	mr := p.peek()
	if !mr.is("MATCH_RECOGNIZE") {
		p.failAt(mr, "expected MATCH_RECOGNIZE after the FROM source, found %s (only MATCH_RECOGNIZE queries are supported)", mr.describe())
	}
	p.advance()
	p.expectOp("(", "'(' after MATCH_RECOGNIZE")
	p.body(q, mr.pos)
	p.expectOp(")", "')' to close MATCH_RECOGNIZE (")
	if p.acceptKw("AS") {
		q.Alias, q.AliasAt = p.alias("an alias after AS")
	} else if isName(p.peek()) {
		q.Alias, q.AliasAt = p.name("an alias")
	}
	p.acceptOp(";")
	if t := p.peek(); t.kind != tEOF {
		for _, kw := range []string{"WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "UNION", "JOIN", "WINDOW"} {
			if t.is(kw) {
				what := strings.ToUpper(t.text)
				if what == "GROUP" || what == "ORDER" {
					what += " BY"
				}
				p.failAt(t, "%s after MATCH_RECOGNIZE is not supported; only SELECT ... FROM ... MATCH_RECOGNIZE (...) [AS alias]", what)
			}
		}
		if t.isOp(",") {
			p.failAt(t, "joins are not supported; the FROM clause must be a single MATCH_RECOGNIZE")
		}
		p.failAt(t, "unexpected %s after the end of the query", t.describe())
	}
	return q
}

// selectList parses the outer select list: * or columns of the
// MATCH_RECOGNIZE output.
func (p *parser) selectList(q *Query) {
	if p.acceptOp("*") {
		q.SelectStar = true
		return
	}
	for {
		t := p.peek()
		if !isName(t) && !(t.kind == tIdent && nonReserved[strings.ToUpper(t.text)]) {
			if t.is("FROM") {
				p.failAt(t, "expected a column or * after SELECT, found FROM")
			}
			p.failAt(t, "SELECT list: only columns of the MATCH_RECOGNIZE output (PARTITION BY columns and measures) can be selected; found %s", t.describe())
		}
		item := SelectItem{At: t.pos}
		item.Name, item.NameAt = p.alias("a column")
		if p.acceptOp(".") {
			if star := p.peek(); star.isOp("*") {
				if len(q.Select) > 0 || !p.peekN(1).is("FROM") {
					p.failAt(star, "%s.* must be the only item of the select list", quoteIdent(item.Name))
				}
				p.advance()
				q.SelectStar = true
				return
			}
			item.Qualifier = item.Name
			nt := p.peek()
			if nt.kind != tIdent && nt.kind != tQIdent {
				p.failAt(nt, "expected a column name after '%s.', found %s", item.Qualifier, nt.describe())
			}
			p.advance()
			item.Name, item.NameAt = nt.text, nt.pos
			if p.peek().isOp(".") {
				p.failAt(p.peek(), "SELECT list: select a measure, not a nested field; compute it in MEASURES")
			}
		}
		if t := p.peek(); t.isOp("(") || t.kind == tOp && !t.isOp(",") {
			p.fail(item.At, "SELECT list: only columns of the MATCH_RECOGNIZE output (PARTITION BY columns and measures) can be selected; compute expressions in MEASURES")
		}
		if p.acceptKw("AS") {
			item.Alias, item.AliasAt = p.alias("a column alias after AS")
		} else if isName(p.peek()) {
			item.Alias, item.AliasAt = p.name("a column alias")
		}
		q.Select = append(q.Select, item)
		if !p.listCommaOf(true, "FROM") {
			return
		}
	}
}

// listComma consumes a ',' between list items and reports whether it did.
// A ',' directly before a clause keyword, ')' or the end is an error.
func (p *parser) listComma(next ...string) bool { return p.listCommaOf(false, next...) }

// listCommaOf is listComma for a list whose items may be non-reserved
// keywords (names) when names is true.
func (p *parser) listCommaOf(names bool, next ...string) bool {
	c := p.peek()
	if !c.isOp(",") {
		return false
	}
	t := p.peekN(1)
	bad := t.kind == tEOF || t.isOp(")") || clauseRank(t) > 0 && !(names && t.kind == tIdent && nonReserved[strings.ToUpper(t.text)])
	for _, kw := range next {
		bad = bad || t.is(kw)
	}
	if bad {
		p.failAt(c, "unexpected ',' before %s", t.describe())
	}
	p.advance()
	return true
}

// projection parses SELECT ... FROM t [[AS] a] [WHERE ...] after FROM (.
func (p *parser) projection() *Projection {
	pr := &Projection{At: p.expectKw("SELECT", "SELECT in the subquery").pos}
	if p.acceptOp("*") {
		pr.Star = true
	} else {
		for {
			it := ProjItem{At: p.peek().pos, Expr: p.expr()}
			if p.acceptKw("AS") {
				it.Alias, it.AliasAt = p.alias("a column alias after AS")
			} else if isName(p.peek()) {
				it.Alias, it.AliasAt = p.name("a column alias")
			}
			pr.Items = append(pr.Items, it)
			if !p.listComma("FROM") {
				break
			}
		}
	}
	p.expectKw("FROM", "',' or FROM in the subquery")
	if t := p.peek(); t.isOp("(") {
		p.failAt(t, "nested subqueries are not supported; FROM (SELECT ... FROM table) is the deepest form")
	}
	pr.Table, pr.TableAt = p.name("a table name after FROM")
	if p.acceptKw("AS") {
		pr.TableAlias, _ = p.alias("a table alias after AS")
	} else if isName(p.peek()) {
		pr.TableAlias, _ = p.name("a table alias")
	}
	if p.acceptKw("WHERE") {
		pr.Where = p.expr()
	}
	if t := p.peek(); !t.isOp(")") {
		p.failAt(t, "expected ')' to close the subquery, found %s", t.describe())
	}
	// In a projection a qualifier is either the table (dropped) or a
	// column of ROW type (a nested field access).
	fix := func(e Expr) {
		Walk(e, func(x Expr) bool {
			if c, ok := x.(*ColumnRef); ok && c.Var != "" {
				if c.Var == pr.Table || c.Var == pr.TableAlias {
					c.Var = ""
				} else {
					c.Fields = append([]string{c.Name}, c.Fields...)
					c.Name, c.NameAt = c.Var, c.At
					c.Var = ""
				}
			}
			return true
		})
	}
	for _, it := range pr.Items {
		fix(it.Expr)
	}
	if pr.Where != nil {
		fix(pr.Where)
	}
	return pr
}

var clauseNames = [...]string{"", "PARTITION BY", "ORDER BY", "MEASURES", "ONE ROW PER MATCH", "AFTER MATCH SKIP", "PATTERN", "SUBSET", "DEFINE"}

// clauseRank returns the position of the MATCH_RECOGNIZE clause that t
// starts in the clause order, 0 if t starts none.
func clauseRank(t token) int {
	switch {
	case t.is("PARTITION"):
		return 1
	case t.is("ORDER"):
		return 2
	case t.is("MEASURES"):
		return 3
	case t.is("ONE"), t.is("ALL"):
		return 4
	case t.is("AFTER"):
		return 5
	case t.is("PATTERN"):
		return 6
	case t.is("SUBSET"):
		return 7
	case t.is("DEFINE"):
		return 8
	}
	return 0
}

// body parses the clauses inside MATCH_RECOGNIZE ( ... ).
func (p *parser) body(q *Query, mrAt Pos) {
	last := 0
	for {
		t := p.peek()
		if t.isOp(")") || t.kind == tEOF {
			break
		}
		rank := clauseRank(t)
		if rank == 0 {
			if t.is("WITHIN") {
				p.failAt(t, "WITHIN must directly follow PATTERN (...)")
			}
			p.failAt(t, "expected a MATCH_RECOGNIZE clause (PARTITION BY, ORDER BY, MEASURES, ONE ROW PER MATCH, AFTER MATCH SKIP, PATTERN, DEFINE), found %s", t.describe())
		}
		if rank == last {
			p.failAt(t, "duplicate %s clause", clauseNames[rank])
		}
		if rank < last {
			p.failAt(t, "%s must come before %s; the clause order is PARTITION BY, ORDER BY, MEASURES, ONE ROW PER MATCH, AFTER MATCH SKIP, PATTERN, DEFINE", clauseNames[rank], clauseNames[last])
		}
		last = rank
		switch rank {
		case 1:
			p.advance()
			p.expectKw("BY", "BY after PARTITION")
			for {
				var c Column
				c.Name, c.At = p.name("a column in PARTITION BY")
				p.noQualifier("PARTITION BY")
				q.PartitionBy = append(q.PartitionBy, c)
				if !p.listComma() {
					break
				}
			}
		case 2:
			p.advance()
			p.expectKw("BY", "BY after ORDER")
			for {
				var o OrderItem
				o.Name, o.At = p.name("a column in ORDER BY")
				p.noQualifier("ORDER BY")
				if p.acceptKw("DESC") {
					o.Desc = true
				} else {
					p.acceptKw("ASC")
				}
				if t := p.peek(); t.is("NULLS") {
					p.failAt(t, "NULLS FIRST/LAST is not supported in the ORDER BY of MATCH_RECOGNIZE")
				}
				q.OrderBy = append(q.OrderBy, o)
				if !p.listComma() {
					break
				}
			}
		case 3:
			p.advance()
			p.measures(q)
		case 4:
			if t.is("ALL") {
				p.failAt(t, "ALL ROWS PER MATCH is not supported by Flink's MATCH_RECOGNIZE; use ONE ROW PER MATCH")
			}
			p.advance()
			p.expectKw("ROW", "ROW PER MATCH after ONE")
			p.expectKw("PER", "PER MATCH after ONE ROW")
			p.expectKw("MATCH", "MATCH after ONE ROW PER")
			q.OneRowPerMatch = true
			if s := p.peek(); s.is("SHOW") {
				p.advance()
				p.expectKw("TIMEOUT", "TIMEOUT MATCHES after SHOW (ONE ROW PER MATCH SHOW TIMEOUT MATCHES)")
				p.expectKw("MATCHES", "MATCHES after SHOW TIMEOUT")
				q.ShowTimeouts, q.ShowAt = true, s.pos
			}
		case 5:
			p.skipClause(q)
		case 6:
			p.advance()
			open := p.expectOp("(", "'(' after PATTERN")
			q.Pattern = p.patternSeq(open.pos)
			p.expectOp(")", "')' to close PATTERN (")
			if w := p.peek(); w.is("WITHIN") {
				p.advance()
				if !p.peek().is("INTERVAL") {
					p.failAt(p.peek(), "expected INTERVAL after WITHIN (e.g. WITHIN INTERVAL '10' SECOND), found %s", p.peek().describe())
				}
				q.Within = p.interval()
			}
		case 7:
			p.advance()
			for {
				s := Subset{}
				s.Name, s.At = p.name("a union variable name in SUBSET")
				p.expectOp("=", "'=' after the SUBSET name")
				p.expectOp("(", "'(' and the variables of SUBSET "+s.Name)
				for {
					v, at := p.name("a pattern variable in SUBSET")
					s.Vars, s.VarsAt = append(s.Vars, v), append(s.VarsAt, at)
					if !p.acceptOp(",") {
						break
					}
				}
				p.expectOp(")", "')' to close SUBSET "+s.Name+" = (")
				q.Subsets = append(q.Subsets, s)
				if !p.listComma() {
					break
				}
			}
		case 8:
			p.advance()
			p.defines(q)
		}
	}
	if q.OrderBy == nil {
		p.fail(mrAt, "MATCH_RECOGNIZE has no ORDER BY; Flink requires ORDER BY with the time attribute (e.g. ORDER BY rowtime)")
	}
	if q.Pattern == nil {
		p.fail(mrAt, "MATCH_RECOGNIZE has no PATTERN clause")
	}
	if q.Defines == nil {
		p.fail(mrAt, "MATCH_RECOGNIZE has no DEFINE clause; Flink requires DEFINE with at least one variable")
	}
}

func (p *parser) noQualifier(clause string) {
	if t := p.peek(); t.isOp(".") {
		p.failAt(t, "%s takes plain column names, without a qualifier", clause)
	}
}

func (p *parser) measures(q *Query) {
	for {
		m := Measure{At: p.peek().pos}
		m.Expr = p.expr()
		t := p.peek()
		if !t.is("AS") {
			if isName(t) {
				p.failAt(t, "missing AS before the measure name %s", quoteName(t.text))
			}
			p.failAt(t, "expected AS and a name after the measure expression, found %s", t.describe())
		}
		p.advance()
		m.Alias, m.AliasAt = p.alias("a measure name after AS")
		q.Measures = append(q.Measures, m)
		if p.listComma() {
			continue
		}
		if t := p.peek(); !t.isOp(")") && clauseRank(t) == 0 && t.kind != tEOF {
			p.failAt(t, "expected ',' or the next clause after measure %s, found %s", quoteName(m.Alias), t.describe())
		}
		return
	}
}

func (p *parser) defines(q *Query) {
	for {
		var d Define
		d.Var, d.At = p.name("a pattern variable in DEFINE")
		p.expectKw("AS", "AS after the variable "+quoteName(d.Var)+" in DEFINE")
		d.Expr = p.expr()
		q.Defines = append(q.Defines, d)
		if p.listComma() {
			continue
		}
		if t := p.peek(); !t.isOp(")") {
			if clauseRank(t) > 0 {
				p.failAt(t, "DEFINE must be the last clause of MATCH_RECOGNIZE, found %s after it", t.describe())
			}
			p.failAt(t, "expected ',' or ')' after the definition of %s, found %s", quoteName(d.Var), t.describe())
		}
		return
	}
}

func (p *parser) skipClause(q *Query) {
	at := p.advance().pos // AFTER
	p.expectKw("MATCH", "MATCH after AFTER")
	p.expectKw("SKIP", "SKIP after AFTER MATCH")
	s := SkipClause{At: at, Explicit: true}
	switch t := p.peek(); {
	case t.is("PAST"):
		p.advance()
		p.expectKw("LAST", "LAST ROW after SKIP PAST")
		p.expectKw("ROW", "ROW after SKIP PAST LAST")
		s.Kind = SkipPastLastRow
	case t.is("TO"):
		p.advance()
		n := p.peek()
		switch {
		case n.is("NEXT") && p.peekN(1).is("ROW"):
			p.advance()
			p.advance()
			s.Kind = SkipToNextRow
		case (n.is("FIRST") || n.is("LAST")) && isName(p.peekN(1)):
			p.advance()
			s.Kind = SkipToLast
			if n.is("FIRST") {
				s.Kind = SkipToFirst
			}
			s.Var, s.VarAt = p.name("a pattern variable")
		case isName(n):
			s.Kind = SkipToLast
			s.Var, s.VarAt = p.name("a pattern variable")
		default:
			p.failAt(n, "expected NEXT ROW, FIRST var, LAST var or a variable after SKIP TO, found %s", n.describe())
		}
	default:
		p.failAt(t, "expected PAST LAST ROW or TO after AFTER MATCH SKIP, found %s", t.describe())
	}
	q.Skip = s
}

// ---- PATTERN ----

// patternSeq parses a sequence, or an alternation of sequences, up to
// ')' (not consumed). open is the position of the '(' the sequence
// started at.
func (p *parser) patternSeq(open Pos) *PatternSeq {
	return p.patternAlts(open, "(", false)
}

// patternAlts parses alternatives separated by '|' up to ')' (or ',' in a
// PERMUTE list); an alternation becomes a sequence holding one
// *PatternAlt.
func (p *parser) patternAlts(open Pos, opener string, inList bool) *PatternSeq {
	var alts []*PatternSeq
	for {
		seq := p.patternConcat(open, opener, inList)
		alts = append(alts, seq)
		t := p.peek()
		if !t.isOp("|") {
			break
		}
		p.advance()
		open, opener = t.pos, "|"
	}
	if len(alts) == 1 {
		return alts[0]
	}
	return &PatternSeq{At: alts[0].At, Items: []PatternTerm{&PatternAlt{At: alts[0].At, Alts: alts}}}
}

// patternConcat parses a concatenation up to ')', '|' or (inList) ','.
// open is where the sequence started ('(', '|' or ','), for errors.
func (p *parser) patternConcat(open Pos, opener string, inList bool) *PatternSeq {
	seq := &PatternSeq{At: p.peek().pos}
	for {
		t := p.peek()
		if t.isOp(")") || t.isOp("|") || t.kind == tEOF || inList && t.isOp(",") {
			break
		}
		term := p.patternFactor()
		if s, ok := term.(*PatternSeq); ok {
			seq.Items = append(seq.Items, s.Items...)
		} else {
			seq.Items = append(seq.Items, term)
		}
	}
	if len(seq.Items) == 0 {
		if t := p.peek(); t.isOp("|") {
			p.failAt(t, "empty alternative before '|': each alternative must hold at least one pattern variable")
		}
		if opener == "(" {
			p.fail(open, "empty pattern: '(' must hold at least one pattern variable")
		}
		if opener == "," {
			p.fail(open, "empty PERMUTE term after ',': it must hold at least one pattern variable")
		}
		p.fail(open, "empty alternative after '%s': it must hold at least one pattern variable", opener)
	}
	return seq
}

// maxPermute bounds the terms of PERMUTE: n terms are n! alternatives.
const maxPermute = 5

// permute parses PERMUTE(term, ...) (at PERMUTE) into the alternation of
// the terms' permutations, in lexicographic order of their positions in
// the list, as the standard orders them.
func (p *parser) permute() PatternTerm {
	at := p.advance().pos
	p.expectOp("(", "'(' after PERMUTE")
	var terms []*PatternSeq
	open, opener := p.peek().pos, "("
	for {
		terms = append(terms, p.patternAlts(open, opener, true))
		t := p.peek()
		if !t.isOp(",") {
			break
		}
		p.advance()
		open, opener = t.pos, ","
	}
	p.expectOp(")", "')' to close PERMUTE")
	if len(terms) > maxPermute {
		p.fail(at, "PERMUTE of %d terms is not supported (at most %d: n terms make n! alternatives)", len(terms), maxPermute)
	}
	alt := &PatternAlt{At: at}
	for _, t := range terms {
		alt.Permute = append(alt.Permute, t)
	}
	used := make([]bool, len(terms))
	var items []PatternTerm
	var rec func()
	rec = func() {
		if len(items) > 0 && countTrue(used) == len(terms) {
			alt.Alts = append(alt.Alts, &PatternSeq{At: at, Items: append([]PatternTerm(nil), items...)})
			return
		}
		for i, t := range terms {
			if used[i] {
				continue
			}
			used[i] = true
			n := len(items)
			items = append(items, t.Items...)
			rec()
			items = items[:n]
			used[i] = false
		}
	}
	rec()
	if len(alt.Alts) == 1 {
		return alt.Alts[0] // PERMUTE(A) is A
	}
	return alt
}

func countTrue(b []bool) int {
	n := 0
	for _, x := range b {
		if x {
			n++
		}
	}
	return n
}

func (p *parser) patternFactor() PatternTerm {
	t := p.peek()
	var term PatternTerm
	switch {
	case t.isOp("("):
		p.enter()
		p.advance()
		inner := p.patternSeq(t.pos)
		p.expectOp(")", "')' to close the pattern group")
		p.leave()
		q, ok := p.quantifier()
		if !ok {
			term = inner // flattened by the caller
			break
		}
		if len(inner.Items) == 1 {
			if v, isVar := inner.Items[0].(*PatternVar); isVar && v.Quant.IsOne() {
				v.Quant = q
				term = v
				break
			}
		}
		term = &PatternGroup{At: t.pos, Inner: inner, Quant: q}
	case t.is("PERMUTE") && p.peekN(1).isOp("("):
		p.enter()
		term = p.permute()
		p.leave()
		if q, ok := p.quantifier(); ok {
			inner, isSeq := term.(*PatternSeq)
			if !isSeq {
				inner = &PatternSeq{At: t.pos, Items: []PatternTerm{term}}
			}
			term = &PatternGroup{At: t.pos, Inner: inner, Quant: q}
		}
	case t.isOp("^") || t.isOp("$"):
		p.failAt(t, "anchor '%s' in PATTERN is not supported by Flink's MATCH_RECOGNIZE", t.text)
	case t.isOp("{") && p.peekN(1).isOp("-"):
		p.failAt(t, "exclusion '{- ... -}' in PATTERN is not supported by Flink's MATCH_RECOGNIZE")
	case isName(t):
		p.advance()
		v := &PatternVar{At: t.pos, Name: t.text, Quant: One()}
		if q, ok := p.quantifier(); ok {
			v.Quant = q
		}
		term = v
	case t.isOp("*") || t.isOp("+") || t.isOp("?") || t.isOp("{"):
		p.failAt(t, "quantifier '%s' must follow a pattern variable or a group", t.text)
	default:
		p.failAt(t, "expected a pattern variable or ')', found %s", t.describe())
	}
	if n := p.peek(); n.isOp("*") || n.isOp("+") || n.isOp("?") || n.isOp("{") && !p.peekN(1).isOp("-") {
		p.failAt(n, "a quantifier cannot follow another quantifier; put the quantified term in parentheses")
	}
	return term
}

// maxQuant bounds the numbers in {n,m}.
const maxQuant = 1 << 20

// quantifier parses an optional quantifier and its reluctant '?'.
func (p *parser) quantifier() (Quantifier, bool) {
	t := p.peek()
	q := Quantifier{At: t.pos}
	switch {
	case t.isOp("*"):
		p.advance()
		q.Min, q.Max = 0, -1
	case t.isOp("+"):
		p.advance()
		q.Min, q.Max = 1, -1
	case t.isOp("?"):
		p.advance()
		q.Min, q.Max = 0, 1
	case t.isOp("{") && !p.peekN(1).isOp("-"):
		p.advance()
		num := func() (int, bool) {
			n := p.peek()
			if n.kind != tNumber {
				return 0, false
			}
			v, err := strconv.Atoi(n.text)
			if err != nil || v > maxQuant {
				if strings.ContainsAny(n.text, ".eE") {
					p.failAt(n, "quantifier bounds must be integers, found %s", n.text)
				}
				p.failAt(n, "quantifier bound %s is too large (at most %d)", n.text, maxQuant)
			}
			p.advance()
			return v, true
		}
		lo, hasLo := num()
		comma := p.acceptOp(",")
		hi, hasHi := num()
		if c := p.peek(); !c.isOp("}") {
			p.failAt(c, "expected '}' to close the quantifier {n}, {n,}, {n,m} or {,m}, found %s", c.describe())
		}
		p.advance()
		switch {
		case hasLo && !comma:
			q.Min, q.Max = lo, lo
		case hasLo && comma && !hasHi:
			q.Min, q.Max = lo, -1
		case hasLo && comma && hasHi:
			q.Min, q.Max = lo, hi
		case !hasLo && comma && hasHi:
			q.Min, q.Max = 0, hi
		default:
			p.fail(t.pos, "empty quantifier: write {n}, {n,}, {n,m} or {,m}")
		}
		if q.Max >= 0 && q.Min > q.Max {
			p.fail(t.pos, "quantifier {%d,%d}: the lower bound is greater than the upper bound", q.Min, q.Max)
		}
		if q.Max == 0 {
			p.fail(t.pos, "quantifier %s matches no rows", q.String())
		}
	default:
		return Quantifier{}, false
	}
	if p.acceptOp("?") {
		q.Reluctant = true
	}
	return q, true
}

// ---- expressions ----

func (p *parser) expr() Expr {
	p.enter()
	defer p.leave()
	return p.or()
}

func (p *parser) or() Expr {
	l := p.and()
	n := 0
	for p.peek().is("OR") {
		op := p.advance()
		p.enter()
		n++
		r := p.and()
		l = &Binary{At: l.Pos(), OpAt: op.pos, Op: "OR", L: l, R: r}
	}
	p.depth -= n
	return l
}

func (p *parser) and() Expr {
	l := p.not()
	n := 0
	for p.peek().is("AND") {
		op := p.advance()
		p.enter()
		n++
		r := p.not()
		l = &Binary{At: l.Pos(), OpAt: op.pos, Op: "AND", L: l, R: r}
	}
	p.depth -= n
	return l
}

func (p *parser) not() Expr {
	if t := p.peek(); t.is("NOT") {
		p.advance()
		p.enter()
		x := p.not()
		p.leave()
		return &Unary{At: t.pos, Op: "NOT", X: x}
	}
	return p.predicate()
}

var comparisons = map[string]string{"=": "=", "<>": "<>", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}

// predicate parses comparisons and the postfix predicates IS, BETWEEN,
// IN and LIKE, all at one precedence level, left-associative.
func (p *parser) predicate() Expr {
	l := p.additive()
	n := 0
	defer func() { p.depth -= n }()
	for {
		t := p.peek()
		if op, ok := comparisons[t.text]; ok && t.kind == tOp {
			p.advance()
			p.enter()
			n++
			r := p.additive()
			l = &Binary{At: l.Pos(), OpAt: t.pos, Op: op, L: l, R: r}
			continue
		}
		not := false
		if t.is("NOT") {
			n1 := p.peekN(1)
			if !n1.is("BETWEEN") && !n1.is("IN") && !n1.is("LIKE") {
				return l
			}
			p.advance()
			not = true
			t = p.peek()
		}
		switch {
		case t.is("IS") && !not:
			p.advance()
			isNot := p.acceptKw("NOT")
			w := p.peek()
			switch {
			case w.is("NULL"), w.is("UNKNOWN"):
				p.advance()
				l = &IsNull{At: l.Pos(), X: l, Not: isNot}
			case w.is("TRUE"), w.is("FALSE"):
				p.advance()
				l = &IsBool{At: l.Pos(), X: l, Not: isNot, Value: w.is("TRUE")}
			case w.is("DISTINCT"):
				p.advance()
				p.expectKw("FROM", "FROM after IS DISTINCT")
				p.enter()
				n++
				r := p.additive()
				op := "IS DISTINCT FROM"
				if isNot {
					op = "IS NOT DISTINCT FROM"
				}
				l = &Binary{At: l.Pos(), OpAt: t.pos, Op: op, L: l, R: r}
			default:
				p.failAt(w, "expected NULL, TRUE, FALSE or DISTINCT FROM after IS%s, found %s", map[bool]string{true: " NOT"}[isNot], w.describe())
			}
		case t.is("BETWEEN"):
			p.advance()
			b := &Between{At: l.Pos(), X: l, Not: not}
			if p.acceptKw("SYMMETRIC") {
				b.Symmetric = true
			} else {
				p.acceptKw("ASYMMETRIC")
			}
			p.enter()
			n++
			b.Lo = p.additive()
			p.expectKw("AND", "AND in BETWEEN ... AND ...")
			b.Hi = p.additive()
			l = b
		case t.is("IN"):
			p.advance()
			in := &In{At: l.Pos(), X: l, Not: not}
			p.expectOp("(", "'(' after IN")
			if s := p.peek(); s.is("SELECT") {
				p.failAt(s, "subqueries are not supported in IN")
			}
			p.enter()
			n++
			for {
				in.List = append(in.List, p.expr())
				if !p.acceptOp(",") {
					break
				}
			}
			p.expectOp(")", "',' or ')' in the IN list")
			l = in
		case t.is("LIKE"):
			p.advance()
			lk := &Like{At: l.Pos(), X: l, Not: not}
			p.enter()
			n++
			lk.Pattern = p.additive()
			if p.acceptKw("ESCAPE") {
				lk.Escape = p.additive()
			}
			l = lk
		default:
			return l
		}
	}
}

func (p *parser) additive() Expr {
	l := p.multiplicative()
	n := 0
	for t := p.peek(); t.isOp("+") || t.isOp("-"); t = p.peek() {
		p.advance()
		p.enter()
		n++
		r := p.multiplicative()
		l = &Binary{At: l.Pos(), OpAt: t.pos, Op: t.text, L: l, R: r}
	}
	p.depth -= n
	return l
}

func (p *parser) multiplicative() Expr {
	l := p.unary()
	n := 0
	for t := p.peek(); t.isOp("*") || t.isOp("/") || t.isOp("%") || t.isOp("||"); t = p.peek() {
		p.advance()
		p.enter()
		n++
		r := p.unary()
		l = &Binary{At: l.Pos(), OpAt: t.pos, Op: t.text, L: l, R: r}
	}
	p.depth -= n
	return l
}

func (p *parser) unary() Expr {
	t := p.peek()
	if !t.isOp("-") && !t.isOp("+") {
		return p.primary()
	}
	p.advance()
	p.enter()
	x := p.unary()
	p.leave()
	if l, ok := x.(*Literal); ok && (l.Kind == LitInt || l.Kind == LitDecimal || l.Kind == LitFloat) {
		if t.text == "+" {
			l.At = t.pos
			return l
		}
		text := "-" + l.Text
		if strings.HasPrefix(l.Text, "-") {
			text = l.Text[1:]
		}
		return numLiteral(text, t.pos)
	}
	return &Unary{At: t.pos, Op: t.text, X: x}
}

// numLiteral classifies a numeric literal's text (optionally with '-').
func numLiteral(text string, at Pos) *Literal {
	l := &Literal{At: at, Text: text}
	switch {
	case strings.ContainsAny(text, "eE"):
		l.Kind = LitFloat
		l.Float, _ = strconv.ParseFloat(text, 64)
	case strings.Contains(text, "."):
		l.Kind = LitDecimal
		l.Float, _ = strconv.ParseFloat(text, 64)
	default:
		if v, err := strconv.ParseInt(text, 10, 64); err == nil {
			l.Kind = LitInt
			l.Int = v
			l.Float = float64(v)
		} else {
			l.Kind = LitDecimal
			l.Float, _ = strconv.ParseFloat(text, 64)
		}
	}
	return l
}

func (p *parser) primary() Expr {
	t := p.peek()
	switch t.kind {
	case tNumber:
		p.advance()
		return numLiteral(t.text, t.pos)
	case tString:
		p.advance()
		return &Literal{At: t.pos, Kind: LitString, Str: t.text}
	case tQIdent:
		return p.nameExpr()
	case tOp:
		if t.isOp("(") {
			p.advance()
			if s := p.peek(); s.is("SELECT") {
				p.failAt(s, "subqueries are not supported in expressions")
			}
			e := p.expr()
			if c := p.peek(); !c.isOp(")") {
				p.failAt(c, "expected ')' to close the '(' at line %d:%d, found %s", t.pos.Line, t.pos.Col, c.describe())
			}
			p.advance()
			return e
		}
		p.failAt(t, "expected an expression, found %s", t.describe())
	case tEOF:
		p.failAt(t, "expected an expression, found end of query")
	}
	// unquoted identifier or keyword
	u := strings.ToUpper(t.text)
	next := p.peekN(1)
	switch u {
	case "TRUE", "FALSE":
		p.advance()
		return &Literal{At: t.pos, Kind: LitBool, Bool: u == "TRUE"}
	case "NULL", "UNKNOWN":
		p.advance()
		return &Literal{At: t.pos, Kind: LitNull}
	case "INTERVAL":
		return p.interval()
	case "CASE":
		return p.caseExpr()
	case "CAST", "TRY_CAST":
		if next.isOp("(") {
			return p.cast()
		}
	case "DATE", "TIME", "TIMESTAMP":
		if next.kind == tString {
			return p.typedLiteral()
		}
	case "FINAL", "RUNNING":
		if next.kind == tIdent || next.kind == tQIdent {
			p.advance()
			p.enter()
			x := p.unary()
			p.leave()
			return &Unary{At: t.pos, Op: u, X: x}
		}
	case "EXTRACT":
		if next.isOp("(") {
			return p.extract()
		}
	case "TIMESTAMPADD", "TIMESTAMPDIFF":
		if next.isOp("(") && unitOf(p.peekN(2)) != UnitNone {
			return p.timestampFunc()
		}
	}
	if niladic[u] && !next.isOp("(") {
		p.advance()
		return &Call{At: t.pos, Name: u, Spelling: t.text, NoParens: true}
	}
	if isReserved(t.text) {
		p.failAt(t, "expected an expression, found %s", t.describe())
	}
	return p.nameExpr()
}

// nameExpr parses a column reference a[.b[.c...]] or a function call f(...).
func (p *parser) nameExpr() Expr {
	t := p.advance()
	if t.kind == tIdent && p.peek().isOp("(") {
		return p.call(t)
	}
	parts := []string{t.text}
	nameAt := t.pos
	for p.peek().isOp(".") {
		dot := p.advance()
		n := p.peek()
		if n.kind != tIdent && n.kind != tQIdent {
			if n.isOp("*") {
				p.failAt(n, "'%s.*' is only allowed in COUNT(%s.*) and SELECT", t.text, t.text)
			}
			p.failAt(n, "expected a name after '.', found %s", n.describe())
		}
		_ = dot
		p.advance()
		parts = append(parts, n.text)
		if len(parts) == 2 {
			nameAt = n.pos
		}
		if p.peek().isOp("(") {
			p.failAt(p.peek(), "qualified function names such as %s(...) are not supported", strings.Join(parts, "."))
		}
	}
	c := &ColumnRef{At: t.pos, NameAt: nameAt}
	if len(parts) == 1 {
		c.Name = parts[0]
	} else {
		c.Var, c.Name = parts[0], parts[1]
		if len(parts) > 2 {
			c.Fields = parts[2:]
		}
	}
	return c
}

func (p *parser) call(name token) Expr {
	open := p.advance() // (
	c := &Call{At: name.pos, Name: strings.ToUpper(name.text), Spelling: name.text}
	switch t := p.peek(); {
	case t.isOp(")"):
	case t.isOp("*") && p.peekN(1).isOp(")"):
		p.advance()
		c.Star = true
	case isName(t) && p.peekN(1).isOp(".") && p.peekN(2).isOp("*") && p.peekN(3).isOp(")"):
		// COUNT(X.*): the rows of variable X
		c.Star, c.StarVar, c.StarAt = true, t.text, t.pos
		p.advance()
		p.advance()
		p.advance()
	default:
		if t.is("DISTINCT") {
			p.advance()
			c.Distinct = true
		} else if t.is("ALL") {
			p.advance()
		}
		for {
			c.Args = append(c.Args, p.expr())
			if !p.acceptOp(",") {
				break
			}
		}
	}
	if t := p.peek(); !t.isOp(")") {
		p.failAt(t, "expected ',' or ')' in the arguments of %s (opened at line %d:%d), found %s", name.text, open.pos.Line, open.pos.Col, t.describe())
	}
	p.advance()
	return c
}

func (p *parser) extract() Expr {
	name := p.advance()
	p.advance() // (
	c := &Call{At: name.pos, Name: "EXTRACT", Spelling: name.text}
	u := p.peek()
	unit := unitOf(u)
	if unit == UnitNone {
		p.failAt(u, "expected a time unit (YEAR, MONTH, DAY, HOUR, MINUTE, SECOND, ...) in EXTRACT, found %s", u.describe())
	}
	p.advance()
	p.expectKw("FROM", "FROM in EXTRACT(unit FROM value)")
	c.Args = []Expr{&UnitArg{At: u.pos, Unit: unit}, p.expr()}
	p.expectOp(")", "')' to close EXTRACT(")
	return c
}

func (p *parser) timestampFunc() Expr {
	name := p.advance()
	p.advance() // (
	c := &Call{At: name.pos, Name: strings.ToUpper(name.text), Spelling: name.text}
	u := p.advance()
	c.Args = []Expr{&UnitArg{At: u.pos, Unit: unitOf(u)}}
	for p.acceptOp(",") {
		c.Args = append(c.Args, p.expr())
	}
	p.expectOp(")", "',' or ')' in "+c.Name)
	return c
}

func (p *parser) caseExpr() Expr {
	start := p.advance()
	c := &Case{At: start.pos}
	p.enter()
	defer p.leave()
	if t := p.peek(); t.is("END") || t.is("ELSE") {
		p.failAt(t, "expected WHEN in CASE, found %s", t.describe())
	}
	if !p.peek().is("WHEN") {
		c.Operand = p.expr()
	}
	for {
		w := p.peek()
		if !w.is("WHEN") {
			break
		}
		p.advance()
		cond := p.expr()
		p.expectKw("THEN", "THEN after the WHEN condition")
		c.Whens = append(c.Whens, When{At: w.pos, Cond: cond, Then: p.expr()})
	}
	if len(c.Whens) == 0 {
		p.failAt(p.peek(), "expected WHEN in CASE, found %s", p.peek().describe())
	}
	if p.acceptKw("ELSE") {
		c.Else = p.expr()
	}
	if t := p.peek(); !t.is("END") {
		p.failAt(t, "expected END to close the CASE at line %d:%d, found %s", start.pos.Line, start.pos.Col, t.describe())
	}
	p.advance()
	return c
}

func (p *parser) cast() Expr {
	name := p.advance()
	p.advance() // (
	c := &Cast{At: name.pos, Try: strings.EqualFold(name.text, "TRY_CAST")}
	c.X = p.expr()
	p.expectKw("AS", "AS in CAST(value AS type)")
	c.Type = p.typeName()
	p.expectOp(")", "')' to close CAST(")
	return c
}

func (p *parser) typeName() TypeName {
	t := p.peek()
	if t.kind != tIdent {
		p.failAt(t, "expected a type name, found %s", t.describe())
	}
	p.advance()
	tn := TypeName{At: t.pos, Name: strings.ToUpper(t.text)}
	switch {
	case tn.Name == "DOUBLE" && p.peek().is("PRECISION"):
		p.advance()
		tn.Name = "DOUBLE PRECISION"
	case (tn.Name == "CHARACTER" || tn.Name == "CHAR") && p.peek().is("VARYING"):
		p.advance()
		tn.Name += " VARYING"
	}
	if p.acceptOp("(") {
		for {
			n := p.peek()
			v, err := strconv.Atoi(n.text)
			if n.kind != tNumber || err != nil || v < 0 || v > 1<<30 {
				p.failAt(n, "expected a length or precision in %s(...), found %s", tn.Name, n.describe())
			}
			p.advance()
			tn.Args = append(tn.Args, v)
			if !p.acceptOp(",") {
				break
			}
		}
		p.expectOp(")", "')' after the type arguments")
	}
	if (tn.Name == "TIMESTAMP" || tn.Name == "TIME") && (p.peek().is("WITH") || p.peek().is("WITHOUT")) {
		w := p.advance()
		suffix := " WITHOUT TIME ZONE"
		if w.is("WITH") {
			suffix = " WITH TIME ZONE"
			if p.acceptKw("LOCAL") {
				suffix = " WITH LOCAL TIME ZONE"
			}
		}
		p.expectKw("TIME", "TIME ZONE")
		p.expectKw("ZONE", "ZONE after TIME")
		tn.Name += suffix
	}
	if t := p.peek(); t.isOp("<") {
		p.failAt(t, "type %s<...> is not supported in CAST", tn.Name)
	}
	if t := p.peek(); t.is("NOT") && p.peekN(1).is("NULL") {
		p.advance()
		p.advance()
		tn.NotNull = true
	}
	return tn
}

func (p *parser) typedLiteral() Expr {
	kw := p.advance()
	s := p.advance()
	l := &Literal{At: kw.pos, Str: s.text}
	var layouts []string
	var want string
	switch strings.ToUpper(kw.text) {
	case "DATE":
		l.Kind = LitDate
		layouts, want = []string{"2006-01-02"}, "'yyyy-mm-dd'"
	case "TIME":
		l.Kind = LitTime
		layouts, want = []string{"15:04:05", "15:04:05.999999999", "15:04"}, "'hh:mm:ss[.fff]'"
	default:
		l.Kind = LitTimestamp
		layouts, want = []string{"2006-01-02 15:04:05", "2006-01-02 15:04:05.999999999", "2006-01-02 15:04", "2006-01-02T15:04:05", "2006-01-02T15:04:05.999999999"}, "'yyyy-mm-dd hh:mm:ss[.fff]'"
	}
	for _, lay := range layouts {
		if validTimeText(lay, strings.TrimSpace(s.text)) {
			return l
		}
	}
	p.failAt(s, "invalid %s literal '%s': expected %s", strings.ToUpper(kw.text), s.text, want)
	return nil
}

func (p *parser) interval() *Interval {
	kw := p.advance() // INTERVAL
	iv := &Interval{At: kw.pos}
	if p.acceptOp("-") {
		iv.Negative = true
	} else {
		p.acceptOp("+")
	}
	s := p.peek()
	if s.kind != tString {
		p.failAt(s, "expected a quoted value after INTERVAL (e.g. INTERVAL '10' SECOND), found %s", s.describe())
	}
	p.advance()
	iv.Value = s.text
	u := p.peek()
	iv.From = unitOf(u)
	if iv.From == UnitNone {
		p.failAt(u, "expected an interval unit (DAY, HOUR, MINUTE, SECOND, MILLISECOND, YEAR, MONTH) after INTERVAL '%s', found %s", s.text, u.describe())
	}
	p.advance()
	readPrec := func(allowFrac bool) (int, int) {
		if !p.peek().isOp("(") {
			return 0, 0
		}
		p.advance()
		var v [2]int
		k := 0
		for {
			n := p.peek()
			x, err := strconv.Atoi(n.text)
			if n.kind != tNumber || err != nil || x < 1 || x > 10 {
				p.failAt(n, "expected an interval precision from 1 to 10, found %s", n.describe())
			}
			p.advance()
			v[k] = x
			k++
			if k == 2 || !allowFrac || !p.acceptOp(",") {
				break
			}
		}
		p.expectOp(")", "')' after the interval precision")
		return v[0], v[1]
	}
	if iv.From == UnitSecond {
		iv.Precision, iv.FracPrecision = readPrec(true)
	} else {
		iv.Precision, _ = readPrec(false)
	}
	if p.peek().is("TO") {
		p.advance()
		tu := p.peek()
		iv.To = unitOf(tu)
		if iv.To == UnitNone {
			p.failAt(tu, "expected an interval unit after TO, found %s", tu.describe())
		}
		p.advance()
		if iv.To == UnitSecond {
			iv.FracPrecision, _ = readPrec(false)
		}
	}
	if msg := evalInterval(iv); msg != "" {
		p.failAt(s, "%s", msg)
	}
	return iv
}
