//go:build race

package nfa_test

// raceOn: the tests run under the race detector, ten times slower; long
// single-goroutine checks run a smaller case there.
const raceOn = true
