package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
)

// Report is everything one run measured (--json prints it as is).
type Report struct {
	Command  string       `json:"command"`
	Revision string       `json:"revision,omitempty"`
	Date     string       `json:"date"`
	Machine  machine      `json:"machine"`
	Setup    setupInfo    `json:"setup"`
	Ref      *refResult   `json:"reference,omitempty"`
	Thru     *throughput  `json:"throughput,omitempty"`
	Latency  *latency     `json:"latency,omitempty"`
	Fail     *failoverR   `json:"failover,omitempty"`
	Join     *joinResult  `json:"join,omitempty"`
	Scale    *scaleResult `json:"scale,omitempty"`
	Skipped  string       `json:"skipped,omitempty"` // phases not run, and why
	Error    string       `json:"error,omitempty"`
}

type machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	GoVersion string `json:"go_version"`
}

type setupInfo struct {
	Nodes        int    `json:"nodes"`
	InProcess    bool   `json:"in_process"`
	Shards       int    `json:"shards"`
	Replicas     int    `json:"replicas"`
	Events       int    `json:"events"`
	Keys         int    `json:"keys"`
	WindowEvents int    `json:"window_events_per_key"`
	WithinMs     int    `json:"within_ms"`
	Pattern      string `json:"pattern"`
	Patterns     int    `json:"patterns"` // copies of the pattern on the source
	Inflight     int    `json:"publish_inflight"`
	NodeProcs    int    `json:"node_gomaxprocs,omitempty"` // node processes' GOMAXPROCS (0: Go's default)
}

type throughput struct {
	Mode                 string  `json:"mode"` // backlog or live
	Events               int     `json:"events"`
	AppliedSeconds       float64 `json:"applied_seconds"`
	EventsPerSec         float64 `json:"events_per_sec"`
	PublishSeconds       float64 `json:"publish_seconds"`
	PublishEventsPerSec  float64 `json:"publish_events_per_sec"`
	OutboxDrainedSeconds float64 `json:"outbox_drained_seconds"`
	Matches              int64   `json:"matches"`
	Timeouts             int64   `json:"timeouts"`
	DeadLetters          int64   `json:"dead_letters"`
	RatioToReference     float64 `json:"ratio_to_reference"`
	Target               float64 `json:"target"`
	TargetMet            bool    `json:"target_met"`
	CPUTarget            float64 `json:"cpu_target"` // own CPU per event over the reference's, at most
	CPUTargetMet         bool    `json:"cpu_target_met"`
	CPUProfile           string  `json:"cpu_profile,omitempty"`
	// Breakdown is where the CPU of each profiled process went, per event
	Breakdown []cpuBreakdown `json:"cpu_breakdown,omitempty"`
	CPU       *cpuUsage      `json:"machine_cpu,omitempty"`
	Own       *ownCPU        `json:"own_cpu,omitempty"`
	// CPU per event over the reference's: the benchmark's processes, and
	// the machine's
	OwnCPURatio     float64 `json:"own_cpu_per_event_ratio_to_reference,omitempty"`
	MachineCPURatio float64 `json:"machine_cpu_per_event_ratio_to_reference,omitempty"`
}

type latency struct {
	RateTarget   float64 `json:"rate_target"`
	RateAchieved float64 `json:"rate_achieved"`
	Seconds      float64 `json:"seconds"`
	Events       int     `json:"events"`
	Matches      int     `json:"matches"`
	P50Ms        float64 `json:"p50_ms"`
	P90Ms        float64 `json:"p90_ms"`
	P99Ms        float64 `json:"p99_ms"`
	MaxMs        float64 `json:"max_ms"`
}

type failoverR struct {
	Shard             uint32        `json:"shard"`
	Rate              float64       `json:"rate"`
	BoundMs           float64       `json:"bound_ms"`
	ElectionTimeoutMs float64       `json:"election_timeout_ms"`
	MaxFirstOutputMs  float64       `json:"max_kill_to_first_output_ms"`
	AllWithinBound    bool          `json:"all_within_bound"`
	Runs              []failoverRun `json:"runs"`
}

// failoverRun is one SIGKILL of shard 1's leader.
type failoverRun struct {
	Victim              string  `json:"victim"`
	KeyGroups           string  `json:"key_groups"`
	NewLeader           string  `json:"new_leader,omitempty"`
	NewLeaderMs         float64 `json:"kill_to_new_leader_ms,omitempty"`
	FirstOutputMs       float64 `json:"kill_to_first_output_ms"`
	WithinBound         bool    `json:"within_bound"`
	RestartReadyMs      float64 `json:"restart_ready_ms"`
	EventsPublished     int     `json:"events_published"`
	AllAppliedAfter     bool    `json:"all_applied_after"`
	CatchUpAfterStopSec float64 `json:"catch_up_seconds"`
}

func machineInfo() machine {
	m := machine{CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GoVersion: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// revision describes the checked-out tree ("<commit>[-dirty]"), or "".
func revision() string {
	root, err := moduleRoot(context.Background())
	if err != nil {
		return ""
	}
	out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// commandLine is the command that reproduces the run.
func commandLine(args []string) string {
	parts := []string{"go", "run", "./cmd/cepbench"}
	for _, a := range args {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+%@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func sortDurations(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }

// group formats a number, rounded, with thousands separators.
func group(v float64) string { return humanize.Comma(int64(v + 0.5)) }

func mark(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func (r *Report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// printCPU prints the machine's CPU use over a phase.
func printCPU(p func(string, ...any), u *cpuUsage) {
	if u != nil {
		p("             machine CPU: %.2f cores busy, %.1f µs per event", u.Cores, u.MicrosPerEvent)
	}
}

// printOwn prints the CPU of the benchmark's own processes over a phase.
func printOwn(p func(string, ...any), u *ownCPU) {
	if u == nil {
		return
	}
	var each []string
	for _, pr := range u.Processes {
		each = append(each, fmt.Sprintf("%s %.2f s", pr.Name, pr.Seconds))
	}
	p("             own processes' CPU: %.2f cores busy, %.1f µs per event (user+sys: %s)", u.Cores, u.MicrosPerEvent, strings.Join(each, ", "))
}

func ratioText(r float64) string {
	if r == 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.2f x", r)
}

func (r *Report) writeText(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format+"\n", a...) }
	s := r.Setup
	p("")
	if r.Scale != nil {
		p("== cepbench --scale %s ==", r.Scale.Mode)
	} else {
		p("== cepbench: cluster benchmark, pattern 3 (FollowedByOneOrMore) ==")
	}
	p("command:   %s", r.Command)
	if r.Revision != "" {
		p("revision:  %s", r.Revision)
	}
	cpu := ""
	if r.Machine.CPUModel != "" {
		cpu = " (" + r.Machine.CPUModel + ")"
	}
	p("machine:   %d CPUs%s, %s/%s, %s, %s", r.Machine.CPUs, cpu, r.Machine.GOOS, r.Machine.GOARCH, r.Machine.GoVersion, r.Date)
	if r.Scale != nil {
		p("")
		r.Scale.writeText(p)
		if r.Error != "" {
			p("")
			p("ERROR: %s", r.Error)
		}
		p("")
		return
	}
	where := "cepnode processes"
	switch {
	case s.InProcess:
		where = "in process"
	case s.NodeProcs > 0:
		where = fmt.Sprintf("cepnode processes (GOMAXPROCS=%d each)", s.NodeProcs)
	}
	p("cluster:   %d node(s) %s, %d shard(s) x %d replica(s); embedded NATS JetStream in the benchmark process", s.Nodes, where, s.Shards, s.Replicas)
	if s.Patterns > 1 {
		p("patterns:  %d copies of the pattern on the source", s.Patterns)
	}
	p("workload:  %s events, %s keys, within %s ms (~%d events per key), 1%% A / 20%% B / 79%% other, async publish with %d in flight",
		group(float64(s.Events)), group(float64(s.Keys)), group(float64(s.WithinMs)), s.WindowEvents, s.Inflight)
	if r.Ref != nil || r.Thru != nil {
		p("")
		p("throughput")
	}
	if t := r.Thru; t != nil {
		if t.Mode == "live" {
			p("  cluster    %12s events/s  first publish -> all %s applied: %.2f s", group(t.EventsPerSec), group(float64(t.Events)), t.AppliedSeconds)
			p("             publishing took %.2f s (%s events/s acknowledged); outbox published by %.2f s; %s matches, %s timeouts, %d dead letters",
				t.PublishSeconds, group(t.PublishEventsPerSec), t.OutboxDrainedSeconds, group(float64(t.Matches)), group(float64(t.Timeouts)), t.DeadLetters)
		} else {
			p("  cluster    %12s events/s  deploy over a backlog of %s events -> all applied: %.2f s", group(t.EventsPerSec), group(float64(t.Events)), t.AppliedSeconds)
			p("             publishing the backlog took %.2f s (%s events/s); outbox published by %.2f s; %s matches, %s timeouts, %d dead letters",
				t.PublishSeconds, group(t.PublishEventsPerSec), t.OutboxDrainedSeconds, group(float64(t.Matches)), group(float64(t.Timeouts)), t.DeadLetters)
		}
		printCPU(p, t.CPU)
		printOwn(p, t.Own)
		if t.CPUProfile != "" {
			p("             CPU profile of the throughput phase: %s", t.CPUProfile)
			for _, b := range t.Breakdown {
				p("             where %s's CPU went (%.1f µs per event):", b.Profile, b.Total)
				for _, part := range b.Parts {
					p("               %-40s %6.2f µs/event", part.Category, part.MicrosPerEvent)
				}
			}
		}
	}
	if f := r.Ref; f != nil {
		p("  reference  %12s events/s  plain pull consumer, Fetch(%d), ack %s: %.2f s (its publish: %s events/s)",
			group(f.EventsPerSec), f.FetchBatch, f.Ack, f.ConsumeSeconds, group(f.PublishEventsPerSec))
		if len(f.RunsEventsPerSec) > 1 {
			runs := make([]string, len(f.RunsEventsPerSec))
			for i, r := range f.RunsEventsPerSec {
				runs[i] = group(r)
			}
			p("             the median of %d reads of the stream: %s events/s", len(runs), strings.Join(runs, ", "))
		}
		printCPU(p, f.CPU)
		printOwn(p, f.Own)
	}
	if t := r.Thru; t != nil && r.Ref != nil {
		p("  ratio      %12.3f           target >= %.2f: %s", t.RatioToReference, t.Target, mark(t.TargetMet))
		if t.OwnCPURatio > 0 || t.MachineCPURatio > 0 {
			p("  CPU/event  %12s           over the reference's: own processes %s, machine %s; target own <= %.1f x: %s", "", ratioText(t.OwnCPURatio), ratioText(t.MachineCPURatio), t.CPUTarget, mark(t.CPUTargetMet))
		}
	}
	if j := r.Join; j != nil {
		p("")
		p("nodes joining (--join): %d node(s) joined the cluster of %s partial matches and %s buffered events, %d shard(s)",
			j.Nodes, group(float64(j.PartialMatches)), group(float64(j.BufferedEvents)), j.ShardsBefore)
		p("  members after %.2f s; first voting replica on a joined node after %.2f s; every shard with its voting replicas, %d shard(s), after %.2f s (%d layouts seen, polled every %.0f ms)",
			j.Members, j.FirstReplica, j.ShardsAfter, j.Placed, j.Configurations, j.StatusEvery)
	}
	if l := r.Latency; l != nil {
		p("")
		p("latency (publish of a match's last event -> its record received from %s)", "cep.out.<pattern>")
		p("  rate       %s events/s (achieved %s) for %.1f s, %s events", group(l.RateTarget), group(l.RateAchieved), l.Seconds, group(float64(l.Events)))
		p("  matches    %s", group(float64(l.Matches)))
		p("  p50 %.1f ms   p90 %.1f ms   p99 %.1f ms   max %.1f ms", l.P50Ms, l.P90Ms, l.P99Ms, l.MaxMs)
	}
	if f := r.Fail; f != nil {
		p("")
		p("failover (SIGKILL of the leader of shard %d while publishing at %s events/s; first match of its key groups", f.Shard, group(f.Rate))
		p("whose last event was published after the kill; bound 2 x election timeout (%.0f ms) + 0.5 s = %.0f ms)", f.ElectionTimeoutMs, f.BoundMs)
		for i, fr := range f.Runs {
			nl := "no new leader seen"
			if fr.NewLeader != "" {
				nl = fmt.Sprintf("new leader %s after %.0f ms", fr.NewLeader, fr.NewLeaderMs)
			}
			out := "no output"
			if fr.FirstOutputMs > 0 {
				out = fmt.Sprintf("first output after %.0f ms (%s)", fr.FirstOutputMs, mark(fr.WithinBound))
			}
			p("  run %d: killed %s (key groups %s): %s, %s", i+1, fr.Victim, fr.KeyGroups, nl, out)
			if fr.RestartReadyMs > 0 {
				p("         restarted, ready after %.0f ms; all %s events applied afterwards (marker match from every shard): %v (%.1f s after publishing stopped)",
					fr.RestartReadyMs, group(float64(fr.EventsPublished)), fr.AllAppliedAfter, fr.CatchUpAfterStopSec)
			}
		}
		p("  worst %.0f ms of %d run(s); bound %s", f.MaxFirstOutputMs, len(f.Runs), mark(f.AllWithinBound))
	}
	if r.Skipped != "" {
		p("")
		p("%s", r.Skipped)
	}
	if r.Error != "" {
		p("")
		p("ERROR: %s", r.Error)
	}
	p("")
}
