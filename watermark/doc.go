// Package watermark handles event time for the CEP engine, following
// Apache Flink's semantics.
//
// All times are int64 milliseconds. MinTime (math.MinInt64) means "no
// watermark yet" and MaxTime (math.MaxInt64) is the final watermark, after
// which no further event can be on time. Processing time is never read from
// a clock: wherever it matters (idleness) it is passed in by the caller as a
// logged tick, so that replaying the same calls reproduces the same results.
//
// The package provides three building blocks:
//
//   - Generator is Flink's bounded out-of-orderness watermark strategy for
//     one source: the watermark trails the largest timestamp seen by the
//     configured out-of-orderness (watermark = max ts − outOfOrderness − 1),
//     may be pushed forward by explicit watermarks ({"$watermark": T} input
//     lines), never decreases, and decides whether an event is late
//     (ts <= watermark).
//
//   - Queue buffers the events of one key until the watermark passes them,
//     so that they can be handed to the pattern matcher in timestamp order.
//     Ties keep arrival order. Pushing in timestamp order costs O(1)
//     amortised; a slightly out-of-order push costs a binary search plus a
//     move proportional to its displacement.
//
//   - Aligner combines the watermarks of several sources feeding one
//     pattern: the combined watermark is the minimum over the active
//     sources, sources without input for the idle timeout are left out (if
//     all are idle, the maximum of them is used), and a source whose
//     watermark runs ahead of the combined one by more than the maximum
//     drift is reported as paused (Flink's watermark alignment).
//
// Generator and Aligner implement encoding.BinaryMarshaler,
// encoding.BinaryAppender and encoding.BinaryUnmarshaler with a versioned,
// canonical byte format, so their state can be carried in snapshots. A
// Queue's contents are exposed in order through Queue.Items; re-pushing them
// in that order restores an identical queue.
//
// The package is pure and deterministic: no IO, no clocks, no randomness,
// no goroutines and no dependence on map iteration order. None of the types
// is safe for concurrent use; each value is meant to be driven by a single
// owner (the shard or operator that holds it).
package watermark
