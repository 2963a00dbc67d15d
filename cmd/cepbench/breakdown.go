package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// cpuCategory is a part of the cluster a CPU sample is charged to: the
// first category (in cpuCategories' order) with a function on the
// sample's stack matching its pattern.
type cpuCategory struct {
	name string
	re   *regexp.Regexp
}

// cpuCategories splits a node's or the NATS server's CPU into the parts
// the cost per event is made of. The order matters: the matcher runs
// inside the shard's apply, which runs inside Raft's FSM goroutine.
var cpuCategories = []cpuCategory{
	{"nfa matcher (shard apply)", regexp.MustCompile(`nfa\.\(\*Matcher\)|shard\.\(\*patternRT\)`)},
	{"event JSON decoding", regexp.MustCompile(`shard\.decodeAll|nfa\.DecodeInput`)},
	{"shard apply, other", regexp.MustCompile(`shard\.\(\*FSM\)\.Apply|raft\.\(\*Raft\)\.runFSM`)},
	{"Raft log store and replication", regexp.MustCompile(`raft-boltdb|go\.etcd\.io/bbolt|hashicorp/raft\.`)},
	{"NATS server: consumers delivering", regexp.MustCompile(`nats-server.*\(\*consumer\)`)},
	{"NATS server: storing", regexp.MustCompile(`nats-server.*(\(\*stream\)|\(\*fileStore\)|\(\*msgBlock\))`)},
	{"NATS server: other", regexp.MustCompile(`nats-server`)},
	{"NATS client (reads, publishes)", regexp.MustCompile(`nats-io/nats\.go|nats%2ego`)},
	{"shard leader: ingest, outbox, clock", regexp.MustCompile(`cepcluster/cep/cluster`)},
	{"garbage collector", regexp.MustCompile(`runtime\.(gcBgMarkWorker|gcDrain|bgsweep|bgscavenge)`)},
}

const otherCategory = "other (runtime, syscalls, timers)"

// cpuPart is one category's CPU.
type cpuPart struct {
	Category       string  `json:"category"`
	Seconds        float64 `json:"cpu_seconds"`
	MicrosPerEvent float64 `json:"cpu_micros_per_event"`
}

// cpuBreakdown is where a profile's CPU went, per event.
type cpuBreakdown struct {
	Profile string    `json:"profile"`
	Events  float64   `json:"events"` // the events the profile's window applied
	Parts   []cpuPart `json:"parts"`  // largest first
	Total   float64   `json:"cpu_micros_per_event"`
}

// breakdownFile reads a CPU profile and charges its samples to categories
// per event, for events applied during the profile.
func breakdownFile(path string, events float64) (*cpuBreakdown, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b, err := breakdown(p, events)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b.Profile = path
	return b, nil
}

// breakdown charges p's CPU samples to cpuCategories.
func breakdown(p *profile.Profile, events float64) (*cpuBreakdown, error) {
	vi := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "cpu" && t.Unit == "nanoseconds" })
	if vi < 0 {
		return nil, fmt.Errorf("not a CPU profile")
	}
	if events <= 0 {
		return nil, fmt.Errorf("no events")
	}
	ns := map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		v := s.Value[vi]
		total += v
		ns[category(s)] += v
	}
	b := &cpuBreakdown{Events: events, Total: float64(total) / 1e3 / events}
	for c, v := range ns {
		b.Parts = append(b.Parts, cpuPart{Category: c, Seconds: float64(v) / 1e9, MicrosPerEvent: float64(v) / 1e3 / events})
	}
	slices.SortFunc(b.Parts, func(x, y cpuPart) int {
		if x.Seconds != y.Seconds {
			if x.Seconds > y.Seconds {
				return -1
			}
			return 1
		}
		return strings.Compare(x.Category, y.Category)
	})
	return b, nil
}

// category is the first of cpuCategories with a function on s's stack.
func category(s *profile.Sample) string {
	for _, c := range cpuCategories {
		for _, loc := range s.Location {
			for _, l := range loc.Line {
				if l.Function != nil && c.re.MatchString(l.Function.Name) {
					return c.name
				}
			}
		}
	}
	return otherCategory
}

// breakdowns reads the throughput phase's profiles, written by
// startProfile: the benchmark process's over the whole phase, and each node
// process's over its first nodesFor (charged the phase's share of events).
func breakdowns(path string, nodesFor time.Duration, c *benchCluster, res *throughput) []cpuBreakdown {
	var out []cpuBreakdown
	add := func(path string, events float64) {
		b, err := breakdownFile(path, events)
		if err != nil {
			c.log.Warn("CPU breakdown", "err", err)
			return
		}
		out = append(out, *b)
	}
	add(path, float64(res.Events))
	for _, m := range c.members {
		if m.node != nil || m.api == "" {
			continue
		}
		share := 1.0
		if res.AppliedSeconds > nodesFor.Seconds() {
			share = nodesFor.Seconds() / res.AppliedSeconds
		}
		add(path+"."+m.id, share*float64(res.Events))
	}
	return out
}
