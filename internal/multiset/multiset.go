// Package multiset compares lists of strings as multisets, for tests that
// check one output against another regardless of order.
package multiset

import "sort"

// Diff returns, sorted, what a holds more times than b and what b holds
// more times than a.
func Diff(a, b []string) (onlyA, onlyB []string) {
	n := map[string]int{}
	for _, x := range a {
		n[x]++
	}
	for _, x := range b {
		n[x]--
	}
	for x, c := range n {
		for ; c > 0; c-- {
			onlyA = append(onlyA, x)
		}
		for ; c < 0; c++ {
			onlyB = append(onlyB, x)
		}
	}
	sort.Strings(onlyA)
	sort.Strings(onlyB)
	return onlyA, onlyB
}
