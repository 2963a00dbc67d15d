package sql

import "strconv"

// Pos is a position in the query text: 1-based line and 1-based column,
// counted in characters (runes), a tab counting as one.
type Pos struct{ Line, Col int }

func (p Pos) String() string {
	return strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Col)
}

// IsValid reports whether p is a real position (the zero Pos is not).
func (p Pos) IsValid() bool { return p.Line > 0 }

// Query is a parsed SELECT ... FROM ... MATCH_RECOGNIZE (...) statement.
//
// A Query is produced by Parse and is plain data: it may be read from any
// goroutine, and Check is the only method that modifies it (it resolves
// nested-field references, see ColumnRef).
type Query struct {
	At Pos // the SELECT keyword

	// SelectStar is true for SELECT * (or SELECT T.*); Select is then nil.
	// Otherwise Select lists the selected output columns in order.
	SelectStar bool
	Select     []SelectItem

	// Source is the table the rows come from: the name after FROM, or, for
	// FROM (SELECT ... FROM t), the inner table t. Projection is that inner
	// SELECT, nil for a plain table.
	Source     string
	SourceAt   Pos
	Projection *Projection

	PartitionBy []Column    // nil without PARTITION BY
	OrderBy     []OrderItem // at least one; the first is the time attribute
	Measures    []Measure   // nil without MEASURES

	// OneRowPerMatch records whether ONE ROW PER MATCH was written; it is
	// the only (and the default) output mode Flink supports.
	OneRowPerMatch bool
	// ShowTimeouts is ONE ROW PER MATCH SHOW TIMEOUT MATCHES (an
	// extension): partial matches WITHIN ends are reported too.
	ShowTimeouts bool
	ShowAt       Pos // the SHOW keyword

	Skip SkipClause

	// Pattern is the PATTERN clause as a sequence. Parentheses without a
	// quantifier are flattened into the sequence, and a quantified group
	// holding a single unquantified variable, (A)+, becomes that variable
	// with the quantifier, as in Calcite. After a successful Check every
	// item is a *PatternVar (Flink supports no quantified groups).
	Pattern *PatternSeq

	// Within is the WITHIN INTERVAL time constraint, nil when absent.
	Within *Interval

	// Subsets holds the SUBSET clause: union variables, each naming the
	// rows of several pattern variables.
	Subsets []Subset

	// Defines holds the DEFINE clause in source order. Pattern variables
	// without a definition match every row.
	Defines []Define

	Alias   string // the alias after MATCH_RECOGNIZE (...) [AS] alias; "" if none
	AliasAt Pos
}

// SelectItem is one column of the outer select list: [Qualifier.]Name [AS Alias].
// Qualifier, when set, must be the MATCH_RECOGNIZE alias.
type SelectItem struct {
	At        Pos
	Qualifier string
	Name      string
	NameAt    Pos
	Alias     string // "" without AS
	AliasAt   Pos
}

// OutputName is the name of the column in the result: the alias if any,
// else the selected name.
func (s SelectItem) OutputName() string {
	if s.Alias != "" {
		return s.Alias
	}
	return s.Name
}

// Projection is a projecting subquery used as the source:
// FROM (SELECT expr [AS name], ... FROM Table [[AS] TableAlias] [WHERE expr]).
// Column references in its expressions never carry a Var: a qualifier that
// names Table or TableAlias is dropped, and any other qualifier is a nested
// field access (input.icao24 is column input, field icao24).
type Projection struct {
	At         Pos
	Star       bool // SELECT * (Items then nil)
	Items      []ProjItem
	Table      string
	TableAt    Pos
	TableAlias string
	Where      Expr // nil without WHERE
}

// ProjItem is one expression of a Projection with its output name.
type ProjItem struct {
	At      Pos
	Expr    Expr
	Alias   string // "" without AS
	AliasAt Pos
}

// OutputName is the name the item has in the projection's output: the
// alias, else the (last) name of a column reference, else Flink's
// generated name EXPR$i for item index i.
func (p ProjItem) OutputName(i int) string {
	if p.Alias != "" {
		return p.Alias
	}
	if c, ok := p.Expr.(*ColumnRef); ok {
		if len(c.Fields) > 0 {
			return c.Fields[len(c.Fields)-1]
		}
		return c.Name
	}
	return "EXPR$" + strconv.Itoa(i)
}

// Column is a column name in PARTITION BY or ORDER BY.
type Column struct {
	At   Pos
	Name string
}

// OrderItem is one ORDER BY column with its direction.
type OrderItem struct {
	Column
	Desc bool // DESC written; ASC or nothing is ascending
}

// Measure is one MEASURES entry: Expr AS Alias.
type Measure struct {
	At      Pos // start of the expression
	Expr    Expr
	Alias   string
	AliasAt Pos
}

// Subset is one SUBSET entry: Name = (Vars...).
type Subset struct {
	At     Pos // the name
	Name   string
	Vars   []string
	VarsAt []Pos
}

// SubsetMap returns the union variables by name (nil without SUBSET).
func (q *Query) SubsetMap() map[string][]string {
	if len(q.Subsets) == 0 {
		return nil
	}
	m := make(map[string][]string, len(q.Subsets))
	for _, s := range q.Subsets {
		m[s.Name] = s.Vars
	}
	return m
}

// Define is one DEFINE entry: Var AS Expr.
type Define struct {
	At   Pos // the variable name
	Var  string
	Expr Expr
}

// SkipKind is the AFTER MATCH SKIP strategy.
type SkipKind int

const (
	// SkipToNextRow resumes at the row after the first row of the match.
	// It is Flink's default when the clause is absent (Calcite's SQL
	// translation yields skipToNext; see Flink's PatternTranslatorTest).
	SkipToNextRow SkipKind = iota
	// SkipPastLastRow resumes after the last row of the match.
	SkipPastLastRow
	// SkipToFirst resumes at the first row mapped to SkipClause.Var.
	SkipToFirst
	// SkipToLast resumes at the last row mapped to SkipClause.Var;
	// SKIP TO v means SKIP TO LAST v.
	SkipToLast
)

func (k SkipKind) String() string {
	switch k {
	case SkipToNextRow:
		return "SKIP TO NEXT ROW"
	case SkipPastLastRow:
		return "SKIP PAST LAST ROW"
	case SkipToFirst:
		return "SKIP TO FIRST"
	case SkipToLast:
		return "SKIP TO LAST"
	}
	return "SkipKind(" + strconv.Itoa(int(k)) + ")"
}

// SkipClause is the AFTER MATCH clause.
type SkipClause struct {
	At       Pos // the AFTER keyword; zero when Explicit is false
	Explicit bool
	Kind     SkipKind
	Var      string // for SkipToFirst and SkipToLast
	VarAt    Pos
}

// Quantifier says how many consecutive rows a pattern term matches:
// Min..Max, Max = -1 for unbounded. The zero Quantifier is not valid; an
// unquantified term has One() = {1, 1}.
type Quantifier struct {
	At        Pos // the quantifier's first character; zero for an implicit {1,1}
	Min, Max  int
	Reluctant bool // followed by '?'
}

// One is the implicit quantifier of a term written without one.
func One() Quantifier { return Quantifier{Min: 1, Max: 1} }

// IsOne reports whether q matches exactly one row greedily (no quantifier).
func (q Quantifier) IsOne() bool { return q.Min == 1 && q.Max == 1 && !q.Reluctant }

// Unbounded reports whether q has no upper bound.
func (q Quantifier) Unbounded() bool { return q.Max < 0 }

// PatternTerm is a node of the PATTERN clause: *PatternVar, *PatternSeq,
// *PatternGroup or *PatternAlt.
type PatternTerm interface {
	Pos() Pos
	String() string
	patternTerm()
}

// PatternVar is a pattern variable with its quantifier.
type PatternVar struct {
	At    Pos
	Name  string
	Quant Quantifier
}

// PatternSeq is a concatenation of terms (Flink: strict contiguity).
type PatternSeq struct {
	At    Pos
	Items []PatternTerm
}

// PatternGroup is a parenthesised sequence with a quantifier, e.g. (A B)+.
// Flink rejects it; Check reports it.
type PatternGroup struct {
	At    Pos // the '('
	Inner *PatternSeq
	Quant Quantifier
}

// PatternAlt is an alternation, A B | C, in the standard's preference
// order: the leftmost alternative that matches is preferred. It carries no
// quantifier: (A | B)+ is a PatternGroup whose Inner holds one PatternAlt.
// PERMUTE(A, B, C) parses into the alternation of the permutations in
// lexicographic order of their positions in the list (A B C | A C B |
// B A C | ...), with Permute holding the listed terms (for printing).
type PatternAlt struct {
	At      Pos // the first alternative's first token, or PERMUTE
	Alts    []*PatternSeq
	Permute []PatternTerm
}

func (v *PatternVar) Pos() Pos     { return v.At }
func (s *PatternSeq) Pos() Pos     { return s.At }
func (g *PatternGroup) Pos() Pos   { return g.At }
func (a *PatternAlt) Pos() Pos     { return a.At }
func (*PatternVar) patternTerm()   {}
func (*PatternSeq) patternTerm()   {}
func (*PatternGroup) patternTerm() {}
func (*PatternAlt) patternTerm()   {}

// Vars returns the pattern variables in the order they appear, descending
// into groups and alternatives. A variable named in several alternatives
// (or by PERMUTE) appears once per occurrence.
func (s *PatternSeq) Vars() []*PatternVar {
	var out []*PatternVar
	var walk func(PatternTerm)
	walk = func(t PatternTerm) {
		switch t := t.(type) {
		case *PatternVar:
			out = append(out, t)
		case *PatternSeq:
			for _, it := range t.Items {
				walk(it)
			}
		case *PatternGroup:
			walk(t.Inner)
		case *PatternAlt:
			for _, a := range t.Alts {
				walk(a)
			}
		}
	}
	if s != nil {
		walk(s)
	}
	return out
}

// Define returns the DEFINE entry for variable v, or nil.
func (q *Query) Define(v string) *Define {
	for i := range q.Defines {
		if q.Defines[i].Var == v {
			return &q.Defines[i]
		}
	}
	return nil
}

// Expr is an expression node. Concrete types: *Literal, *Interval,
// *ColumnRef, *Unary, *Binary, *IsNull, *IsBool, *Between, *In, *Like,
// *Case, *Call, *Cast, *UnitArg.
//
// Pos is the position of the expression's first token. String prints the
// expression back as SQL with every compound subexpression parenthesised,
// so that the result re-parses to the same tree.
type Expr interface {
	Pos() Pos
	String() string
	expr()
}

// LitKind is the type of a Literal.
type LitKind int

const (
	LitNull      LitKind = iota // NULL
	LitBool                     // TRUE, FALSE (Bool)
	LitInt                      // an integer that fits int64 (Int, Float)
	LitDecimal                  // exact numeric with a point, or an integer beyond int64 (Text, Float)
	LitFloat                    // approximate numeric with an exponent, 1.5E3 (Text, Float)
	LitString                   // 'text' (Str, unescaped)
	LitDate                     // DATE 'yyyy-mm-dd' (Str)
	LitTime                     // TIME 'hh:mm:ss[.fff]' (Str)
	LitTimestamp                // TIMESTAMP 'yyyy-mm-dd hh:mm:ss[.fff]' (Str)
)

var litKindNames = [...]string{"NULL", "BOOLEAN", "INTEGER", "DECIMAL", "DOUBLE", "STRING", "DATE", "TIME", "TIMESTAMP"}

func (k LitKind) String() string {
	if int(k) < len(litKindNames) {
		return litKindNames[k]
	}
	return "LitKind(" + strconv.Itoa(int(k)) + ")"
}

// Literal is a constant. A minus sign directly before a numeric literal is
// folded into it: -1.0 is one Literal with Text "-1.0".
type Literal struct {
	At    Pos
	Kind  LitKind
	Text  string  // numbers: the digits as written (with a leading '-' if negative)
	Int   int64   // LitInt
	Float float64 // LitInt, LitDecimal, LitFloat: the value as a float64
	Bool  bool    // LitBool
	Str   string  // LitString, LitDate, LitTime, LitTimestamp: the text between the quotes, unescaped
}

// Unit is an interval or time unit.
type Unit int

const (
	UnitNone Unit = iota
	UnitYear
	UnitQuarter
	UnitMonth
	UnitWeek
	UnitDay
	UnitHour
	UnitMinute
	UnitSecond
	UnitMillisecond
	UnitMicrosecond
	UnitNanosecond
)

var unitNames = [...]string{"", "YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND", "MICROSECOND", "NANOSECOND"}

func (u Unit) String() string {
	if int(u) < len(unitNames) {
		return unitNames[u]
	}
	return "Unit(" + strconv.Itoa(int(u)) + ")"
}

// Interval is an interval literal: INTERVAL [-]'Value' From [TO To].
// A day-time interval (DAY..MILLISECOND) has its length in Millis; a
// year-month interval (YEAR, MONTH, YEAR TO MONTH) in Months. Both are
// negative for a negative interval.
type Interval struct {
	At       Pos
	Negative bool   // a sign before the quoted value or inside it
	Value    string // the quoted text as written (unescaped)
	From, To Unit   // To is UnitNone without TO
	// Precision written after the leading unit, e.g. 3 for MINUTE(3); 0 if
	// not written (then the default, 2, applies).
	Precision int
	// FracPrecision written after SECOND, e.g. 3 for SECOND(3); 0 if not written.
	FracPrecision int
	Millis        int64
	Months        int64
}

// YearMonth reports whether the interval counts months rather than milliseconds.
func (iv *Interval) YearMonth() bool {
	return iv.From == UnitYear || iv.From == UnitMonth || iv.From == UnitQuarter
}

// ColumnRef is a column reference: [Var.]Name[.Field...].
//
// Var is the pattern variable qualifying the column (A.price), "" for an
// unqualified column (price, which in DEFINE means the current row and
// inside FIRST/LAST/aggregates means all rows of the match). Fields are
// nested field accesses after the column (A.payload.amount: Var A, Name
// payload, Fields [amount]).
//
// The parser cannot tell a pattern variable from a column of ROW type:
// x.y parses as Var x, Name y. Check, when it knows the input columns and
// x is one of them but not a pattern variable, rewrites it to Name x,
// Fields [y].
type ColumnRef struct {
	At     Pos // the first name
	Var    string
	Name   string
	NameAt Pos
	Fields []string
}

// Unary is a prefix operator: Op is "-", "+", "NOT", or "FINAL" /
// "RUNNING" (MEASURES semantics prefixes).
type Unary struct {
	At Pos
	Op string
	X  Expr
}

// Binary is a binary operator. Op is one of
//
//	OR AND = <> < <= > >= + - * / % || "IS DISTINCT FROM" "IS NOT DISTINCT FROM"
//
// ("!=" is normalised to "<>").
type Binary struct {
	At   Pos // start of L
	OpAt Pos // the operator
	Op   string
	L, R Expr
}

// IsNull is X IS [NOT] NULL (IS [NOT] UNKNOWN also parses to it).
type IsNull struct {
	At  Pos
	X   Expr
	Not bool
}

// IsBool is X IS [NOT] TRUE / X IS [NOT] FALSE.
type IsBool struct {
	At    Pos
	X     Expr
	Not   bool
	Value bool
}

// Between is X [NOT] BETWEEN [SYMMETRIC] Lo AND Hi.
type Between struct {
	At        Pos
	X, Lo, Hi Expr
	Not       bool
	Symmetric bool
}

// In is X [NOT] IN (List...).
type In struct {
	At   Pos
	X    Expr
	List []Expr
	Not  bool
}

// Like is X [NOT] LIKE Pattern [ESCAPE Escape].
type Like struct {
	At      Pos
	X       Expr
	Pattern Expr
	Escape  Expr // nil without ESCAPE
	Not     bool
}

// When is one WHEN ... THEN ... arm of a Case.
type When struct {
	At   Pos
	Cond Expr // the condition (searched CASE) or the value compared with Case.Operand
	Then Expr
}

// Case is CASE [Operand] WHEN ... THEN ... [ELSE Else] END. Operand is nil
// for a searched CASE.
type Case struct {
	At      Pos
	Operand Expr
	Whens   []When
	Else    Expr // nil without ELSE
}

// Call is a function call. Name is the function name upper-cased
// (Spelling keeps it as written). Star is COUNT(*) (Args then empty);
// Distinct is an aggregate's DISTINCT; NoParens marks a niladic function
// written without parentheses (CURRENT_TIMESTAMP).
//
// EXTRACT(unit FROM x), TIMESTAMPADD(unit, n, t) and TIMESTAMPDIFF(unit, a,
// b) are Calls whose first argument is a *UnitArg.
type Call struct {
	At       Pos
	Name     string
	Spelling string
	Args     []Expr
	Star     bool
	StarVar  string // COUNT(X.*): the variable X; "" for COUNT(*)
	StarAt   Pos    // the variable's position
	Distinct bool
	NoParens bool
}

// Cast is CAST(X AS Type) or TRY_CAST(X AS Type).
type Cast struct {
	At   Pos
	X    Expr
	Type TypeName
	Try  bool
}

// TypeName is a SQL type: Name is upper-case and may be several words
// ("DOUBLE PRECISION", "TIMESTAMP WITH LOCAL TIME ZONE"); Args are the
// numbers in parentheses (VARCHAR(10): [10]; DECIMAL(10, 2): [10 2];
// TIMESTAMP(3) WITH LOCAL TIME ZONE: [3]). NotNull records NOT NULL.
type TypeName struct {
	At      Pos
	Name    string
	Args    []int
	NotNull bool
}

// UnitArg is a time-unit argument (the DAY of EXTRACT(DAY FROM x) or
// TIMESTAMPADD(DAY, 1, x)).
type UnitArg struct {
	At   Pos
	Unit Unit
}

func (e *Literal) Pos() Pos   { return e.At }
func (e *Interval) Pos() Pos  { return e.At }
func (e *ColumnRef) Pos() Pos { return e.At }
func (e *Unary) Pos() Pos     { return e.At }
func (e *Binary) Pos() Pos    { return e.At }
func (e *IsNull) Pos() Pos    { return e.At }
func (e *IsBool) Pos() Pos    { return e.At }
func (e *Between) Pos() Pos   { return e.At }
func (e *In) Pos() Pos        { return e.At }
func (e *Like) Pos() Pos      { return e.At }
func (e *Case) Pos() Pos      { return e.At }
func (e *Call) Pos() Pos      { return e.At }
func (e *Cast) Pos() Pos      { return e.At }
func (e *UnitArg) Pos() Pos   { return e.At }

func (*Literal) expr()   {}
func (*Interval) expr()  {}
func (*ColumnRef) expr() {}
func (*Unary) expr()     {}
func (*Binary) expr()    {}
func (*IsNull) expr()    {}
func (*IsBool) expr()    {}
func (*Between) expr()   {}
func (*In) expr()        {}
func (*Like) expr()      {}
func (*Case) expr()      {}
func (*Call) expr()      {}
func (*Cast) expr()      {}
func (*UnitArg) expr()   {}

// Walk calls f for e and then, if f returns true, for each subexpression
// in source order.
func Walk(e Expr, f func(Expr) bool) {
	if e == nil || !f(e) {
		return
	}
	for _, c := range Children(e) {
		Walk(c, f)
	}
}

// Children returns the direct subexpressions of e in source order.
func Children(e Expr) []Expr {
	switch e := e.(type) {
	case *Unary:
		return []Expr{e.X}
	case *Binary:
		return []Expr{e.L, e.R}
	case *IsNull:
		return []Expr{e.X}
	case *IsBool:
		return []Expr{e.X}
	case *Between:
		return []Expr{e.X, e.Lo, e.Hi}
	case *In:
		return append([]Expr{e.X}, e.List...)
	case *Like:
		if e.Escape != nil {
			return []Expr{e.X, e.Pattern, e.Escape}
		}
		return []Expr{e.X, e.Pattern}
	case *Case:
		var out []Expr
		if e.Operand != nil {
			out = append(out, e.Operand)
		}
		for _, w := range e.Whens {
			out = append(out, w.Cond, w.Then)
		}
		if e.Else != nil {
			out = append(out, e.Else)
		}
		return out
	case *Call:
		return e.Args
	case *Cast:
		return []Expr{e.X}
	}
	return nil
}
