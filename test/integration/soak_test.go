package integration

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/internal/workload"
)

// TestSoak runs the fault suite's cluster and workload for CEP_SOAK (a
// duration; skipped when unset): round after round, a fresh part of the
// workload is published while a fault drawn from the suite is injected and
// healed; after each round every pattern's records so far must be the
// offline engine's over every event so far, each once. It samples each
// process's memory, goroutines, open files and data directory, and the
// JetStream consumers, after the first round and at the end, and fails on
// growth past soakBounds. `make soak DURATION=1h`; CI runs three minutes.
func TestSoak(t *testing.T) {
	v := os.Getenv("CEP_SOAK")
	if v == "" || testing.Short() {
		t.Skip("CEP_SOAK (a duration) unset: the soak runs with make soak DURATION=1h")
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("CEP_SOAK=%q: want a duration such as 3m or 1h", v)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CEP_SOAK_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CEP_SOAK_SEED=%q: want a number", s)
		}
	}
	t.Logf("soak of %v, seed %d (CEP_SOAK_SEED=%d repeats the faults drawn)", d, seed, seed)
	why := labAvailable()
	faults := soakFaults(why == "")
	r := newFaultRun(t, nil, "", why == "", d+10*time.Minute)
	rng := rand.New(rand.NewPCG(seed, 11))
	specs := r.deployWorkload(rng)

	var all []string
	var first, last soakSample
	end := time.Now().Add(d)
	for round := 0; round == 0 || time.Now().Before(end); round++ {
		f := faults[rng.IntN(len(faults))]
		lines := shiftTimes(workload.Sessions(rng, 1000), int64(round)*2_000_000)
		spread := 2 * faultTime
		published := make(chan error, 1)
		go func() { published <- r.publishSpread(lines, len(all), spread) }()
		time.Sleep(spread / 3)
		heal := f.inject(r, rng)
		time.Sleep(faultTime)
		heal()
		healed := time.Now()
		if err := <-published; err != nil {
			t.Fatalf("round %d (%s): %v", round, f.name, err)
		}
		r.waitServing(60 * time.Second)
		all = append(all, lines...)
		total := r.checkRecords(specs, all, nil, f.name)
		if t.Failed() {
			t.Fatalf("round %d (%s, seed %d): records differ", round, f.name, seed)
		}
		t.Logf("round %d: %s; serving %v after it ended; %d events, %d records compared: 0 lost, 0 duplicated, 0 unexpected",
			round, f.name, time.Since(healed).Round(100*time.Millisecond), len(all), total)
		if round == 0 {
			first = r.sample()
			t.Logf("after the first round: %s", first)
		}
	}
	r.replicasAgree()
	// the consumers of leaders that died expire (their inactive threshold)
	for settle := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		last = r.sample()
		if err = soakBounds(first, last); err == nil || time.Now().After(settle) {
			break
		}
	}
	if err != nil {
		t.Fatalf("%v\nconsumers at the start:\n  %s\nat the end:\n  %s", err, strings.Join(first.described, "\n  "), strings.Join(last.described, "\n  "))
	}
	t.Logf("at the end: %s", last)
}

// soakFaults are the suite's faults a soak draws from: those injected on
// a running cluster that leave its membership as it was (not join-remove,
// nor second-process, which is a check of its own), without node flags of
// their own, and the network's only in namespaces.
func soakFaults(lab bool) []fault {
	var out []fault
	for _, f := range faults {
		if f.inject == nil || f.args != nil || f.bin != nil || f.needsLab && !lab || f.name == "join-remove" || f.name == "second-process" {
			continue
		}
		out = append(out, f)
	}
	return out
}

var tsField = regexp.MustCompile(`"ts":(\d+)`)

// shiftTimes moves every line's event time by d milliseconds: each round
// of the soak comes after the last one's (whose fillers closed every
// window).
func shiftTimes(lines []string, d int64) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = tsField.ReplaceAllStringFunc(l, func(m string) string {
			v, _ := strconv.ParseInt(m[len(`"ts":`):], 10, 64)
			return `"ts":` + strconv.FormatInt(v+d, 10)
		})
	}
	return out
}

// soakSample is what the soak watches for leaks.
type soakSample struct {
	nodes     map[string]procSample
	nats      procSample
	consumers int      // JetStream consumers of every stream
	described []string // each consumer, for the failure message
}

type procSample struct {
	rssKB, fds, goroutines int
	diskBytes              int64
}

func (s soakSample) String() string {
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(s.nodes)) {
		n := s.nodes[id]
		parts = append(parts, fmt.Sprintf("%s: %d MiB, %d goroutines, %d files, %d MiB on disk", id, n.rssKB>>10, n.goroutines, n.fds, n.diskBytes>>20))
	}
	parts = append(parts, fmt.Sprintf("NATS: %d MiB, %d files; %d JetStream consumers", s.nats.rssKB>>10, s.nats.fds, s.consumers))
	return strings.Join(parts, "; ")
}

// soakBounds is the growth a soak allows between two samples: some slack
// for a cluster's state to fill its windows and its logs to reach their
// snapshot threshold, none for what grows with time.
func soakBounds(first, last soakSample) error {
	var errs []string
	for id, a := range first.nodes {
		b, ok := last.nodes[id]
		if !ok {
			continue
		}
		if b.goroutines > a.goroutines*3/2+50 {
			errs = append(errs, fmt.Sprintf("%s: goroutines %d -> %d", id, a.goroutines, b.goroutines))
		}
		if b.fds > a.fds*3/2+50 {
			errs = append(errs, fmt.Sprintf("%s: open files %d -> %d", id, a.fds, b.fds))
		}
		if b.rssKB > a.rssKB*2+64<<10 {
			errs = append(errs, fmt.Sprintf("%s: memory %d -> %d MiB", id, a.rssKB>>10, b.rssKB>>10))
		}
		if b.diskBytes > a.diskBytes*2+64<<20 {
			errs = append(errs, fmt.Sprintf("%s: data directory %d -> %d MiB", id, a.diskBytes>>20, b.diskBytes>>20))
		}
	}
	if last.nats.fds > first.nats.fds*3/2+50 {
		errs = append(errs, fmt.Sprintf("NATS: open files %d -> %d", first.nats.fds, last.nats.fds))
	}
	if last.consumers > first.consumers+2 {
		errs = append(errs, fmt.Sprintf("JetStream consumers %d -> %d", first.consumers, last.consumers))
	}
	if len(errs) > 0 {
		return fmt.Errorf("growth past the soak's bounds: %s", strings.Join(errs, "; "))
	}
	return nil
}

// sample reads each live process's resources from /proc and its metrics,
// and the consumers from JetStream.
func (r *faultRun) sample() soakSample {
	s := soakSample{nodes: map[string]procSample{}}
	for _, p := range r.procs {
		if p.cmd == nil || p.cmd.Process == nil {
			continue
		}
		ps := procResources(p.cmd.Process.Pid)
		if lines, err := metricLines(p); err == nil {
			for _, l := range lines {
				if v, ok := strings.CutPrefix(l, "go_goroutines "); ok {
					ps.goroutines, _ = strconv.Atoi(strings.TrimSpace(v))
				}
			}
		}
		ps.diskBytes = dirBytes(p.dir)
		s.nodes[p.id] = ps
	}
	if r.natsProc != nil && r.natsProc.Process != nil {
		s.nats = procResources(r.natsProc.Process.Pid)
	}
	nc, err := nats.Connect(r.natsAt, r.natsAuth...)
	if err != nil {
		r.t.Fatalf("sample: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	streams := js.ListStreams(ctx)
	for info := range streams.Info() {
		s.consumers += info.State.Consumers
		st, err := js.Stream(ctx, info.Config.Name)
		if err != nil {
			continue
		}
		cl := st.ListConsumers(ctx)
		for c := range cl.Info() {
			s.described = append(s.described, fmt.Sprintf("%s/%s (filters %d, pulls waiting %d, inactive after %v, last delivery %v)",
				c.Stream, c.Name, len(c.Config.FilterSubjects)+min(1, len(c.Config.FilterSubject)), c.NumWaiting, c.Config.InactiveThreshold, lastActive(c.Delivered.Last)))
		}
	}
	if err := streams.Err(); err != nil {
		r.t.Fatalf("sample: listing streams: %v", err)
	}
	return s
}

func lastActive(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return time.Since(*t).Round(time.Second).String() + " ago"
}

// procResources reads a process's resident memory and open files.
func procResources(pid int) procSample {
	var ps procSample
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				ps.rssKB, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			}
		}
	}
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		ps.fds = len(fds)
	}
	return ps
}

// dirBytes is the size of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// TestSoakBounds: the soak's leak check passes a cluster that stayed
// within its slack and names each resource that grew past it.
func TestSoakBounds(t *testing.T) {
	node := procSample{rssKB: 100 << 10, fds: 40, goroutines: 300, diskBytes: 10 << 20}
	first := soakSample{nodes: map[string]procSample{"n1": node}, nats: procSample{fds: 30}, consumers: 6}
	same := first
	if err := soakBounds(first, same); err != nil {
		t.Errorf("no growth: %v", err)
	}
	grown := soakSample{nodes: map[string]procSample{"n1": {rssKB: 400 << 10, fds: 200, goroutines: 1000, diskBytes: 200 << 20}},
		nats: procSample{fds: 300}, consumers: 20}
	err := soakBounds(first, grown)
	if err == nil {
		t.Fatal("growth of everything passed")
	}
	for _, what := range []string{"goroutines 300 -> 1000", "open files 40 -> 200", "memory 100 -> 400 MiB", "data directory 10 -> 200 MiB", "NATS: open files", "consumers 6 -> 20"} {
		if !strings.Contains(err.Error(), what) {
			t.Errorf("%q not named in: %v", what, err)
		}
	}
}
