package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/cepcluster/cep/nfa"
)

// scaleResult is what --scale measured: the cost of many keys or many
// patterns offline (the engine alone, through nfa.Runner as cepctl run
// drives it), or the idle CPU of a cluster.
type scaleResult struct {
	Mode     string       `json:"mode"`
	Pattern  string       `json:"pattern,omitempty"`
	Keys     []keysRow    `json:"keys,omitempty"`
	Patterns []patRow     `json:"patterns,omitempty"`
	Idle     []idlePart   `json:"idle,omitempty"`
	Filters  []filtersRow `json:"filters,omitempty"`
	State    *stateResult `json:"state,omitempty"`
}

// keysRow is one run of --scale keys: a LOGIN then a PAYMENT_FAILED per
// key, so each key holds one partial match waiting for its LOGOUT.
type keysRow struct {
	Keys           int     `json:"keys"`
	Events         int     `json:"events"`
	Seconds        float64 `json:"seconds"`
	EventsPerSec   float64 `json:"events_per_sec"`
	CPUMicros      float64 `json:"cpu_micros_per_event"` // user+sys of this process
	PartialMatches int     `json:"partial_matches"`
	HeapBytes      uint64  `json:"live_heap_bytes"` // after GC, over the heap before the runner
	BytesPerKey    float64 `json:"live_heap_bytes_per_key"`
	PeakRSSBytes   uint64  `json:"peak_rss_bytes"` // VmHWM of the process so far
	LoadAvg        string  `json:"loadavg"`
}

// patRow is one run of --scale patterns: copies of the pattern, renamed,
// over the same events.
type patRow struct {
	Patterns          int     `json:"patterns"`
	Events            int     `json:"events"`
	Seconds           float64 `json:"seconds"`
	EventsPerSec      float64 `json:"events_per_sec"`
	CPUMicros         float64 `json:"cpu_micros_per_event"`
	CPUMicrosPerMatch float64 `json:"cpu_micros_per_event_and_pattern"`
	Matches           int     `json:"matches"`
	LoadAvg           string  `json:"loadavg"`
}

// idlePart is one window of --scale idle.
type idlePart struct {
	What    string  `json:"what"`
	Seconds float64 `json:"seconds"`
	Own     *ownCPU `json:"own_cpu"`
	LoadAvg string  `json:"loadavg"`
}

// loadAvg is the first three fields of /proc/loadavg ("" elsewhere).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// peakRSS is the process's VmHWM from /proc/self/status, in bytes.
func peakRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n * 1024
		}
	}
	return 0
}

func parseCounts(s, flag string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 10_000_000 {
			return nil, fmt.Errorf("%s: %q is not a count in [1, 10000000]", flag, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// readScalePattern reads the pattern file, relative to the module root when
// not found where the benchmark runs.
func readScalePattern(ctx context.Context, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil && !filepath.IsAbs(path) {
		if root, rerr := moduleRoot(ctx); rerr == nil {
			b, err = os.ReadFile(filepath.Join(root, path))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("--scale-pattern: %w", err)
	}
	return b, nil
}

// selfCPU is the user+sys time of this process so far.
func selfCPU() time.Duration {
	s := sampleProcs([]namedProc{{name: "cepbench", pid: os.Getpid()}})
	return s[0].cpu
}

// keyEvent writes the event of index i of --scale keys: for n keys, the
// LOGIN of every key, then the PAYMENT_FAILED of every key, ts growing with
// the index over 200 s (inside the pattern's 5 minutes, so no partial
// match ends).
func keyEvent(buf []byte, i, n int) []byte {
	ts := 1_000_000 + int64(i)*200_000/int64(2*n)
	buf = append(buf[:0], `{"account":"k`...)
	buf = strconv.AppendInt(buf, int64(i%n), 10)
	if i < n {
		buf = append(buf, `","type":"LOGIN","ts":`...)
	} else {
		buf = append(buf, `","type":"PAYMENT_FAILED","amount":12.5,"ts":`...)
	}
	buf = strconv.AppendInt(buf, ts, 10)
	return append(buf, '}')
}

// measureKeys runs the pattern over a LOGIN and a PAYMENT_FAILED per key
// for each count of keys, and measures the live heap the runner holds once
// every key waits with its partial match.
func measureKeys(spec []byte, counts []int, memprofile string, log *slog.Logger) ([]keysRow, error) {
	var rows []keysRow
	for ci, n := range counts {
		p, err := nfa.CompileBytes(spec)
		if err != nil {
			return rows, err
		}
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		row := keysRow{Keys: n, Events: 2 * n, LoadAvg: loadAvg()}
		r := nfa.NewRunner(p)
		var buf []byte
		cpu0, start := selfCPU(), time.Now()
		for i := range 2 * n {
			buf = keyEvent(buf, i, n)
			if _, err := r.Line(buf); err != nil {
				return rows, fmt.Errorf("%d keys, event %d: %w", n, i, err)
			}
			if len(r.DeadLetters()) > 0 {
				return rows, fmt.Errorf("%d keys, event %d dead-lettered: %s", n, i, r.DeadLetters()[0].Reason)
			}
		}
		d, cpu := time.Since(start), selfCPU()-cpu0
		row.Seconds, row.EventsPerSec = d.Seconds(), float64(2*n)/d.Seconds()
		row.CPUMicros = float64(cpu.Microseconds()) / float64(2*n)
		m := r.Matchers()[0]
		partial, _ := m.Totals()
		row.PartialMatches = partial
		if partial != n || m.Keys() != n {
			return rows, fmt.Errorf("%d keys: the runner holds %d partial matches on %d keys, want one per key", n, partial, m.Keys())
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > base {
			row.HeapBytes = ms.HeapAlloc - base
		}
		row.BytesPerKey = float64(row.HeapBytes) / float64(n)
		row.PeakRSSBytes = peakRSS()
		if memprofile != "" && ci == len(counts)-1 {
			f, err := os.Create(memprofile)
			if err != nil {
				return rows, err
			}
			err = pprof.WriteHeapProfile(f)
			f.Close()
			if err != nil {
				return rows, err
			}
		}
		runtime.KeepAlive(r)
		rows = append(rows, row)
		log.Info("scale keys", "keys", n, "events/s", int(row.EventsPerSec), "bytes/key", int(row.BytesPerKey), "cpu µs/event", row.CPUMicros)
	}
	return rows, nil
}

var nameLine = regexp.MustCompile(`(?m)^name:\s*(\S+)\s*$`)

// measurePatterns runs count copies of the pattern (each renamed) over the
// same events: keys accounts each logging in, failing two payments and
// logging out in turn, so every copy matches every key's cycle.
func measurePatterns(spec []byte, counts []int, events, keys int, log *slog.Logger) ([]patRow, error) {
	if !nameLine.Match(spec) {
		return nil, fmt.Errorf("--scale-pattern: no top-level \"name:\" line to rename the copies by")
	}
	lines := make([][]byte, events)
	kinds := []string{`"type":"LOGIN"`, `"type":"PAYMENT_FAILED","amount":12.5`, `"type":"PAYMENT_FAILED","amount":7`, `"type":"LOGOUT"`}
	for i := range events {
		k := i % keys
		lines[i] = fmt.Appendf(nil, `{"account":"k%d",%s,"ts":%d}`, k, kinds[(i/keys)%len(kinds)], 1_000_000+int64(i)*10)
	}
	var rows []patRow
	for _, n := range counts {
		var ps []*nfa.Pattern
		for j := range n {
			s := nameLine.ReplaceAll(spec, []byte("name: ${1}-"+strconv.Itoa(j)))
			p, err := nfa.CompileBytes(s)
			if err != nil {
				return rows, err
			}
			ps = append(ps, p)
		}
		r := nfa.NewRunner(ps...)
		row := patRow{Patterns: n, Events: events, LoadAvg: loadAvg()}
		runtime.GC()
		cpu0, start := selfCPU(), time.Now()
		for i, l := range lines {
			recs, err := r.Line(l)
			if err != nil {
				return rows, fmt.Errorf("%d patterns, event %d: %w", n, i, err)
			}
			for _, rec := range recs {
				if rec.Type == "match" {
					row.Matches++
				}
			}
		}
		for _, rec := range r.Finish(true) {
			if rec.Type == "match" {
				row.Matches++
			}
		}
		d, cpu := time.Since(start), selfCPU()-cpu0
		row.Seconds, row.EventsPerSec = d.Seconds(), float64(events)/d.Seconds()
		row.CPUMicros = float64(cpu.Microseconds()) / float64(events)
		row.CPUMicrosPerMatch = row.CPUMicros / float64(n)
		// every copy matches each key's full cycles alike
		if want := n * (events / (keys * len(kinds))) * keys; row.Matches != want {
			return rows, fmt.Errorf("%d patterns: %d matches, want %d (each copy one per key and cycle)", n, row.Matches, want)
		}
		rows = append(rows, row)
		log.Info("scale patterns", "patterns", n, "events/s", int(row.EventsPerSec), "cpu µs/event", row.CPUMicros)
	}
	return rows, nil
}

// measureIdle starts three cepnode processes with --shards shards (three
// replicas each), waits until they are ready and every shard has a leader,
// lets elections settle, then samples each node's CPU over --idle-for with
// no traffic: first with nothing deployed, then with a source and the
// benchmark's pattern deployed (its readers polling an empty stream).
func measureIdle(ctx context.Context, o *options, dir, natsURL string, log *slog.Logger) ([]idlePart, error) {
	bin := o.cepnode
	if bin == "" {
		log.Info("building cepnode")
		var err error
		if bin, err = buildCepnode(ctx, dir); err != nil {
			return nil, err
		}
	}
	c, err := startProcesses(bin, dir, natsURL, 3, o.shards, o.nodeProcs, o.nodeLogLevel, log)
	if err != nil {
		return nil, fmt.Errorf("start nodes: %w", err)
	}
	defer c.close()
	if err := c.waitReady(ctx, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("nodes not ready: %w", err)
	}
	if err := poll(ctx, 2*time.Minute, 200*time.Millisecond, func() error {
		for sh := 1; sh <= o.shards; sh++ {
			if _, err := shardLeader(ctx, c, uint32(sh)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("shards without a leader: %w", err)
	}
	var parts []idlePart
	window := func(what string) error {
		log.Info("idle: settling", "for", o.idleSettle, "then sampling", o.idleFor, "what", what)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.idleSettle):
		}
		if err := c.checkProcesses(); err != nil {
			return err
		}
		m := startOwn(c)
		var prof chan error
		if o.cpuprofile != "" {
			prof = make(chan error, 1)
			go func() {
				prof <- nodeProfile(ctx, c.members[0].api, o.idleFor, fmt.Sprintf("%s.%d", o.cpuprofile, len(parts)))
			}()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.idleFor):
		}
		own, err := m.stop(0)
		if err != nil {
			return err
		}
		if prof != nil {
			if err := <-prof; err != nil {
				log.Warn("idle: CPU profile of n1", "err", err)
			}
		}
		parts = append(parts, idlePart{What: what, Seconds: o.idleFor.Seconds(), Own: own, LoadAvg: loadAvg()})
		log.Info("idle", "what", what, "cores", fmt.Sprintf("%.3f", own.Cores))
		return nil
	}
	if err := window("nothing deployed"); err != nil {
		return parts, err
	}
	if err := setup(ctx, c, sourceName, o.sourceKey, patternSpec(patternName, sourceName, o.keys, o.window)); err != nil {
		return parts, err
	}
	return parts, window("a source and a pattern deployed, no events")
}

// nodeProfile writes a CPU profile of the node serving api (run with
// --pprof) over d to path.
func nodeProfile(ctx context.Context, api string, d time.Duration, path string) error {
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", api, max(1, int(d.Seconds())))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, res.Status)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// runScale runs --scale's measurement into rep.
func runScale(ctx context.Context, o *options, rep *Report, dir string, startNATS func() (string, func(), error), log *slog.Logger) error {
	res := &scaleResult{Mode: o.scale}
	rep.Scale = res
	switch o.scale {
	case "keys", "patterns":
		spec, err := readScalePattern(ctx, o.scalePattern)
		if err != nil {
			return err
		}
		res.Pattern = o.scalePattern
		counts, err := parseCounts(o.scaleCounts(), "--scale-counts")
		if err != nil {
			return err
		}
		if o.scale == "keys" {
			res.Keys, err = measureKeys(spec, counts, o.memprofile, log)
		} else {
			res.Patterns, err = measurePatterns(spec, counts, o.events, o.keys, log)
		}
		return err
	case "idle":
		url, stop, err := startNATS()
		if err != nil {
			return err
		}
		defer stop()
		res.Idle, err = measureIdle(ctx, o, dir, url, log)
		return err
	case "filters":
		url, stop, err := startNATS()
		if err != nil {
			return err
		}
		defer stop()
		res.Filters, err = measureFilters(ctx, o, url, log)
		return err
	case "state":
		url, stop, err := startNATS()
		if err != nil {
			return err
		}
		defer stop()
		res.State, err = measureState(ctx, o, dir, url, log)
		return err
	}
	return fmt.Errorf("--scale: want keys, patterns, idle, filters or state")
}

// writeScale prints what --scale measured.
func (r *scaleResult) writeText(p func(string, ...any)) {
	switch r.Mode {
	case "keys":
		p("offline, %s: a LOGIN then a PAYMENT_FAILED per key (one partial match per key waiting for its LOGOUT)", r.Pattern)
		p("%10s %10s %14s %14s %16s %14s %14s  %s", "keys", "events", "events/s", "CPU µs/event", "live heap", "bytes/key", "peak RSS", "load avg")
		for _, k := range r.Keys {
			p("%10s %10s %14s %14.2f %16s %14s %14s  %s", group(float64(k.Keys)), group(float64(k.Events)), group(k.EventsPerSec), k.CPUMicros,
				group(float64(k.HeapBytes)), group(k.BytesPerKey), group(float64(k.PeakRSSBytes)), k.LoadAvg)
		}
	case "patterns":
		p("offline, copies of %s over the same events (each key: LOGIN, 2 PAYMENT_FAILED, LOGOUT, in turn)", r.Pattern)
		p("%10s %10s %14s %14s %22s %12s  %s", "patterns", "events", "events/s", "CPU µs/event", "CPU µs/event/pattern", "matches", "load avg")
		for _, k := range r.Patterns {
			p("%10d %10s %14s %14.2f %22.3f %12s  %s", k.Patterns, group(float64(k.Events)), group(k.EventsPerSec), k.CPUMicros, k.CPUMicrosPerMatch, group(float64(k.Matches)), k.LoadAvg)
		}
	case "idle":
		p("idle CPU of 3 cepnode processes (user+sys from /proc/PID/stat; a core is 1.00)")
		for _, part := range r.Idle {
			var each []string
			for _, pr := range part.Own.Processes {
				each = append(each, fmt.Sprintf("%s %.3f", pr.Name, pr.Cores))
			}
			p("  %s, over %.0f s (load avg %s): %s cores", part.What, part.Seconds, part.LoadAvg, strings.Join(each, ", "))
		}
	case "state":
		if r.State != nil {
			r.State.writeText(p)
		}
	case "filters":
		p("NATS only: a source stream read by shards' consumers in each layout; CPU of this process (server and readers) per stored event")
		p("%-26s %10s %8s %10s %9s %14s %8s  %s", "layout", "consumers", "filters", "delivered", "seconds", "CPU µs/event", "cores", "load avg")
		for _, f := range r.Filters {
			p("%-26s %10d %8d %10s %9.2f %14.2f %8.2f  %s", f.Layout, f.Consumers, f.Filters, group(float64(f.Delivered)), f.Seconds, f.CPUMicros, f.CPUCores, f.LoadAvg)
		}
		for _, f := range r.Filters {
			p("  %s: %s", f.Layout, f.Describing)
		}
	}
}
