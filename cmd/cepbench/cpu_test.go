package main

import (
	"errors"
	"strings"
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

// A fixture of /proc/PID/stat whose command name holds spaces and a ')':
// utime 1234 + stime 566 ticks, starttime 98765.
const statFixture = "4242 (cep node) x) S 1 4242 4242 0 -1 4194560 2617 0 0 0 1234 566 0 0 20 0 9 0 98765 1490882560 5120 18446744073709551615 1 1 0 0 0 0 0 0 2143420159 0 0 0 17 1 0 0 0 0 0\n"

func TestParseProcStat(t *testing.T) {
	got, err := parseProcStat([]byte(statFixture))
	if err != nil {
		t.Fatal(err)
	}
	if want := (procTimes{cpu: 18 * time.Second, start: 98765}); got != want {
		t.Fatalf("parseProcStat = %+v; want %+v", got, want)
	}
	for _, bad := range []string{"", "4242 (cepnode S 1 2 3", "4242 (cepnode) S 1 2 3\n",
		strings.Replace(statFixture, " 1234 ", " x ", 1)} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) accepted", bad)
		}
	}
}

// The window is each process's end time minus its start time; a process
// restarted (another start time), unreadable or sampled in another order
// makes the window unknown rather than wrong.
func TestCPUWindow(t *testing.T) {
	snap := func(name string, pid int, cpu time.Duration, start uint64) procSnap {
		return procSnap{namedProc: namedProc{name, pid}, procTimes: procTimes{cpu: cpu, start: start}}
	}
	before := []procSnap{snap("cepbench", 10, 5*time.Second, 100), snap("n1", 11, 2*time.Second, 200)}
	after := []procSnap{snap("cepbench", 10, 6500*time.Millisecond, 100), snap("n1", 11, 4*time.Second, 200)}
	got, err := cpuWindow(before, after, 2*time.Second, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	// 1.5 s + 2 s over 2 s and a million events
	if got.Seconds != 3.5 || got.Cores != 1.75 || got.MicrosPerEvent != 3.5 {
		t.Fatalf("total = %+v; want 3.5 s, 1.75 cores, 3.5 µs/event", got)
	}
	if p := got.Processes; len(p) != 2 || p[0].Seconds != 1.5 || p[0].MicrosPerEvent != 1.5 || p[1].Name != "n1" || p[1].Seconds != 2 || p[1].Cores != 1 {
		t.Fatalf("processes = %+v", p)
	}
	idle, err := cpuWindow(before, after, 2*time.Second, 0)
	if err != nil || idle.MicrosPerEvent != 0 || idle.Processes[1].MicrosPerEvent != 0 || idle.Cores != 1.75 {
		t.Fatalf("no events: %+v, %v", idle, err)
	}

	restarted := []procSnap{after[0], snap("n1", 11, 4*time.Second, 999)}
	gone := []procSnap{after[0], {namedProc: namedProc{"n1", 11}, err: errors.New("no such file")}}
	swapped := []procSnap{after[1], after[0]}
	back := []procSnap{after[0], snap("n1", 11, time.Second, 200)}
	for name, a := range map[string][]procSnap{"restarted": restarted, "gone": gone, "swapped": swapped, "back": back, "short": after[:1]} {
		if r, err := cpuWindow(before, a, 2*time.Second, 10); err == nil {
			t.Errorf("%s: accepted: %+v", name, r)
		}
	}
	if _, err := cpuWindow(before, after, 0, 10); err == nil {
		t.Error("no elapsed time accepted")
	}
}

// The benchmark's own process is found and read.
func TestOwnMeterSelf(t *testing.T) {
	m := startOwn(nil)
	x := 0
	for i := range 50_000_000 {
		x ^= i * i
	}
	_ = x
	got, err := m.stop(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Processes) != 1 || got.Processes[0].Name != "cepbench" {
		t.Fatalf("processes = %+v", got.Processes)
	}
}
