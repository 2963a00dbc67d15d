package cluster

import (
	"fmt"
	"maps"
	"regexp"
	"runtime"
	"slices"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/cepcluster/cep/internal/version"
	"github.com/cepcluster/cep/shard"
)

// patternCollector exports each pattern's counters (shard.PatternCounters)
// by shard, from the shards this node leads only.
//
// The counters are replicated state: every replica counts them applying
// the same log, and its snapshots carry them. A failover therefore
// neither resets them (the new leader's state holds the same counts, up
// to the entries it has not applied yet) nor doubles them: only the
// leader exports a shard's series, so a sum over the nodes counts each
// once. The series moves to the new leader's instance; sum by (pattern)
// of rate() over the series gives the cluster's rates across the move.
type patternCollector struct {
	n *Node

	matches, timeouts, late, dead, condErrors, emitErrors, partial *prometheus.Desc
	absent                                                         *prometheus.Desc
}

func newPatternCollector(n *Node) *patternCollector {
	l := []string{"shard", "pattern"}
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help+" (on the shard leader; replicated, so a failover keeps the count).", l, nil)
	}
	return &patternCollector{
		n:          n,
		matches:    desc("cep_pattern_matches_total", "Matches a pattern produced on the shard, published or not"),
		timeouts:   desc("cep_pattern_timeouts_total", "Timed-out partial matches a pattern produced on the shard, published or not"),
		late:       desc("cep_pattern_late_events_total", "Late events a pattern recorded on the shard (behind its watermark), published or not"),
		dead:       desc("cep_pattern_dead_lettered_total", "Events and failures of a pattern sent to the dead-letter subject"),
		condErrors: desc("cep_condition_errors_total", "Condition evaluations of a pattern that failed (a field the event lacks, say) and counted as false; the shard leader logs the first"),
		emitErrors: desc("cep_emit_errors_total", "Emitted fields of a pattern's matches that failed and are null; the shard leader logs the first"),
		partial:    desc("cep_pattern_partial_matches", "Partial matches a pattern holds on the shard, draining versions included"),
		absent: prometheus.NewDesc("cep_pattern_absent_field_events_total",
			"Events without a field the pattern reads while no event on the shard had it (a misspelt field, say: a query's column reads NULL, a condition fails); the shard leader logs each field once (since the leader built the pattern: not replicated).",
			[]string{"shard", "pattern", "field"}, nil),
	}
}

func (c *patternCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.matches, c.timeouts, c.late, c.dead, c.condErrors, c.emitErrors, c.partial, c.absent} {
		ch <- d
	}
}

func (c *patternCollector) Collect(ch chan<- prometheus.Metric) {
	for _, sh := range c.n.Shards() {
		if sh.Raft().State() != raft.Leader {
			continue
		}
		id := fmt.Sprint(sh.ID())
		var counts []shard.NamedPatternCounters
		var failures []shard.PatternInfo
		sh.FSM().View(func(s *shard.State, _ uint64) { counts, failures = s.PatternCounters(), s.PatternFailures() })
		for _, p := range failures {
			for _, f := range p.AbsentFields {
				ch <- prometheus.MustNewConstMetric(c.absent, prometheus.CounterValue, float64(f.Events), id, p.Name, f.Path)
			}
		}
		for _, p := range counts {
			counter := func(d *prometheus.Desc, v uint64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), id, p.Name)
			}
			counter(c.matches, p.Matches)
			counter(c.timeouts, p.Timeouts)
			counter(c.late, p.Late)
			counter(c.dead, p.DeadLetters)
			counter(c.condErrors, p.ConditionErrors)
			counter(c.emitErrors, p.EmitErrors)
			ch <- prometheus.MustNewConstMetric(c.partial, prometheus.GaugeValue, float64(p.PartialMatches), id, p.Name)
		}
	}
}

// buildInfo is cep_build_info{version,revision,goversion} 1: which build
// each node runs, for dashboards and for a rolling upgrade's progress.
func buildInfo() prometheus.Collector {
	v := version.Get()
	gov := v.GoVersion
	if gov == "" {
		gov = runtime.Version()
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "cep_build_info",
		Help:        "1, labelled with the build this node runs: its version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": v.Version, "revision": v.Revision, "goversion": gov},
	})
	g.Set(1)
	return g
}

// metricCollectors are what the node's /metrics serves.
func (n *Node) metricCollectors() []prometheus.Collector {
	return []prometheus.Collector{newCollector(n), newPatternCollector(n), newNATSCollector(n), buildInfo(), n.rpcMetrics,
		n.applyLatency, n.readPaused, n.streamMissing, n.quarantine, n.diskFreeGauge(),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
}

var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// MetricFamilies lists, sorted, the names of the metric families the
// node's /metrics serves now and of those its collectors describe, which
// it serves in other states too (a paused read's, a missing stream's, an
// API call's); the shard statistics appear as the node's shards, patterns
// and sources do. docs/metrics.md describes them.
func (n *Node) MetricFamilies() []string {
	seen := map[string]bool{}
	ch := make(chan *prometheus.Desc)
	go func() {
		defer close(ch)
		for _, c := range n.metricCollectors() {
			c.Describe(ch)
		}
	}()
	for d := range ch {
		if m := descName.FindStringSubmatch(d.String()); m != nil {
			seen[m[1]] = true
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(n.metricCollectors()...)
	mfs, _ := reg.Gather() // what it gathers despite an error
	for _, mf := range mfs {
		seen[mf.GetName()] = true
	}
	return slices.Sorted(maps.Keys(seen))
}
