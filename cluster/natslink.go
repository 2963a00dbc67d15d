package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cepcluster/cep/cluster/plan"
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
	// refused counts the output records NATS would not take, by cause,
	// since the node started
	refused [refusedCauses]atomic.Uint64
}

// Why an output record was published as a dead-letter summary instead.
const (
	refusedSubject = iota // its subject is past keygroup's bounds
	refusedPayload        // it exceeds the server's max payload
	refusedServer         // NATS or JetStream refused it
	refusedCauses
)

var refusedCauseNames = [refusedCauses]string{"subject", "payload", "server"}

func (l *natsLink) count(cause int) { l.refused[cause].Add(1) }

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

// natsConn is a NATS connection and the JetStream context on it.
type natsConn struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// natsConn is the node's NATS connection of the moment.
func (n *Node) natsConn() *nats.Conn { return n.conn.Load().nc }

// natsRedialed is closed once the node's NATS connection of the moment
// is replaced by a new one (redialNATS): consumers and subscriptions made
// on it must be made again.
func (n *Node) natsRedialed() <-chan struct{} {
	n.redialedMu.Lock()
	defer n.redialedMu.Unlock()
	return n.redialed
}

// redialNATS replaces a connection that is closed for good with a new
// one. nats.go reconnects a connection that drops, but not one the server
// closed for a protocol error (a control line over max_control_line,
// say): without a new connection the node would read and publish nothing
// until restarted. It reports whether it connected.
func (n *Node) redialNATS() bool {
	nc, err := n.dialNATS()
	if err != nil {
		return false
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return false
	}
	n.conn.Store(&natsConn{nc, js})
	n.redialedMu.Lock()
	close(n.redialed)
	n.redialed = make(chan struct{})
	n.redialedMu.Unlock()
	return true
}

// probeNATS probes the node's NATS connection every natsProbeEvery until
// the node closes, logging when NATS stops and starts answering, and
// connects anew when the connection is closed for good.
func (n *Node) probeNATS() {
	t := time.NewTicker(natsProbeEvery)
	defer t.Stop()
	closedLogged := false
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		if nc := n.natsConn(); nc.IsClosed() {
			// NATS is unreachable until a probe on a new connection answers
			// (the next one: the node stays not ready meanwhile)
			n.natsLink.observe(false, time.Now())
			if !closedLogged {
				n.log.Error("the NATS connection is closed for good; connecting anew", "err", nc.LastError())
				closedLogged = true
			}
			if n.redialNATS() {
				n.log.Warn("connected to NATS anew: the shards this node leads read and publish on the new connection")
				closedLogged = false
			}
			continue
		}
		sent := time.Now()
		err := n.natsConn().FlushTimeout(natsProbeTimeout)
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

// replicaReports asks the nodes of sh's other replicas about theirs; a
// node that does not answer is left out.
func (n *Node) replicaReports(ctx context.Context, sh *shard.Shard) []plan.Replica {
	f := sh.Raft().GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var out []plan.Replica
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
		rep.ID, rep.Voter = string(srv.ID), srv.Suffrage == raft.Voter
		out = append(out, rep.Plan())
	}
	return out
}

// natsCollector exports the node's link to NATS.
type natsCollector struct {
	n                                   *Node
	reachable, down, leaderCut, refused *prometheus.Desc
}

func newNATSCollector(n *Node) *natsCollector {
	return &natsCollector{
		n:         n,
		reachable: prometheus.NewDesc("cep_nats_reachable", "1 while this node's NATS connection answers its probes (a PING round trip every 500ms).", nil, nil),
		down:      prometheus.NewDesc("cep_nats_unreachable_seconds", "How long this node's NATS connection has not answered its probes; 0 while it does.", nil, nil),
		leaderCut: prometheus.NewDesc("cep_shard_leader_nats_unreachable",
			"1 while this node leads the shard and cannot reach NATS: the shard reads and publishes nothing until it reaches NATS again or hands leadership over (cepnode --nats-handover-after).", []string{"shard"}, nil),
		refused: prometheus.NewDesc("cep_outbox_refused_total",
			"Output records this node published as a dead-letter summary because NATS would not take them, by cause: subject (past the bound on subjects), payload (over the max payload), server (refused by NATS or JetStream).", []string{"cause"}, nil),
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
	for cause, name := range refusedCauseNames {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(c.n.natsLink.refused[cause].Load()), name)
	}
	for _, sh := range c.n.Shards() {
		if sh.IsLeader() {
			ch <- prometheus.MustNewConstMetric(c.leaderCut, prometheus.GaugeValue, 1-up, fmt.Sprint(sh.ID()))
		}
	}
}
