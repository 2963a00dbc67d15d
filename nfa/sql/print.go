package sql

import (
	"strconv"
	"strings"
)

// String prints the quantifier as written in PATTERN ("" for exactly one).
func (q Quantifier) String() string {
	var s string
	switch {
	case q.Min == 1 && q.Max == 1:
		if q.Reluctant {
			s = "{1}"
		}
	case q.Min == 0 && q.Max < 0:
		s = "*"
	case q.Min == 1 && q.Max < 0:
		s = "+"
	case q.Min == 0 && q.Max == 1:
		s = "?"
	case q.Min == q.Max:
		s = "{" + strconv.Itoa(q.Min) + "}"
	case q.Max < 0:
		s = "{" + strconv.Itoa(q.Min) + ",}"
	default:
		s = "{" + strconv.Itoa(q.Min) + "," + strconv.Itoa(q.Max) + "}"
	}
	if q.Reluctant {
		s += "?"
	}
	return s
}

func (v *PatternVar) String() string { return quoteIdent(v.Name) + v.Quant.String() }

func (s *PatternSeq) String() string {
	parts := make([]string, len(s.Items))
	for i, it := range s.Items {
		parts[i] = it.String()
	}
	return strings.Join(parts, " ")
}

func (g *PatternGroup) String() string { return "(" + g.Inner.body() + ")" + g.Quant.String() }

// body is s as it stands inside parentheses: an alternation alone needs
// none of its own.
func (s *PatternSeq) body() string {
	if len(s.Items) == 1 {
		if a, ok := s.Items[0].(*PatternAlt); ok && a.Permute == nil {
			return a.alts()
		}
	}
	return s.String()
}

// String prints an alternation in parentheses, so that it re-parses to
// the same tree wherever it stands in a sequence.
func (a *PatternAlt) String() string {
	if a.Permute != nil {
		parts := make([]string, len(a.Permute))
		for i, t := range a.Permute {
			parts[i] = t.String()
		}
		return "PERMUTE(" + strings.Join(parts, ", ") + ")"
	}
	return "(" + a.alts() + ")"
}

func (a *PatternAlt) alts() string {
	parts := make([]string, len(a.Alts))
	for i, s := range a.Alts {
		parts[i] = s.String()
	}
	return strings.Join(parts, " | ")
}

func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func (e *Literal) String() string {
	switch e.Kind {
	case LitNull:
		return "NULL"
	case LitBool:
		if e.Bool {
			return "TRUE"
		}
		return "FALSE"
	case LitString:
		return quoteString(e.Str)
	case LitDate:
		return "DATE " + quoteString(e.Str)
	case LitTime:
		return "TIME " + quoteString(e.Str)
	case LitTimestamp:
		return "TIMESTAMP " + quoteString(e.Str)
	}
	return e.Text
}

func (e *Interval) String() string {
	var b strings.Builder
	b.WriteString("INTERVAL ")
	if e.Negative {
		b.WriteString("-")
	}
	v := strings.TrimSpace(e.Value)
	v = strings.TrimPrefix(strings.TrimPrefix(v, "-"), "+")
	b.WriteString(quoteString(v))
	b.WriteString(" ")
	b.WriteString(e.From.String())
	switch {
	case e.From == UnitSecond && e.Precision > 0 && e.FracPrecision > 0 && e.To == UnitNone:
		b.WriteString("(" + strconv.Itoa(e.Precision) + ", " + strconv.Itoa(e.FracPrecision) + ")")
	case e.Precision > 0:
		b.WriteString("(" + strconv.Itoa(e.Precision) + ")")
	}
	if e.To != UnitNone {
		b.WriteString(" TO " + e.To.String())
		if e.To == UnitSecond && e.FracPrecision > 0 {
			b.WriteString("(" + strconv.Itoa(e.FracPrecision) + ")")
		}
	}
	return b.String()
}

func (e *ColumnRef) String() string {
	var b strings.Builder
	if e.Var != "" {
		b.WriteString(quoteIdent(e.Var))
		b.WriteString(".")
	}
	b.WriteString(quoteIdent(e.Name))
	for _, f := range e.Fields {
		b.WriteString(".")
		b.WriteString(quoteIdent(f))
	}
	return b.String()
}

func (e *Unary) String() string {
	switch e.Op {
	case "-", "+":
		return "(" + e.Op + e.X.String() + ")"
	}
	return "(" + e.Op + " " + e.X.String() + ")"
}

func (e *Binary) String() string { return "(" + e.L.String() + " " + e.Op + " " + e.R.String() + ")" }

func not(b bool) string {
	if b {
		return "NOT "
	}
	return ""
}

func (e *IsNull) String() string { return "(" + e.X.String() + " IS " + not(e.Not) + "NULL)" }

func (e *IsBool) String() string {
	v := "FALSE"
	if e.Value {
		v = "TRUE"
	}
	return "(" + e.X.String() + " IS " + not(e.Not) + v + ")"
}

func (e *Between) String() string {
	sym := ""
	if e.Symmetric {
		sym = "SYMMETRIC "
	}
	return "(" + e.X.String() + " " + not(e.Not) + "BETWEEN " + sym + e.Lo.String() + " AND " + e.Hi.String() + ")"
}

func (e *In) String() string {
	return "(" + e.X.String() + " " + not(e.Not) + "IN (" + joinExprs(e.List) + "))"
}

func (e *Like) String() string {
	s := "(" + e.X.String() + " " + not(e.Not) + "LIKE " + e.Pattern.String()
	if e.Escape != nil {
		s += " ESCAPE " + e.Escape.String()
	}
	return s + ")"
}

func (e *Case) String() string {
	var b strings.Builder
	b.WriteString("CASE")
	if e.Operand != nil {
		b.WriteString(" " + e.Operand.String())
	}
	for _, w := range e.Whens {
		b.WriteString(" WHEN " + w.Cond.String() + " THEN " + w.Then.String())
	}
	if e.Else != nil {
		b.WriteString(" ELSE " + e.Else.String())
	}
	b.WriteString(" END")
	return b.String()
}

func (e *Call) String() string {
	if e.NoParens {
		return e.Name
	}
	if e.Name == "EXTRACT" && len(e.Args) == 2 {
		return "EXTRACT(" + e.Args[0].String() + " FROM " + e.Args[1].String() + ")"
	}
	if e.Star && e.StarVar != "" {
		return e.Name + "(" + quoteIdent(e.StarVar) + ".*)"
	}
	if e.Star {
		return e.Name + "(*)"
	}
	d := ""
	if e.Distinct {
		d = "DISTINCT "
	}
	name := e.Name
	if needsQuote(name) && !niladic[name] {
		name = e.Spelling
	}
	return name + "(" + d + joinExprs(e.Args) + ")"
}

func (e *Cast) String() string {
	kw := "CAST"
	if e.Try {
		kw = "TRY_CAST"
	}
	return kw + "(" + e.X.String() + " AS " + e.Type.String() + ")"
}

func (t TypeName) String() string {
	base, suffix := t.Name, ""
	for _, s := range []string{" WITH LOCAL TIME ZONE", " WITH TIME ZONE", " WITHOUT TIME ZONE"} {
		if strings.HasSuffix(base, s) {
			base, suffix = strings.TrimSuffix(base, s), s
		}
	}
	if len(t.Args) > 0 {
		args := make([]string, len(t.Args))
		for i, a := range t.Args {
			args[i] = strconv.Itoa(a)
		}
		base += "(" + strings.Join(args, ", ") + ")"
	}
	s := base + suffix
	if t.NotNull {
		s += " NOT NULL"
	}
	return s
}

func (e *UnitArg) String() string { return e.Unit.String() }

func joinExprs(es []Expr) string {
	parts := make([]string, len(es))
	for i, x := range es {
		parts[i] = x.String()
	}
	return strings.Join(parts, ", ")
}

// String prints the query back as SQL in a canonical layout, with
// expressions fully parenthesised. Parsing the result yields an equal
// query (up to positions).
func (q *Query) String() string {
	var b strings.Builder
	b.WriteString("SELECT ")
	if q.SelectStar {
		b.WriteString("*")
	} else {
		for i, s := range q.Select {
			if i > 0 {
				b.WriteString(", ")
			}
			if s.Qualifier != "" {
				b.WriteString(quoteIdent(s.Qualifier) + ".")
			}
			b.WriteString(quoteIdent(s.Name))
			if s.Alias != "" {
				b.WriteString(" AS " + quoteIdent(s.Alias))
			}
		}
	}
	b.WriteString("\nFROM ")
	if pr := q.Projection; pr != nil {
		b.WriteString("(\n  SELECT ")
		if pr.Star {
			b.WriteString("*")
		}
		for i, it := range pr.Items {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(it.Expr.String())
			if it.Alias != "" {
				b.WriteString(" AS " + quoteIdent(it.Alias))
			}
		}
		b.WriteString("\n  FROM " + quoteIdent(pr.Table))
		if pr.TableAlias != "" {
			b.WriteString(" AS " + quoteIdent(pr.TableAlias))
		}
		if pr.Where != nil {
			b.WriteString("\n  WHERE " + pr.Where.String())
		}
		b.WriteString("\n)")
	} else {
		b.WriteString(quoteIdent(q.Source))
	}
	b.WriteString("\nMATCH_RECOGNIZE (")
	if len(q.PartitionBy) > 0 {
		b.WriteString("\n  PARTITION BY ")
		for i, c := range q.PartitionBy {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quoteIdent(c.Name))
		}
	}
	b.WriteString("\n  ORDER BY ")
	for i, o := range q.OrderBy {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteIdent(o.Name))
		if o.Desc {
			b.WriteString(" DESC")
		}
	}
	if len(q.Measures) > 0 {
		b.WriteString("\n  MEASURES")
		for i, m := range q.Measures {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString("\n    " + m.Expr.String() + " AS " + quoteIdent(m.Alias))
		}
	}
	if q.OneRowPerMatch {
		b.WriteString("\n  ONE ROW PER MATCH")
		if q.ShowTimeouts {
			b.WriteString(" SHOW TIMEOUT MATCHES")
		}
	}
	if q.Skip.Explicit {
		b.WriteString("\n  AFTER MATCH ")
		b.WriteString(q.Skip.Kind.String())
		if q.Skip.Kind == SkipToFirst || q.Skip.Kind == SkipToLast {
			b.WriteString(" " + quoteIdent(q.Skip.Var))
		}
	}
	b.WriteString("\n  PATTERN (")
	if q.Pattern != nil {
		b.WriteString(q.Pattern.body())
	}
	b.WriteString(")")
	if q.Within != nil {
		b.WriteString(" WITHIN " + q.Within.String())
	}
	for i, s := range q.Subsets {
		if i == 0 {
			b.WriteString("\n  SUBSET ")
		} else {
			b.WriteString(", ")
		}
		var vs []string
		for _, v := range s.Vars {
			vs = append(vs, quoteIdent(v))
		}
		b.WriteString(quoteIdent(s.Name) + " = (" + strings.Join(vs, ", ") + ")")
	}
	b.WriteString("\n  DEFINE")
	for i, d := range q.Defines {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n    " + quoteIdent(d.Var) + " AS " + d.Expr.String())
	}
	b.WriteString("\n)")
	if q.Alias != "" {
		b.WriteString(" AS " + quoteIdent(q.Alias))
	}
	return b.String()
}
