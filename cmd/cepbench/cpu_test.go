package main

import (
	"testing"
	"time"
)

// The busy time is user + nice + system + irq + softirq of the first
// ("cpu") line, in USER_HZ ticks; idle, iowait, steal and guest (already in
// user) are left out.
func TestBusyOf(t *testing.T) {
	stat := "cpu  3311986 7 476440 3820938 21027 5 42687 1494 900 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
	got, ok := busyOf([]byte(stat))
	want := time.Duration(3311986+7+476440+5+42687) * time.Second / userHZ
	if !ok || got != want {
		t.Fatalf("busyOf = %v, %v; want %v", got, ok, want)
	}
	for _, bad := range []string{"", "intr 1 2 3\n", "cpu 1 2 x 4 5\n", "cpu 1 2\n"} {
		if _, ok := busyOf([]byte(bad)); ok {
			t.Errorf("busyOf(%q) accepted", bad)
		}
	}
}
