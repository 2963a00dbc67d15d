//go:build !race

package nfa_test

const raceOn = false
