// Package sqleval evaluates the expressions of a MATCH_RECOGNIZE query
// (package sql's AST) over the rows of a match, with SQL semantics: NULL
// and three-valued logic, integer and floating-point arithmetic, and
// Flink's running (DEFINE) and final (MEASURES) semantics for pattern
// variables, navigation (FIRST, LAST, PREV, NEXT) and aggregates.
//
// It is a package of its own rather than part of sql so that the parser
// needs nothing but the standard library; it reads values the way the
// engine does (package expr), and package nfa runs it for DEFINE,
// MEASURES and the query's projection.
//
// The package is pure: no IO, no goroutines, no clock (CURRENT_TIMESTAMP
// is Env.Now, which the caller passes in). An Env is used by one
// goroutine at a time.
//
//	if err := sqleval.Supported(q); err != nil { ... } // after q.Check
//	env := &sqleval.Env{Rows: rows, Cur: len(rows) - 1, Now: now}
//	v, err := env.Eval(expr) // nil is SQL NULL
package sqleval
