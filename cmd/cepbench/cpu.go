package main

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// cpuUsage is the machine's CPU time over a phase, from /proc/stat: it
// counts every process (the embedded NATS server, the publisher, the
// nodes, anything else running), so a run shows whether the phase was
// bound by the machine's cores and what one event cost them.
type cpuUsage struct {
	Cores          float64 `json:"cores_busy"`           // busy CPU time / elapsed time
	MicrosPerEvent float64 `json:"cpu_micros_per_event"` // busy CPU time / events
}

// cpuMeter samples the machine's busy CPU time; ok is false where
// /proc/stat cannot be read (not Linux).
type cpuMeter struct {
	busy time.Duration
	at   time.Time
	ok   bool
}

// userHZ is the unit of /proc/stat (USER_HZ, 100 on every Linux ABI Go
// runs on).
const userHZ = 100

func startCPU() cpuMeter {
	busy, ok := machineBusy()
	return cpuMeter{busy: busy, at: time.Now(), ok: ok}
}

// stop returns the usage since start for events events (nil when unknown).
func (m cpuMeter) stop(events int) *cpuUsage {
	busy, ok := machineBusy()
	d := time.Since(m.at)
	if !ok || !m.ok || d <= 0 || events <= 0 {
		return nil
	}
	used := busy - m.busy
	return &cpuUsage{Cores: used.Seconds() / d.Seconds(), MicrosPerEvent: float64(used.Microseconds()) / float64(events)}
}

// machineBusy reads the time all CPUs spent running code since boot: user,
// nice, system, irq and softirq (not idle, I/O wait or time stolen by the
// hypervisor; guest time is already part of user).
func machineBusy() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	return busyOf(b)
}

// busyOf reads the busy time off the "cpu" line of /proc/stat's text.
func busyOf(b []byte) (time.Duration, bool) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 5 || string(f[0]) != "cpu" {
		return 0, false
	}
	var busy uint64
	for i, s := range f[1:] {
		v, err := strconv.ParseUint(string(s), 10, 64)
		if err != nil {
			return 0, false
		}
		switch i {
		case 0, 1, 2, 5, 6: // user nice system idle iowait irq softirq steal guest guest_nice
			busy += v
		}
	}
	return time.Duration(busy) * time.Second / userHZ, true
}
