// Package nfa is the pattern engine: it parses and validates pattern-v1
// documents, compiles them into a non-deterministic finite automaton with
// Apache Flink CEP's semantics, and runs that automaton per key.
//
// # Using it
//
// Compile a document, make a Matcher, feed it events:
//
//	p, err := nfa.CompileBytes(doc) // JSON or YAML; errors are *PatternError
//	m := nfa.NewMatcher(p)
//	recs, err := m.Event(nfa.Input{Data: data, Raw: raw}) // key and time from the pattern's CEL
//	recs = m.Watermark(t)                                 // explicit watermark
//	recs = m.Finish(true)                                 // end of a bounded input
//
// Records are matches, timed-out partial matches and late events, with the
// JSON form of pattern-v1 (Record.AppendJSON). A Runner runs several patterns
// side by side over JSON lines, as `cepctl run` does.
//
// With a time expression, events are buffered per key until the watermark
// (max event time − outOfOrderness − 1, or an explicit one) passes them, then
// fed in event-time order, ties in arrival order; an event at or below the
// watermark is late. An event further than maxFutureSkew ahead of the
// time it was read at (its ingest time, which the caller gives: no event
// moves it) or of its source's event time, or at either end of int64, is
// refused before it reaches the pattern (Matcher.TimeAt, CheckTimeAt;
// docs/time.md), so neither one bad timestamp nor a series of steps can
// move the watermark far ahead. Without one, events are processed on arrival, at the
// processing time the caller advances with Watermark. A Config whose
// AutoWatermark is false (NewMatcherWith) leaves every watermark to the
// caller, as a cluster does when its leader logs them.
//
// # State
//
// A Matcher's state — per key, the partial matches and the shared buffer of
// the events they hold, plus events waiting for the watermark — encodes
// deterministically (MarshalBinary, AppendKey) and decodes into a Matcher that
// continues exactly as the original would (UnmarshalMatcher, RestoreKey).
// KeyState and Totals report partial-match and buffered-event counts.
//
// # Threading and purity
//
// A Pattern is immutable and safe for concurrent use. A Matcher is not: one
// owner drives it. Nothing in this package does IO, reads the clock, uses
// randomness or starts goroutines, and no output depends on map iteration
// order, so a Matcher is a deterministic function of its inputs — what a Raft
// state machine needs. See DESIGN.md for how the engine mirrors Flink.
package nfa
