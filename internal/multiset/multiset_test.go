package multiset

import (
	"slices"
	"testing"
)

func TestDiff(t *testing.T) {
	a := []string{"x", "y", "y", "z", "z", "z"}
	b := []string{"z", "y", "w", "z", "w"}
	onlyA, onlyB := Diff(a, b)
	if want := []string{"x", "y", "z"}; !slices.Equal(onlyA, want) {
		t.Errorf("only in a: %v, want %v", onlyA, want)
	}
	if want := []string{"w", "w"}; !slices.Equal(onlyB, want) {
		t.Errorf("only in b: %v, want %v", onlyB, want)
	}
	if x, y := Diff(a, a); len(x)+len(y) != 0 {
		t.Errorf("a against itself: %v %v", x, y)
	}
}
