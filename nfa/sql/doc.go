// Package sql parses Flink SQL MATCH_RECOGNIZE queries into a typed AST
// and checks them against the rules of Flink's MATCH_RECOGNIZE, with
// one-line errors that carry a line:column position.
//
// The package is pure: no IO, no goroutines, no clock. A *Query is plain
// data and may be shared between goroutines once Check has run.
//
// # Usage
//
//	q, err := sql.Parse(text)        // syntax; err is a *sql.Error
//	if err == nil {
//		err = q.Check(columns)   // names and Flink's rules; columns may be nil
//	}
//	if err != nil {
//		return err               // "line 12:9: no field 'amout'. Did you mean 'amount'?"
//	}
//	for _, v := range q.Pattern.Vars() { ... q.Define(v.Name) ... }
//
// # Grammar
//
//	SELECT * | col [AS name], ...         (col may be qualified by the alias)
//	FROM table | (SELECT expr [AS name], ... FROM table [[AS] t] [WHERE expr])
//	MATCH_RECOGNIZE (
//	  [PARTITION BY col, ...]
//	  ORDER BY col [ASC|DESC], ...          (the first is the time attribute)
//	  [MEASURES expr AS name, ...]
//	  [ONE ROW PER MATCH [SHOW TIMEOUT MATCHES]]  (the latter an extension)
//	  [AFTER MATCH SKIP PAST LAST ROW | TO NEXT ROW | TO FIRST v | TO LAST v | TO v]
//	  PATTERN (terms) [WITHIN INTERVAL 'n' unit]
//	  [SUBSET u = (v, ...), ...]              (union variables, Query.Subsets)
//	  DEFINE v AS expr, ...
//	) [[AS] alias] [;]
//
// The clauses must come in this order. Keywords are case-insensitive
// (PARTITION, MEASURES, ONE, AFTER, PATTERN, SUBSET, DEFINE, ASC, DESC,
// WINDOW and LIMIT may also be names after AS, in the SELECT list and
// after a qualifier);
// identifiers are case-sensitive and may be quoted with `back quotes` or
// "double quotes" (a doubled quote inside stands for one); strings use
// single quotes ('it”s'). Comments are -- to the end of the line and
// /* ... */.
//
// PATTERN terms are variables, parenthesised groups and PERMUTE(p, ...),
// each optionally followed by a quantifier * + ? {n} {n,} {n,m} {,m} and
// then optionally by ? (reluctant); sequences of terms may be separated
// by | (alternation, the leftmost alternative preferred). PERMUTE(A, B)
// parses into the alternation of its terms' permutations in lexicographic
// order of their positions (A B | B A), at most 5 terms. Anchors ^ $ and
// exclusions {- -} are rejected by Parse, as Flink rejects them.
//
// Interval literals are INTERVAL [-]'text' unit [TO unit], with units
// YEAR, MONTH, DAY, HOUR, MINUTE, SECOND and, as an extension,
// MILLISECOND and WEEK (plurals accepted), an optional precision such as
// MINUTE(3) or SECOND(2, 3), and the SQL text forms 'd h:m:s.fff' etc.
// As in Flink, the leading field has at most 2 digits unless a precision
// is given: INTERVAL '100' SECOND is an error, INTERVAL '100' SECOND(3) is not.
//
// Expressions, loosest binding first:
//
//	OR
//	AND
//	NOT
//	= <> != < <= > >=, IS [NOT] NULL|TRUE|FALSE|UNKNOWN|DISTINCT FROM,
//	  [NOT] BETWEEN [SYMMETRIC] a AND b, [NOT] IN (...), [NOT] LIKE p [ESCAPE e]
//	+ -
//	* / % ||
//	unary - +, FINAL, RUNNING
//	literals, INTERVAL, DATE/TIME/TIMESTAMP 'text', [V.]col[.field...],
//	f(args), COUNT(*), f(DISTINCT x), CASE, CAST/TRY_CAST(x AS type),
//	EXTRACT(unit FROM x), TIMESTAMPADD/TIMESTAMPDIFF(unit, ...),
//	CURRENT_TIMESTAMP and the other niladic functions, ( expr )
//
// Nesting is limited to MaxDepth levels ("expression nested too deeply").
//
// # AST
//
// Query holds the clauses. Pattern is a *PatternSeq whose items are
// *PatternVar (a variable with its Quantifier{Min, Max (-1 = unbounded),
// Reluctant}), *PatternGroup (a quantified parenthesised sequence) and
// *PatternAlt (alternatives, in preference order, each a *PatternSeq);
// unquantified parentheses are flattened away, and (A)+ is the variable
// A+. Flink accepts only flat sequences of variables; Check also lets
// through quantified groups the engine runs as group patterns (reluctant,
// exact or '?', over single or optional variables, never empty).
//
// Expressions implement Expr: *Literal, *Interval, *ColumnRef{Var, Name,
// Fields}, *Unary, *Binary{Op}, *IsNull, *IsBool, *Between, *In, *Like,
// *Case, *Call{Name (upper case), Args, Star, Distinct}, *Cast and
// *UnitArg. Parentheses leave no node. A minus sign before a number is
// folded into the Literal. Every node has Pos() (its first token) and
// String(), which prints it back as SQL with all compound subexpressions
// parenthesised; Walk and Children traverse a tree.
//
// Calls are not resolved: navigation (PREV, NEXT, FIRST, LAST),
// aggregates (COUNT, SUM, AVG, MIN, MAX, ...), MATCH_ROWTIME,
// MATCH_PROCTIME, CLASSIFIER, CAST and any other name parse alike, and
// Call.IsNavigation, Call.IsAggregate and Call.Offset classify them.
//
// # Checks
//
// Check reports, among others: variables used in MEASURES, DEFINE or AFTER
// MATCH SKIP TO that are not in PATTERN; DEFINE entries for unknown or
// repeated variables; repeated measure names; unknown columns, with a
// suggestion for a likely misspelling; variables repeated in PATTERN
// (other than in separate alternatives), a greedy variable ending an
// alternative, an alternative starting optional right after a greedy
// variable, two alternatives of one alternation that can match no rows,
// patterns that can match no rows, a greedy quantifier on the last
// variable and an optional term right after a greedy variable (all
// rejected by Flink); greedy groups, groups that can match no rows and
// quantified variables and groups inside groups; SUBSET names that are pattern
// variables or repeated; SHOW TIMEOUT MATCHES without WITHIN; navigation
// offsets that are not non-negative integer literals; PREV/NEXT inside
// FIRST/LAST or PREV/NEXT, FIRST/LAST inside PREV/NEXT other than as the
// whole first argument (PREV(FIRST(A.x), 2)); NEXT in DEFINE; aggregates
// inside aggregates or navigation; DISTINCT aggregates; one function over several
// variables; a WITHIN that is not a positive day-time interval; a
// descending time attribute; and select items that are not columns of the
// MATCH_RECOGNIZE output. Problems returns all of them in source order;
// Check returns the first.
//
// Check does not type expressions and does not resolve function names;
// the compiler rejects unknown functions and type errors.
//
// # Where this package departs from Flink
//
//   - PREV(x [, n]) is accepted in DEFINE with any non-negative integer
//     literal n, as pattern-v1 lists PREV. Flink's planner rejects PREV
//     and NEXT with an offset other than 0 ("Flink does not support
//     physical offsets within partition"); Check rejects only NEXT in
//     DEFINE, which would read a row the stream has not brought yet.
//   - PREV and NEXT are accepted in MEASURES, as SQL:2016 has them
//     (Flink rejects them there), also over FIRST/LAST; they move within
//     the match's rows, so beyond its first or last row they are NULL
//     (the standard reads on within the partition).
//   - MILLISECOND and WEEK interval units and plural unit names (MINUTES)
//     are extensions.
//   - Without AFTER MATCH, Skip.Kind is SkipToNextRow, which is what
//     Flink's SQL translation uses (the SQL standard's default is SKIP PAST
//     LAST ROW); Skip.Explicit tells the two apart.
package sql
