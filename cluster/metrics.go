package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/watermark"
)

// collector exposes a node's shard statistics to Prometheus. Values are
// read from the replicas at scrape time.
type collector struct {
	n *Node

	events, duplicates, late, dead, matches, timeouts *prometheus.Desc
	partial, buffered, outbox, applied, commit        *prometheus.Desc
	leader, metaLeader, lag, forwardLag               *prometheus.Desc
	snapThreshold, snapEncode                         *prometheus.Desc
	dropped                                           *prometheus.Desc
	keysRefused, keys                                 *prometheus.Desc
	bytesRefused, stateBytes, stepCapped              *prometheus.Desc
	voters, wanted, members                           *prometheus.Desc
	watermark, watermarkLag, oldestPartial            *prometheus.Desc
	// the same in seconds, Prometheus's base unit (the _ms ones stay for a
	// release, for dashboards and alerts written against them)
	watermarkSec, watermarkLagSec, oldestPartialSec *prometheus.Desc
}

func newCollector(n *Node) *collector {
	l := []string{"shard"}
	return &collector{
		n:          n,
		events:     prometheus.NewDesc("cep_events_total", "Events applied by the shard's state machine.", l, nil),
		duplicates: prometheus.NewDesc("cep_events_duplicate_total", "Events skipped as already applied (re-reads after failover).", l, nil),
		late:       prometheus.NewDesc("cep_events_late_total", "Events behind the watermark.", l, nil),
		dead:       prometheus.NewDesc("cep_events_dead_lettered_total", "Events sent to the dead-letter subject.", l, nil),
		matches:    prometheus.NewDesc("cep_matches_total", "Matches produced.", l, nil),
		timeouts:   prometheus.NewDesc("cep_timeouts_total", "Timed-out partial matches produced.", l, nil),
		partial:    prometheus.NewDesc("cep_partial_matches", "Partial matches holding events.", l, nil),
		buffered:   prometheus.NewDesc("cep_buffered_events", "Events stored in partial matches or waiting for the watermark.", l, nil),
		outbox:     prometheus.NewDesc("cep_outbox_records", "Produced records not yet confirmed published.", l, nil),
		applied:    prometheus.NewDesc("cep_raft_applied_index", "Last Raft index this replica's state machine has applied.", l, nil),
		commit:     prometheus.NewDesc("cep_raft_commit_index", "Raft commit index known to this replica.", l, nil),
		leader:     prometheus.NewDesc("cep_shard_leader", "1 if this replica leads the shard.", l, nil),
		metaLeader: prometheus.NewDesc("cep_meta_leader", "1 if this node leads the metadata group.", nil, nil),
		lag:        prometheus.NewDesc("cep_ingest_lag_messages", "Messages of the shard's own key groups in the source stream after the position the shard applied (on the shard leader).", []string{"shard", "source"}, nil),
		snapThreshold: prometheus.NewDesc("cep_raft_snapshot_threshold_entries",
			"Log entries this replica lets accumulate before its next snapshot (at least cepnode --raft-snapshot-threshold, 256 by default; more when encoding the state takes long).", l, nil),
		snapEncode: prometheus.NewDesc("cep_raft_snapshot_encode_seconds",
			"How long encoding the state took for this replica's last snapshot (applying waits meanwhile).", l, nil),
		dropped: prometheus.NewDesc("cep_partial_matches_dropped_total",
			fmt.Sprintf("Partial matches a pattern discarded because one key held more than the engine's bound (%d), counted since this replica built or restored its state.", nfa.DefaultMaxPartialMatches), []string{"shard", "pattern"}, nil),
		keysRefused: prometheus.NewDesc("cep_pattern_keys_refused_total",
			"Events of a new key a pattern dead-lettered because it held state for its bound on keys on the shard (maxKeys, cepnode --max-keys), counted since this replica built or restored its state.", []string{"shard", "pattern"}, nil),
		keys: prometheus.NewDesc("cep_pattern_keys",
			"Keys a pattern holds state for on the shard (bounded by its maxKeys).", []string{"shard", "pattern"}, nil),
		bytesRefused: prometheus.NewDesc("cep_pattern_state_bytes_refused_total",
			"Events a pattern dead-lettered because they would take the bytes of events it holds on the shard past its bound (maxStateBytes, cepnode --max-state-bytes), counted since this replica built or restored its state.", []string{"shard", "pattern"}, nil),
		stateBytes: prometheus.NewDesc("cep_pattern_state_bytes",
			"Raw bytes of the events a pattern holds on the shard, in partial matches or waiting for the watermark (bounded by its maxStateBytes).", []string{"shard", "pattern"}, nil),
		stepCapped: prometheus.NewDesc("cep_pattern_steps_capped_total",
			fmt.Sprintf("Events whose step on their key reached the engine's bound on work per event (%d partial matches visited plus events read into matches): the rest of the step's partial and completed matches were discarded, counted in cep_partial_matches_dropped_total; counted since this replica built or restored its state.", nfa.DefaultMaxStepsPerEvent), []string{"shard", "pattern"}, nil),
		voters: prometheus.NewDesc("cep_shard_voters",
			"Voting replicas in the shard's Raft configuration (on the shard leader); below cep_shard_replicas_wanted while a replica is added or replaced, or has nowhere to go.", l, nil),
		wanted: prometheus.NewDesc("cep_shard_replicas_wanted",
			"Replicas the shard map gives the shard (on the shard leader).", l, nil),
		members: prometheus.NewDesc("cep_cluster_members",
			"Members of the cluster by their state as this node's gossip sees them: alive, suspect, dead (unreachable), removing.", []string{"state"}, nil),
		watermark: prometheus.NewDesc("cep_watermark_ms",
			"A source's event-time clock across the shards as this shard logged it (milliseconds since the Unix epoch; the lowest of the source's patterns').", []string{"shard", "source"}, nil),
		watermarkLag: prometheus.NewDesc("cep_watermark_lag_ms",
			"How far a source's watermark on the shard trails the newest event time of the source there (the largest over its patterns).", []string{"shard", "source"}, nil),
		oldestPartial: prometheus.NewDesc("cep_partial_match_oldest_age_ms",
			"Event time between the start of a pattern's oldest partial match on the shard and its watermark.", []string{"shard", "pattern"}, nil),
		watermarkSec: prometheus.NewDesc("cep_watermark_timestamp_seconds",
			"A source's event-time clock across the shards as this shard logged it (seconds since the Unix epoch; the lowest of the source's patterns').", []string{"shard", "source"}, nil),
		watermarkLagSec: prometheus.NewDesc("cep_watermark_lag_seconds",
			"How far a source's watermark on the shard trails the newest event time of the source there (the largest over its patterns).", []string{"shard", "source"}, nil),
		oldestPartialSec: prometheus.NewDesc("cep_partial_match_oldest_age_seconds",
			"Event time between the start of a pattern's oldest partial match on the shard and its watermark.", []string{"shard", "pattern"}, nil),
		forwardLag: prometheus.NewDesc("cep_forward_lag_messages", "Messages in the origin stream after the position the shard re-keyed into a derived source (on the leader of the shard that forwards it).", []string{"shard", "source"}, nil),
	}
}

// Describe lists every family, those a scrape shows only in some states
// (a partial match held, a re-keyed source) too.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.events, c.duplicates, c.late, c.dead, c.matches, c.timeouts,
		c.partial, c.buffered, c.outbox, c.applied, c.commit, c.leader, c.metaLeader, c.lag, c.forwardLag,
		c.snapThreshold, c.snapEncode, c.dropped, c.keysRefused, c.keys, c.bytesRefused, c.stateBytes, c.stepCapped, c.voters, c.wanted, c.members,
		c.watermark, c.watermarkLag, c.oldestPartial, c.watermarkSec, c.watermarkLagSec, c.oldestPartialSec} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, sh := range c.n.Shards() {
		id := fmt.Sprint(sh.ID())
		var cnt shard.Counters
		var partial, buffered, outbox int
		var patterns []shard.PatternInfo
		var clocks []shard.SourceClock
		sh.FSM().View(func(s *shard.State, _ uint64) {
			cnt = s.Counters()
			patterns = s.Patterns()
			clocks = s.Watermarks()
			for _, p := range patterns {
				partial += p.PartialMatches
				buffered += p.BufferedEvents
			}
			outbox = len(s.Outbox())
		})
		counter := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), id)
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, id)
		}
		counter(c.events, cnt.Events)
		counter(c.duplicates, cnt.Duplicates)
		counter(c.late, cnt.Late)
		counter(c.dead, cnt.DeadLetters)
		counter(c.matches, cnt.Matches)
		counter(c.timeouts, cnt.Timeouts)
		gauge(c.partial, float64(partial))
		gauge(c.buffered, float64(buffered))
		gauge(c.outbox, float64(outbox))
		for _, p := range patterns {
			ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(p.Dropped), id, p.Name)
			ch <- prometheus.MustNewConstMetric(c.keysRefused, prometheus.CounterValue, float64(p.KeysRefused), id, p.Name)
			ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, float64(p.Keys), id, p.Name)
			ch <- prometheus.MustNewConstMetric(c.bytesRefused, prometheus.CounterValue, float64(p.StateBytesRefused), id, p.Name)
			ch <- prometheus.MustNewConstMetric(c.stateBytes, prometheus.GaugeValue, float64(p.StateBytes), id, p.Name)
			ch <- prometheus.MustNewConstMetric(c.stepCapped, prometheus.CounterValue, float64(p.StepCapped), id, p.Name)
			if p.HasPartial && p.Watermark >= p.OldestPartialStart {
				age := watermark.Since(p.Watermark, p.OldestPartialStart)
				ch <- prometheus.MustNewConstMetric(c.oldestPartial, prometheus.GaugeValue, float64(age), id, p.Name)
				ch <- prometheus.MustNewConstMetric(c.oldestPartialSec, prometheus.GaugeValue, float64(age)/1000, id, p.Name)
			}
		}
		c.collectClocks(ch, clocks, id)
		gauge(c.applied, float64(sh.FSM().Index()))
		commit, _ := strconv.ParseUint(sh.Raft().Stats()["commit_index"], 10, 64)
		gauge(c.commit, float64(commit))
		lead := 0.0
		if sh.Raft().State() == raft.Leader {
			lead = 1
		}
		gauge(c.leader, lead)
		gauge(c.snapThreshold, float64(sh.Raft().ReloadableConfig().SnapshotThreshold))
		gauge(c.snapEncode, sh.FSM().LastSnapshotEncode().Seconds())
		if lead == 1 {
			c.collectLag(ch, sh, id)
			if f := sh.Raft().GetConfiguration(); f.Error() == nil {
				v := 0
				for _, s := range f.Configuration().Servers {
					if s.Suffrage == raft.Voter {
						v++
					}
				}
				gauge(c.voters, float64(v))
			}
			for _, info := range c.n.Meta().Shards {
				if info.ID == sh.ID() {
					gauge(c.wanted, float64(len(info.Replicas)))
				}
			}
		}
	}
	if c.n.meta != nil {
		m := c.n.Meta()
		count := map[string]float64{"alive": 0, "suspect": 0, "dead": 0, "removing": 0}
		for _, nd := range m.Nodes {
			st, _ := c.n.gossipState(nd.ID)
			switch {
			case nd.Removing:
				count["removing"]++
			case st == cepv1.NodeState_NODE_STATE_DEAD:
				count["dead"]++
			case st == cepv1.NodeState_NODE_STATE_SUSPECT:
				count["suspect"]++
			default:
				count["alive"]++
			}
		}
		for _, state := range []string{"alive", "suspect", "dead", "removing"} {
			ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, count[state], state)
		}
	}
	ml := 0.0
	if c.n.meta != nil && c.n.IsMetaLeader() {
		ml = 1
	}
	ch <- prometheus.MustNewConstMetric(c.metaLeader, prometheus.GaugeValue, ml)
}

// collectLag reports, for a shard this node leads, how far each source's
// stream is ahead of what the shard applied.
func (c *collector) collectLag(ch chan<- prometheus.Metric, sh *shard.Shard, id string) {
	m := c.n.Meta()
	var pos, fwd map[string]uint64
	sh.FSM().View(func(s *shard.State, _ uint64) { pos, fwd = s.Positions(), s.Forwarded() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, src := range sourcesOf(m) {
		sm := m.Sources[src]
		if sm == nil {
			continue
		}
		if n, err := c.unread(ctx, sh, sm, pos[src]); err == nil {
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(n), id, src)
		}
		// the shard forwarding a derived source: how far it is behind its origin
		origin := m.Sources[sm.Origin]
		if origin == nil || forwarderOf(m, src) != sh.ID() {
			continue
		}
		if ost, err := c.n.JetStream().Stream(ctx, origin.Stream); err == nil {
			ch <- prometheus.MustNewConstMetric(c.forwardLag, prometheus.GaugeValue, float64(behind(ost.CachedInfo().State.LastSeq, fwd[src])), id, src)
		}
	}
}

// unread counts the messages of the shard's own key groups of a source
// after pos, as JetStream counts them for a consumer with the filters the
// leader reads with: the whole stream's last sequence would count the other
// shards' messages too, and never drain on an idle shard. The consumer is
// made for the count and deleted.
func (c *collector) unread(ctx context.Context, sh *shard.Shard, sm *meta.Source, pos uint64) (uint64, error) {
	first, last := sh.Range()
	cfg := jetstream.ConsumerConfig{
		FilterSubjects:    keygroup.BlockFilters(sm.Name, first, last, c.n.keyGroups()),
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		InactiveThreshold: 10 * time.Second, // gone even if the delete is lost
	}
	if pos > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = pos + 1
	}
	cons, err := c.n.JetStream().CreateConsumer(ctx, sm.Stream, cfg)
	if err != nil {
		return 0, err
	}
	info := cons.CachedInfo()
	_ = c.n.JetStream().DeleteConsumer(ctx, sm.Stream, info.Name)
	return info.NumPending, nil
}

func behind(last, pos uint64) uint64 {
	if last > pos {
		return last - pos
	}
	return 0
}

// Ready returns nil once the cluster is initialised, every local shard
// has a leader and the node's NATS connection answers, else what is
// missing. /readyz and gRPC health answer from it.
func (n *Node) Ready() error {
	if n.meta == nil || n.Meta().KeyGroups == 0 {
		return errors.New("cluster not initialised")
	}
	if n.membership != nil && n.membership.removed.Load() {
		return errors.New("this node has been removed from the cluster")
	}
	if c := n.conn.Load(); c == nil || c.nc.IsClosed() {
		return errors.New("the NATS connection is closed (connecting anew)")
	}
	if d := n.natsLink.unreachableFor(time.Now()); d > 0 {
		return fmt.Errorf("NATS has not answered for %s", d.Round(time.Millisecond))
	}
	for _, sh := range n.Shards() {
		if addr, _ := sh.Raft().LeaderWithID(); addr == "" {
			return fmt.Errorf("shard %d has no leader", sh.ID())
		}
	}
	if free, ok := diskFree(n.cfg.DataDir); ok && free < minDiskFree {
		return fmt.Errorf("the data directory %s has %d KiB free: its Raft logs cannot grow (a shard it leads hands its leadership over on the first append that fails; free space: the node resumes by itself)", n.cfg.DataDir, free>>10)
	}
	return n.quarantine.ready()
}

// HTTPHandlers returns /metrics, /healthz and /readyz for the node.
// /healthz answers while the process serves; /readyz while the node is
// Ready.
func (n *Node) HTTPHandlers() map[string]http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(n.metricCollectors()...)
	return map[string]http.Handler{
		"/metrics": promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		"/healthz": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") }),
		"/readyz": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := n.Ready(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ready")
		}),
	}
}

// collectClocks exports a shard's source clocks: per source, the lowest
// watermark of its patterns and the largest lag behind the newest event.
func (c *collector) collectClocks(ch chan<- prometheus.Metric, clocks []shard.SourceClock, id string) {
	type agg struct {
		wm  int64
		lag uint64
		has bool
	}
	by := map[string]*agg{}
	var order []string
	for _, k := range clocks {
		if k.Clock == watermark.MinTime {
			continue
		}
		a := by[k.Source]
		if a == nil {
			a = &agg{wm: k.Clock}
			by[k.Source] = a
			order = append(order, k.Source)
		}
		a.wm = min(a.wm, k.Clock)
		if k.MaxTime != watermark.MinTime { // 0 for a shard whose newest event the clock has passed
			a.lag, a.has = max(a.lag, watermark.Since(k.MaxTime, k.Clock)), true
		}
	}
	for _, src := range order {
		a := by[src]
		ch <- prometheus.MustNewConstMetric(c.watermark, prometheus.GaugeValue, float64(a.wm), id, src)
		ch <- prometheus.MustNewConstMetric(c.watermarkSec, prometheus.GaugeValue, float64(a.wm)/1000, id, src)
		if a.has {
			ch <- prometheus.MustNewConstMetric(c.watermarkLag, prometheus.GaugeValue, float64(a.lag), id, src)
			ch <- prometheus.MustNewConstMetric(c.watermarkLagSec, prometheus.GaugeValue, float64(a.lag)/1000, id, src)
		}
	}
}
