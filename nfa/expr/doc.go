// Package expr compiles and evaluates the CEL expressions of a pattern: the
// conditions of its stages (Flink CEP's where/until clauses) and its key,
// time and emit expressions.
//
// # Usage
//
//	c, err := expr.NewCompiler()            // once; share it
//	cond, err := c.Condition(`e.type == "LOGIN" && e.amount > avg(events("start").map(x, x.amount))`)
//	ev, err := expr.DecodeEvent(jsonBytes)
//	ok, err := cond.Eval(ev, partialMatch) // partialMatch implements expr.Ctx; nil if !cond.UsesEvents()
//
//	key, err := c.Value(`e.user.id`)
//	k, err := key.Eval(ev, nil)
//	ks, err := expr.KeyString(k)           // partition key
//	tv, err := c.Value(`e.ts`)
//	t, err := tv.Eval(ev, nil)
//	ms, err := expr.TimeMillis(t)           // event time
//
// # Environment
//
// An expression sees the variable e, the current event (a map with string
// keys; e.a.b selects nested fields, a missing field is an evaluation
// error, has(e.a) tests presence), the CEL standard library with timestamps
// and durations, the cel-go string extensions (ext.Strings), and:
//
//	events(stage string) list   events the stage has accepted so far in this
//	                            partial match (Ctx.EventsFor); empty for a nil Ctx
//	sum(list)                   int if all elements are ints, double if any is
//	                            a double; 0 for an empty list
//	avg(list)                   double; null for an empty list
//	min(list), max(list)        the least/greatest element; null for an empty list
//	first(list), last(list)     an element; null for an empty list
//
// sum, avg, min and max take numbers only (int, uint and double may be mixed)
// and are evaluation errors on any other element. Ints and doubles compare
// with each other (e.price > 5 and e.n == 1.0 work whatever JSON number form
// the field has); equality between values of different kinds is false and
// ordering them is an error.
//
// # Errors
//
// Compile errors and evaluation errors are single-line errors that say what
// is wrong and, for compile errors, where: the expression quoted, then
// at line:column: and the problem.
// Condition rejects an expression whose type is known not to be bool; one of
// type dyn is accepted and fails at evaluation if it yields a non-bool. An
// evaluation error (missing field, type mismatch, division by zero, cost
// limit) is returned by Eval with a false result; && and || absorb errors as
// CEL defines (false && error is false, true || error is true).
//
// # Cost limits
//
// Compilation estimates the worst-case cost of the expression assuming up to
// EstimatedMaxEvents events per stage and strings, lists and maps of up to
// EstimatedMaxString / EstimatedMaxContainer entries, and rejects
// expressions above MaxCost (e.g. nested iteration over events()) with an
// error that mentions "cost". Each evaluation is also stopped once its
// actual cost reaches MaxRuntimeCost.
//
// # Fast path
//
// Conditions made only of comparisons of event fields with literals
// (e.a.b OP literal, literal OP e.a, OP one of == != < <= > >=), e.a in
// [literals], has(e.a.b), bare fields, bool literals, &&, || and ! are
// compiled into Go closures over the event map and evaluated without the CEL
// interpreter (about 15 ns instead of about 300 ns for e.type == "LOGIN").
// The fast path gives exactly the CEL result, errors included; on inputs it
// does not model (Go types DecodeEvent never produces, NaN) it hands the
// evaluation to CEL. Condition.FastPath reports whether it applies;
// WithoutFastPath disables it. A Value that is a plain field path (e.a.b)
// likewise reads scalar fields directly.
//
// # Concurrency
//
// A Compiler, and every Condition and Value it returns, is safe for
// concurrent use by multiple goroutines: compiled programs are immutable and
// each Eval call uses its own activation, so the same Condition may be
// evaluated concurrently with different events and contexts. Eval calls
// Ctx.EventsFor only during that call and does not retain its result; the
// caller must not mutate an Event or the events returned by EventsFor while
// an Eval that uses them is running. Values returned by Value.Eval for a
// plain field path are the event's own scalars; lists and maps returned are
// fresh copies.
//
// The package is pure: it does no I/O, reads no clock, uses no randomness
// and starts no goroutines.
package expr
