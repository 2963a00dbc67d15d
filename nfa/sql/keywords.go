package sql

import "strings"

// reserved are the words that cannot be used unquoted as a column, variable
// or alias name, because they start or continue clauses and operators.
var reserved = map[string]bool{
	"SELECT": true, "FROM": true, "WHERE": true, "AS": true, "AND": true, "OR": true,
	"NOT": true, "IS": true, "BETWEEN": true, "IN": true, "LIKE": true, "CASE": true,
	"WHEN": true, "THEN": true, "ELSE": true, "END": true, "MATCH_RECOGNIZE": true,
	"PARTITION": true, "ORDER": true, "BY": true, "MEASURES": true, "ONE": true,
	"ALL": true, "AFTER": true, "PATTERN": true, "WITHIN": true, "SUBSET": true,
	"DEFINE": true, "ASC": true, "DESC": true, "GROUP": true, "HAVING": true,
	"ESCAPE": true, "DISTINCT": true, "UNION": true, "JOIN": true, "ON": true,
	"LIMIT": true, "WINDOW": true, "NULL": true, "TRUE": true, "FALSE": true,
	"UNKNOWN": true, "INTERVAL": true, "CAST": true, "TRY_CAST": true,
}

func isReserved(s string) bool { return reserved[strings.ToUpper(s)] }

// nonReserved are the reserved words that SQL:2016 or Trino leave
// non-reserved: they may name a measure, column or alias after AS, in a
// SELECT list and after a qualifier (A.partition), where they cannot
// start a clause.
var nonReserved = map[string]bool{
	"PARTITION": true, "MEASURES": true, "ONE": true, "AFTER": true, "PATTERN": true,
	"SUBSET": true, "DEFINE": true, "ASC": true, "DESC": true, "WINDOW": true, "LIMIT": true,
}

// niladic are functions called without parentheses.
var niladic = map[string]bool{
	"CURRENT_TIMESTAMP": true, "CURRENT_DATE": true, "CURRENT_TIME": true,
	"LOCALTIMESTAMP": true, "LOCALTIME": true,
}

// needsQuote reports whether name must be quoted to print back as a name.
func needsQuote(name string) bool {
	if name == "" {
		return true
	}
	for i, r := range name {
		switch {
		case r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '$'):
		default:
			return true
		}
	}
	u := strings.ToUpper(name)
	switch u {
	case "DATE", "TIME", "TIMESTAMP", "FINAL", "RUNNING", "EXTRACT", "PERMUTE":
		return true
	}
	return reserved[u] || niladic[u] || unitWords[u] != UnitNone
}

// quoteIdent prints a name, back-quoting it when needed.
func quoteIdent(name string) string {
	if !needsQuote(name) {
		return name
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// Function classes.
var (
	aggregateFuncs = map[string]bool{
		"COUNT": true, "SUM": true, "AVG": true, "MIN": true, "MAX": true,
		"STDDEV_POP": true, "STDDEV_SAMP": true, "VAR_POP": true, "VAR_SAMP": true,
		"STDDEV": true, "VARIANCE": true, "COLLECT": true, "LISTAGG": true,
		"MAX_BY": true, "MIN_BY": true, "ARBITRARY": true,
	}
	navigationFuncs = map[string]bool{"PREV": true, "NEXT": true, "FIRST": true, "LAST": true}
)

// IsAggregate reports whether the upper-case function name is a built-in
// aggregate function (COUNT, SUM, AVG, MIN, MAX, STDDEV_POP, STDDEV_SAMP,
// VAR_POP, VAR_SAMP, STDDEV, VARIANCE, COLLECT, LISTAGG, MAX_BY, MIN_BY,
// ARBITRARY).
func IsAggregate(name string) bool { return aggregateFuncs[name] }

// IsNavigation reports whether the upper-case function name is a pattern
// navigation function: PREV, NEXT (physical offsets) or FIRST, LAST
// (logical offsets).
func IsNavigation(name string) bool { return navigationFuncs[name] }

// IsAggregate reports whether c calls a built-in aggregate function.
func (c *Call) IsAggregate() bool { return aggregateFuncs[c.Name] }

// IsNavigation reports whether c is PREV, NEXT, FIRST or LAST.
func (c *Call) IsNavigation() bool { return navigationFuncs[c.Name] }

// Offset returns the offset argument of a navigation call: the second
// argument when it is an integer literal, 0 for FIRST/LAST and 1 for
// PREV/NEXT without one. ok is false when the second argument is not an
// integer literal (Check reports that).
func (c *Call) Offset() (n int64, ok bool) {
	if len(c.Args) < 2 {
		if c.Name == "PREV" || c.Name == "NEXT" {
			return 1, true
		}
		return 0, true
	}
	if l, isLit := c.Args[1].(*Literal); isLit && l.Kind == LitInt {
		return l.Int, true
	}
	return 0, false
}

var unitWords = map[string]Unit{
	"YEAR": UnitYear, "YEARS": UnitYear,
	"QUARTER": UnitQuarter, "QUARTERS": UnitQuarter,
	"MONTH": UnitMonth, "MONTHS": UnitMonth,
	"WEEK": UnitWeek, "WEEKS": UnitWeek,
	"DAY": UnitDay, "DAYS": UnitDay,
	"HOUR": UnitHour, "HOURS": UnitHour,
	"MINUTE": UnitMinute, "MINUTES": UnitMinute,
	"SECOND": UnitSecond, "SECONDS": UnitSecond,
	"MILLISECOND": UnitMillisecond, "MILLISECONDS": UnitMillisecond,
	"MICROSECOND": UnitMicrosecond, "MICROSECONDS": UnitMicrosecond,
	"NANOSECOND": UnitNanosecond, "NANOSECONDS": UnitNanosecond,
}

func unitOf(t token) Unit {
	if t.kind != tIdent {
		return UnitNone
	}
	return unitWords[strings.ToUpper(t.text)]
}
