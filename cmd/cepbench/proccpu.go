package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// ownCPU is the CPU time of the benchmark's own processes over a phase,
// from /proc/PID/stat (user + system): unlike the machine-wide figure it
// leaves out whatever else the machine runs. The benchmark process holds
// the embedded NATS server, the publisher, the reference consumer and
// (--nodes 1) the node, so those are not told apart; cepnode processes
// (--nodes 3) are listed each.
type ownCPU struct {
	Cores          float64   `json:"cores_busy"`           // CPU time / elapsed time
	MicrosPerEvent float64   `json:"cpu_micros_per_event"` // CPU time / events (0 when no events)
	Seconds        float64   `json:"cpu_seconds"`
	Processes      []procCPU `json:"processes"`
}

// procCPU is one process's share.
type procCPU struct {
	Name           string  `json:"name"`
	PID            int     `json:"pid"`
	Seconds        float64 `json:"cpu_seconds"`
	Cores          float64 `json:"cores_busy"`
	MicrosPerEvent float64 `json:"cpu_micros_per_event,omitempty"`
}

// procTimes is what /proc/PID/stat says of a process: its CPU time and
// its start time (in ticks since boot), which tells a restarted process
// that was given the same pid from the one sampled before.
type procTimes struct {
	cpu   time.Duration
	start uint64
}

// parseProcStat reads utime and stime (fields 14 and 15, in USER_HZ ticks)
// and starttime (field 22) off /proc/PID/stat's text. Field 2, the command
// name in parentheses, may hold spaces and parentheses itself, so fields
// are counted from the last ')'.
func parseProcStat(b []byte) (procTimes, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procTimes{}, fmt.Errorf("no ')' after the command name")
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3 (state)
	const utime, stime, starttime = 14 - 3, 15 - 3, 22 - 3
	if len(f) <= starttime {
		return procTimes{}, fmt.Errorf("%d fields after the command name, want at least %d", len(f), starttime+1)
	}
	var v [3]uint64
	for j, k := range []int{utime, stime, starttime} {
		n, err := strconv.ParseUint(string(f[k]), 10, 64)
		if err != nil {
			return procTimes{}, fmt.Errorf("field %d: %v", k+3, err)
		}
		v[j] = n
	}
	return procTimes{cpu: time.Duration(v[0]+v[1]) * time.Second / userHZ, start: v[2]}, nil
}

// namedProc is a process to measure.
type namedProc struct {
	name string
	pid  int
}

// procSnap is one sample of a process.
type procSnap struct {
	namedProc
	procTimes
	err error // the process could not be read (gone, or not Linux)
}

func sampleProcs(ps []namedProc) []procSnap {
	out := make([]procSnap, len(ps))
	for i, p := range ps {
		out[i].namedProc = p
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/stat")
		if err == nil {
			out[i].procTimes, err = parseProcStat(b)
		}
		out[i].err = err
	}
	return out
}

// cpuWindow is the CPU time each process used between two samples of the
// same processes, in order: an error when a process could not be read at
// either end or is not the same process at the end (restarted, its time
// since the first sample unknown).
func cpuWindow(before, after []procSnap, elapsed time.Duration, events int) (*ownCPU, error) {
	if len(before) != len(after) {
		return nil, fmt.Errorf("%d processes sampled at the start, %d at the end", len(before), len(after))
	}
	if elapsed <= 0 {
		return nil, fmt.Errorf("no time elapsed")
	}
	res := &ownCPU{}
	var total time.Duration
	for i, b := range before {
		a := after[i]
		switch {
		case a.name != b.name || a.pid != b.pid:
			return nil, fmt.Errorf("process %d is %s (%d) at the end, %s (%d) at the start", i, a.name, a.pid, b.name, b.pid)
		case b.err != nil:
			return nil, fmt.Errorf("%s (pid %d) at the start: %v", b.name, b.pid, b.err)
		case a.err != nil:
			return nil, fmt.Errorf("%s (pid %d) at the end: %v", a.name, a.pid, a.err)
		case a.start != b.start:
			return nil, fmt.Errorf("%s (pid %d) restarted during the window", a.name, a.pid)
		case a.cpu < b.cpu:
			return nil, fmt.Errorf("%s (pid %d): CPU time went back from %v to %v", a.name, a.pid, b.cpu, a.cpu)
		}
		d := a.cpu - b.cpu
		total += d
		p := procCPU{Name: b.name, PID: b.pid, Seconds: d.Seconds(), Cores: d.Seconds() / elapsed.Seconds()}
		if events > 0 {
			p.MicrosPerEvent = float64(d.Microseconds()) / float64(events)
		}
		res.Processes = append(res.Processes, p)
	}
	res.Seconds, res.Cores = total.Seconds(), total.Seconds()/elapsed.Seconds()
	if events > 0 {
		res.MicrosPerEvent = float64(total.Microseconds()) / float64(events)
	}
	return res, nil
}

// ownMeter samples the benchmark's processes at the start of a window.
type ownMeter struct {
	procs  []namedProc
	before []procSnap
	at     time.Time
}

// ownProcs is the benchmark process and every live node process of c (nil
// c: the benchmark process alone).
func ownProcs(c *benchCluster) []namedProc {
	ps := []namedProc{{name: "cepbench", pid: os.Getpid()}}
	if c != nil {
		for _, m := range c.members {
			if m.cmd != nil && m.alive() {
				ps = append(ps, namedProc{name: m.id, pid: m.cmd.Process.Pid})
			}
		}
	}
	return ps
}

func startOwn(c *benchCluster) *ownMeter {
	ps := ownProcs(c)
	return &ownMeter{procs: ps, before: sampleProcs(ps), at: time.Now()}
}

// stop returns the processes' CPU over the window for events events (0:
// none, per event figures left out), or nil with the reason logged by the
// caller.
func (m *ownMeter) stop(events int) (*ownCPU, error) {
	after := sampleProcs(m.procs)
	return cpuWindow(m.before, after, time.Since(m.at), events)
}
