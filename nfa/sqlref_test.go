package nfa_test

// A reference for MATCH_RECOGNIZE's row pattern matching, written from
// SQL:2016's definitions (ISO/IEC TR 19075-5, row pattern recognition:
// the pattern's matches from a start row, in the pattern's preference
// order) and not from the engine: it backtracks over the pattern on a
// finite, sorted partition, evaluating DEFINE with running semantics over
// the rows mapped so far.
//
// The engine follows Flink, whose streaming semantics differ from the
// standard on purpose in three ways, which the reference models on top of
// the standard's enumeration (checkFlink) rather than hiding:
//
//  1. A greedy quantifier (V*, V+, V{n,}, V{n,m} with n < m) does not
//     branch: while V can take the next row it must, and only a row V
//     refuses leaves the loop (the standard would backtrack into shorter
//     loops when the rest of the pattern fails). This holds even when a
//     bounded loop is full: after V{1,2} the next variable takes only a
//     row V refuses (Flink's compiler adds NOT V to every transition of
//     the state after the loop).
//  2. Of the matches from one start row, one is reported, not necessarily
//     the standard's most preferred one: Flink's queue orders completed
//     matches by their start row alone. A match is known at its last row,
//     also when the variables after it are optional. Matches leave in the
//     order of their start rows, and each prunes what its skip rules out.
//  3. A match waits while a match starting earlier may still complete; at
//     the end of a bounded input such a partial match never ends (there is
//     no WITHIN here), so what waits behind it is never reported.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cepcluster/cep/nfa/expr"
	"github.com/cepcluster/cep/nfa/sql"
	"github.com/cepcluster/cep/nfa/sqleval"
)

// refRow is one row of a partition.
type refRow struct {
	ts   int64
	data expr.Event
}

// refPath is one way the pattern matches from a start row: the variable
// of each row from start on.
type refPath struct {
	start  int
	labels []string
}

func (p refPath) end() int { return p.start + len(p.labels) - 1 }

// refMatcher enumerates a query's matches over one partition.
type refMatcher struct {
	q     *sql.Query
	rows  []refRow
	flink bool // model Flink's greedy loops (1 above)
}

// define reports whether row pos satisfies v's DEFINE when mapped to v,
// after the rows start..pos-1 mapped to labels (running semantics).
func (r *refMatcher) define(v string, start int, labels []string, pos int) bool {
	d := r.q.Define(v)
	if d == nil {
		return true // a variable without DEFINE matches every row
	}
	env := &sqleval.Env{Subsets: r.q.SubsetMap()}
	for i, l := range labels {
		env.Rows = append(env.Rows, sqleval.Row{Var: l, Time: r.rows[start+i].ts, Data: r.rows[start+i].data})
	}
	env.Rows = append(env.Rows, sqleval.Row{Var: v, Time: r.rows[pos].ts, Data: r.rows[pos].data})
	env.Cur = len(env.Rows) - 1
	x, err := env.Eval(d.Expr)
	b, _ := x.(bool)
	return err == nil && b
}

// paths calls yield for each match from start in the standard's
// preference order (a greedy quantifier prefers one more row or group
// iteration, a reluctant one fewer), and reports whether a partial match
// took the partition's last row and still wants another (it waits for
// more rows).
func (r *refMatcher) paths(start int, yield func(refPath)) (waits bool) {
	var labels []string
	n := len(r.rows)
	var seq func(items []sql.PatternTerm, i, pos int, k func(int))
	var quant func(t sql.PatternTerm, q sql.Quantifier, c, pos int, k func(int))
	// seq matches items[i:] from pos, then calls k with the position after
	seq = func(items []sql.PatternTerm, i, pos int, k func(int)) {
		if i == len(items) {
			k(pos)
			return
		}
		var q sql.Quantifier
		switch t := items[i].(type) {
		case *sql.PatternVar:
			q = t.Quant
		case *sql.PatternGroup:
			q = t.Quant
		case *sql.PatternAlt:
			// the alternatives in order: the leftmost is preferred
			for _, a := range t.Alts {
				seq(a.Items, 0, pos, func(p int) { seq(items, i+1, p, k) })
			}
			return
		}
		quant(items[i], q, 0, pos, func(p int) { seq(items, i+1, p, k) })
	}
	// quant matches term t, matched c times so far, from pos
	quant = func(t sql.PatternTerm, q sql.Quantifier, c, pos int, k func(int)) {
		take := func() {
			if q.Max >= 0 && c >= q.Max {
				return
			}
			switch t := t.(type) {
			case *sql.PatternVar:
				if pos >= n {
					waits = true
					return
				}
				if !r.define(t.Name, start, labels, pos) {
					return
				}
				labels = append(labels, t.Name)
				quant(t, q, c+1, pos+1, k)
				labels = labels[:len(labels)-1]
			case *sql.PatternGroup:
				seq(t.Inner.Items, 0, pos, func(p int) {
					if p > pos { // an iteration that matches no rows is not repeated
						quant(t, q, c+1, p, k)
					}
				})
			}
		}
		exit := func() {
			if c < q.Min {
				return
			}
			if v, ok := t.(*sql.PatternVar); ok && r.flink && sql.Greedy(q) {
				// Flink: the states after a greedy loop take a row only if
				// the loop's variable would not, even once the loop is full
				if pos >= n {
					waits = true // for a row to decide on
					return
				}
				if r.define(v.Name, start, labels, pos) {
					return
				}
			}
			k(pos)
		}
		if q.Reluctant {
			exit()
			take()
		} else {
			take()
			exit()
		}
	}
	seq(r.q.Pattern.Items, 0, start, func(int) {
		if len(labels) > 0 { // (Check refuses patterns matching no rows)
			yield(refPath{start: start, labels: slices.Clone(labels)})
		}
	})
	return waits
}

// standardMatches is SQL:2016 ONE ROW PER MATCH: from each start row in
// turn the most preferred match, then the AFTER MATCH SKIP clause says
// where the next search starts. A skip to a row not after the match's
// start (an error in the standard) ends the search.
func (r *refMatcher) standardMatches() []refPath {
	var out []refPath
	for s := 0; s < len(r.rows); {
		var m *refPath
		r.paths(s, func(p refPath) {
			if m == nil {
				m = &p
			}
		})
		if m == nil {
			s++
			continue
		}
		out = append(out, *m)
		next := skipRow(r.q.Skip, *m)
		if next <= s {
			break
		}
		s = next
	}
	return out
}

// skipRow is the row the AFTER MATCH SKIP clause resumes at after m; -1
// when it names a variable m has no row for.
func skipRow(sk sql.SkipClause, m refPath) int {
	switch sk.Kind {
	case sql.SkipPastLastRow:
		return m.end() + 1
	case sql.SkipToFirst, sql.SkipToLast:
		at := -1
		for i, l := range m.labels {
			if l == sk.Var && (at < 0 || sk.Kind == sql.SkipToLast) {
				at = m.start + i
			}
		}
		return at
	}
	return m.start + 1
}

// checkFlink checks the engine's rows for one partition (got, in order)
// against the engine's selection (2 and 3 above) over the standard's
// matches. Every match of every start is a candidate; rows leave in the
// order of their start rows; a partial match that waits at the end holds
// back every later start; each row leaving prunes the candidates starting
// before its skip row (Flink's pruning: up to and including the row for
// TO NEXT ROW and PAST LAST ROW, strictly before it for TO FIRST/LAST v,
// nothing when v has no row). Which of one start's candidates leaves
// first is not checked: Flink's queue orders completed matches by their
// start alone, so of several from one start it emits one in an order of
// its own (the standard would take the most preferred one).
func (r *refMatcher) checkFlink(got []string) error {
	type cand struct {
		p       refPath
		row     string
		blocker bool
	}
	var cs []cand
	for s := range r.rows {
		waits := r.paths(s, func(p refPath) {
			cs = append(cs, cand{p: p, row: refRows(r.q, r.rows, []refPath{p})[0]})
		})
		if waits {
			cs = append(cs, cand{p: refPath{start: s}, blocker: true})
		}
	}
	// next returns the candidates that may leave now.
	next := func() (group []cand, blocked bool) {
		s0 := -1
		for _, c := range cs {
			if s0 < 0 || c.p.start < s0 {
				s0 = c.p.start
			}
		}
		for _, c := range cs {
			if c.p.start == s0 && c.blocker {
				blocked = true
			} else if c.p.start == s0 {
				group = append(group, c)
			}
		}
		return group, blocked
	}
	for i, g := range got {
		group, _ := next()
		k := slices.IndexFunc(group, func(c cand) bool { return c.row == g })
		if k < 0 {
			var allowed []string
			for _, c := range group {
				allowed = append(allowed, c.row)
			}
			return fmt.Errorf("row %d:\n%s\nthe reference allows:\n%s", i+1, g, strings.Join(allowed, "\n"))
		}
		c := group[k]
		// (one path: several with the same rows are several matches)
		at := slices.IndexFunc(cs, func(x cand) bool { return !x.blocker && x.p.start == c.p.start && x.row == c.row })
		cs = slices.Delete(cs, at, at+1)
		pid, inclusive := skipRow(r.q.Skip, c.p), false
		switch r.q.Skip.Kind {
		case sql.SkipToNextRow:
			pid, inclusive = c.p.start, true
		case sql.SkipPastLastRow:
			pid, inclusive = c.p.end(), true
		}
		if pid >= 0 {
			cs = slices.DeleteFunc(cs, func(x cand) bool { return x.p.start < pid || (inclusive && x.p.start == pid) })
		}
	}
	for len(cs) > 0 {
		group, blocked := next()
		if len(group) > 0 {
			return fmt.Errorf("after %d rows, the reference has more:\n%s", len(got), group[0].row)
		}
		if blocked {
			return nil
		}
	}
	return nil
}

// refRows renders matches as the engine's rows: the partition columns,
// then each measure with final semantics over the match's rows.
func refRows(q *sql.Query, rows []refRow, ms []refPath) []string {
	var out []string
	for _, m := range ms {
		env := &sqleval.Env{Subsets: q.SubsetMap()}
		for i, l := range m.labels {
			r := rows[m.start+i]
			env.Rows = append(env.Rows, sqleval.Row{Var: l, Time: r.ts, Data: r.data})
		}
		env.Cur = len(env.Rows) - 1
		var s []string
		for _, c := range q.PartitionBy {
			s = append(s, fieldString(c.Name, rows[m.start].data[c.Name]))
		}
		for _, me := range q.Measures {
			v, err := env.Eval(me.Expr)
			if err != nil {
				v = nil
			}
			if c, ok := me.Expr.(*sql.Call); ok && (c.Name == "PREV" || c.Name == "NEXT") {
				v = refPhysical(q, rows, m, c)
			}
			s = append(s, fieldString(me.Alias, v))
		}
		out = append(out, strings.Join(s, " "))
	}
	return out
}

// fieldString renders a column with its Go type, so that 1 and 1.0 differ.
func fieldString(name string, v any) string { return fmt.Sprintf("%s=%T(%v)", name, v, v) }

// refPhysical is PREV/NEXT in MEASURES by the standard's definition,
// written over the match's labels rather than with the evaluator: the
// argument's row (the last row of its variable, the last row of the
// match for a plain column, or the row a FIRST/LAST argument picks), then
// n rows back or forward; here, as in a stream, only the match's rows
// are within reach. The argument is a column or FIRST/LAST of one (what
// the property test draws).
func refPhysical(q *sql.Query, rows []refRow, m refPath, c *sql.Call) any {
	in := func(label, v string) bool {
		return v == "" || label == v || slices.Contains(q.SubsetMap()[v], label)
	}
	offset := func(c *sql.Call) int {
		if len(c.Args) < 2 {
			if c.Name == "FIRST" || c.Name == "LAST" {
				return 0
			}
			return 1
		}
		return int(c.Args[1].(*sql.Literal).Int)
	}
	arg := c.Args[0]
	var at int // index into the match's rows
	switch a := arg.(type) {
	case *sql.ColumnRef:
		at = -1
		for i, l := range m.labels {
			if in(l, a.Var) {
				at = i
			}
		}
	case *sql.Call:
		col := a.Args[0].(*sql.ColumnRef)
		var idx []int
		for i, l := range m.labels {
			if in(l, col.Var) {
				idx = append(idx, i)
			}
		}
		k := offset(a)
		if a.Name == "LAST" {
			k = len(idx) - 1 - k
		}
		if k < 0 || k >= len(idx) {
			return nil
		}
		at, arg = idx[k], col
	}
	if at < 0 {
		return nil
	}
	if c.Name == "PREV" {
		at -= offset(c)
	} else {
		at += offset(c)
	}
	if at < 0 || at >= len(m.labels) {
		return nil
	}
	return rows[m.start+at].data[arg.(*sql.ColumnRef).Name]
}
