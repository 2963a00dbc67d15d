package cluster

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cepcluster/cep/shard"
)

// A shard leader that cannot reach NATS reads and publishes nothing while
// its Raft group is healthy, so nothing else would move its leadership:
// its keys produce no output for as long as the cut lasts, though the
// other replicas may reach NATS. Each node therefore probes its NATS
// connection (a PING round trip), reports what it finds with its replicas
// (ListShards), and a leader whose probes have gone unanswered for
// Config.NATSHandOverAfter hands leadership to a voter that answers them.

const (
	// natsProbeEvery is how often a node probes its NATS connection.
	natsProbeEvery = 500 * time.Millisecond
	// natsProbeTimeout is how long a probe waits for its answer: a PING
	// queues behind the node's own publishes, so a busy but healthy link
	// needs some slack.
	natsProbeTimeout = 2 * time.Second
)

// natsLink is what this node knows of its link to NATS.
type natsLink struct {
	mu sync.Mutex
	// downSince is when the first unanswered probe since the last answered
	// one was sent; zero while NATS answers.
	downSince time.Time
}

// observe records a probe sent at sent and whether it was answered; it
// reports whether that changed the link's state.
func (l *natsLink) observe(answered bool, sent time.Time) (changed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case answered && !l.downSince.IsZero():
		l.downSince = time.Time{}
		return true
	case !answered && l.downSince.IsZero():
		l.downSince = sent
		return true
	}
	return false
}

// unreachableFor is how long NATS has not answered at now; 0 while it
// does.
func (l *natsLink) unreachableFor(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.downSince.IsZero() {
		return 0
	}
	return max(now.Sub(l.downSince), time.Nanosecond)
}

// probeNATS probes the node's NATS connection every natsProbeEvery until
// the node closes, logging when NATS stops and starts answering.
func (n *Node) probeNATS() {
	defer n.wg.Done()
	t := time.NewTicker(natsProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		err := n.nc.FlushTimeout(natsProbeTimeout)
		if n.ctx.Err() != nil {
			return
		}
		down := n.natsLink.unreachableFor(time.Now())
		if n.natsLink.observe(err == nil, sent) {
			if err != nil {
				n.log.Warn("NATS does not answer; shards this node leads hand over to a replica that reaches it after a while",
					"err", err, "hand_over_after", n.cfg.NATSHandOverAfter)
			} else {
				n.log.Info("NATS answers again", "after", down.Round(time.Millisecond))
			}
		}
	}
}

// replicaReport is what a node says of its replica of a shard: how far it
// has applied the log and how long its node has not reached NATS.
type replicaReport struct {
	id              string
	voter           bool
	applied         uint64
	natsUnreachable time.Duration
}

// natsHandOverTarget picks the replica a leader that cannot reach NATS
// hands its shard to: a voter other than self whose node reaches NATS and
// that has applied the log to within behindHandOff of mine (so the new
// leader serves at once), the one that has applied the most (ties: the
// lowest id). ok is false when no replica qualifies.
func natsHandOverTarget(self string, mine uint64, reports []replicaReport) (id string, ok bool) {
	sorted := append([]replicaReport(nil), reports...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].id < sorted[j].id })
	var best uint64
	for _, r := range sorted {
		if r.id == self || !r.voter || r.natsUnreachable > 0 || r.applied+behindHandOff < mine {
			continue
		}
		if !ok || r.applied > best {
			id, best, ok = r.id, r.applied, true
		}
	}
	return id, ok
}

// replicaReports asks the nodes of sh's other replicas about theirs; a
// node that does not answer is left out.
func (n *Node) replicaReports(ctx context.Context, sh *shard.Shard) []replicaReport {
	f := sh.Raft().GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var out []replicaReport
	for _, srv := range f.Configuration().Servers {
		if string(srv.ID) == n.cfg.NodeID {
			continue
		}
		p, found := n.peer(string(srv.ID))
		if !found {
			continue
		}
		rep, err := n.peerAt(p.APIAddr).Replica(ctx, sh.ID())
		if err != nil {
			continue
		}
		rep.id, rep.voter = string(srv.ID), srv.Suffrage == raft.Voter
		out = append(out, rep)
	}
	return out
}

// leaveIfCutOffFromNATS runs for a leader session: once this node's NATS
// has not answered for NATSHandOverAfter, it transfers the shard's
// leadership to a replica that reaches NATS (natsHandOverTarget), asking
// again every probe period while none does. Losing leadership ends the
// session through the leadership channel.
func (r *leader) leaveIfCutOffFromNATS(ctx context.Context) {
	stuck := false // logged that no replica can take over, this outage
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(natsProbeEvery):
		}
		down := r.n.natsLink.unreachableFor(time.Now())
		if down < r.n.cfg.NATSHandOverAfter {
			stuck = false
			continue
		}
		to, ok := natsHandOverTarget(r.n.cfg.NodeID, r.sh.FSM().Index(), r.n.replicaReports(ctx, r.sh))
		if !ok {
			if !stuck {
				r.log.Warn("cannot reach NATS, and no replica that can has caught up: leadership stays", "for", down.Round(time.Second))
				stuck = true
			}
			continue
		}
		p, found := r.n.peer(to)
		if !found {
			continue
		}
		if err := shard.Wait(ctx, r.sh.Raft().LeadershipTransferToServer(raft.ServerID(to), raft.ServerAddress(p.RaftAddr))); err != nil {
			r.log.Warn("cannot reach NATS; handing leadership over failed", "to", to, "err", err)
			continue
		}
		r.log.Warn("cannot reach NATS: leadership handed to a replica that can", "to", to, "for", down.Round(time.Second))
		return
	}
}

// natsCollector exports the node's link to NATS.
type natsCollector struct {
	n                          *Node
	reachable, down, leaderCut *prometheus.Desc
}

func newNATSCollector(n *Node) *natsCollector {
	return &natsCollector{
		n:         n,
		reachable: prometheus.NewDesc("cep_nats_reachable", "1 while this node's NATS connection answers its probes (a PING round trip every 500ms).", nil, nil),
		down:      prometheus.NewDesc("cep_nats_unreachable_seconds", "How long this node's NATS connection has not answered its probes; 0 while it does.", nil, nil),
		leaderCut: prometheus.NewDesc("cep_shard_leader_nats_unreachable",
			"1 while this node leads the shard and cannot reach NATS: the shard reads and publishes nothing until it reaches NATS again or hands leadership over (cepnode --nats-handover-after).", []string{"shard"}, nil),
	}
}

func (c *natsCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c *natsCollector) Collect(ch chan<- prometheus.Metric) {
	down := c.n.natsLink.unreachableFor(time.Now())
	up := 1.0
	if down > 0 {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(c.reachable, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(c.down, prometheus.GaugeValue, down.Seconds())
	for _, sh := range c.n.Shards() {
		if sh.IsLeader() {
			ch <- prometheus.MustNewConstMetric(c.leaderCut, prometheus.GaugeValue, 1-up, fmt.Sprint(sh.ID()))
		}
	}
}
