package watermark

import "math"

// Event times and durations are int64 milliseconds. Every sum or
// difference of the two, here and in package nfa, goes through these, so
// that a time near either end of int64 saturates at MinTime or MaxTime
// instead of wrapping round: a wrapped deadline or watermark would jump to
// the other end of time.

// AddSat returns t + d, saturating at MinTime and MaxTime.
func AddSat(t, d int64) int64 {
	s, ok := AddChecked(t, d)
	if ok {
		return s
	}
	if d > 0 {
		return MaxTime
	}
	return MinTime
}

// SubSat returns t − d, saturating at MinTime and MaxTime.
func SubSat(t, d int64) int64 {
	if d == math.MinInt64 {
		// −d does not exist: t − MinInt64 = t + MaxInt64 + 1
		return AddSat(AddSat(t, math.MaxInt64), 1)
	}
	return AddSat(t, -d)
}

// AddChecked returns t + d and whether it fits in an int64.
func AddChecked(t, d int64) (int64, bool) {
	s := t + d
	// overflow iff both operands have the same sign and the sum's differs
	if (t >= 0) == (d >= 0) && (s >= 0) != (t >= 0) {
		return 0, false
	}
	return s, true
}

// Since returns how far t lies after from (t − from), 0 when it does not
// lie after; computed without overflow (the result is at most 2^64 − 1).
func Since(t, from int64) uint64 {
	if t <= from {
		return 0
	}
	return uint64(t) - uint64(from)
}
