package nfa

import (
	"slices"
	"strings"

	"github.com/cepcluster/cep/nfa/expr"
	"github.com/cepcluster/cep/nfa/sql"
)

// FieldsRead lists the event fields the pattern reads, as dotted paths,
// sorted, each once: e.a.b in its conditions, emit fields, key and time,
// or a query's columns in DEFINE, MEASURES and PARTITION BY. A field no
// event has makes a CEL condition fail but a query's column NULL, which
// no error shows: the shards count, per field, the events without it
// until one has it. A query reading a subquery's output lists nothing
// (its columns are not the events').
func (p *Pattern) FieldsRead() []string {
	if p.sql {
		return p.sqlFields
	}
	set := map[string]bool{}
	add := func(refs []expr.FieldRef) {
		for _, r := range refs {
			set[r.Path] = true
		}
	}
	for _, l := range p.leaves {
		if l.cel != nil {
			add(l.cel.FieldRefs())
		}
	}
	for _, f := range p.emit {
		add(f.v.FieldRefs())
	}
	for _, src := range []string{p.spec.Key, p.spec.Time} {
		if src == "" {
			continue
		}
		if ec, err := exprCompiler(); err == nil {
			if v, err := ec.Value(src); err == nil {
				add(v.FieldRefs())
			}
		}
	}
	return sortedSet(set)
}

// sqlFieldsRead is FieldsRead of a checked query.
func sqlFieldsRead(q *sql.Query) []string {
	if q.Projection != nil {
		return nil
	}
	vars := map[string]bool{}
	for _, v := range q.Pattern.Vars() {
		vars[v.Name] = true
	}
	set := map[string]bool{}
	add := func(e sql.Expr) {
		sql.Walk(e, func(x sql.Expr) bool {
			if r, ok := x.(*sql.ColumnRef); ok {
				parts := []string{r.Name}
				if r.Var != "" && !vars[r.Var] {
					// x.y of a column x of ROW type, not a variable's
					parts = []string{r.Var, r.Name}
				}
				set[strings.Join(append(parts, r.Fields...), ".")] = true
			}
			return true
		})
	}
	for _, d := range q.Defines {
		add(d.Expr)
	}
	for _, m := range q.Measures {
		add(m.Expr)
	}
	for _, c := range q.PartitionBy {
		set[c.Name] = true
	}
	return sortedSet(set)
}

func sortedSet(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
