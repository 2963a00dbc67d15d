package nfa

// dewey is a Dewey decimal version number (Flink's DeweyNumber). It tells
// which edges of the shared buffer belong to which run of the automaton: a
// path may follow an edge only when its version is compatible with the edge's.
// A dewey is immutable once built (increase and addStage return new
// values), except a partial match's own version, whose last number
// processing increases in place when bumpsInPlace allows it: so a partial
// match never shares its version's array with another one (edges share at
// most a proper prefix of it).
//
// A take grows the version by a number, so in a loop of n events copying
// it would cost O(n) per event and keep O(n) numbers per edge. When a
// partial match's only take is all it leads to (it does not stay), the
// take's version is its own with a 0 appended in place (nextStates'
// extend), amortised O(1): the array's slots beyond the version are then
// written only by the one partial match holding its longest version (an
// edge holds a prefix; every other way of making a version copies it, and
// only the holder of the longest one extends it, as it ends), and compatible
// compares versions sharing their first number's slot in O(1).
type dewey []int32

func (d dewey) increase(n int) dewey {
	if n == 0 {
		return d // immutable: shared
	}
	out := make(dewey, len(d))
	copy(out, d)
	out[len(out)-1] += int32(n)
	return out
}

// increaseAddStage is increase(n).addStage() in one allocation; the
// increased version is the result without its last number.
func (d dewey) increaseAddStage(n int) dewey {
	out := make(dewey, len(d)+1)
	copy(out, d)
	out[len(d)-1] += int32(n)
	return out
}

// compatible reports whether d is compatible with other: other is a prefix of
// d, or both have the same length, agree on all but the last digit, and d's
// last digit is at least other's.
func (d dewey) compatible(other dewey) bool {
	if len(d) > 0 && len(other) > 0 && &d[0] == &other[0] {
		// one array: the shorter is a prefix of the longer
		return len(d) >= len(other)
	}
	switch {
	case len(d) > len(other):
		for i := range other {
			if d[i] != other[i] {
				return false
			}
		}
		return true
	case len(d) == len(other):
		last := len(d) - 1
		for i := 0; i < last; i++ {
			if d[i] != other[i] {
				return false
			}
		}
		return d[last] >= other[last]
	default:
		return false
	}
}
