package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/plan"
	"github.com/cepcluster/cep/cluster/transport"
	"github.com/cepcluster/cep/internal/raftlog"
	"github.com/cepcluster/cep/shard"
)

// A replica whose files hold something it cannot trust (a damaged log
// entry, an unreadable log or snapshot: raftlog.CorruptError) is
// quarantined: closed, its files moved to <data>/quarantine/<shard>-<time>/
// and replaced by a marker (quarantineMarker) that a restart honours. It
// stays closed until the shard's leader has made it a non-voter (a
// replica that lost its log must not vote with a forgotten term or vote,
// nor count towards a quorum for entries it no longer has): the leader
// sees the marker in this node's list of shards and demotes it. Then it
// opens empty and is caught up and promoted as any added replica
// (reconcileMembers). A shard with no other replica stays stopped, with
// the error in the status, /readyz and cep_shard_quarantined.

// quarantineMarker, in a quarantined replica's directory, holds a
// quarantineRecord.
const quarantineMarker = "quarantined.json"

type quarantineRecord struct {
	Shard uint64    `json:"shard"`
	Err   string    `json:"error"`
	Dir   string    `json:"dir"` // where the files went
	Since time.Time `json:"since"`
}

// quarantiner quarantines this node's damaged replicas and rebuilds them:
// it holds their records and the metadata replica's rebuild watch, and
// asks the other nodes whether theirs are quarantined for the groups this
// node leads. It decides nothing itself (plan: quarantine.go); n is what
// it carries the decisions out with (closing and opening replicas, the
// members' addresses, goroutines Close waits for).
type quarantiner struct {
	n      *Node
	mu     sync.Mutex
	shards map[uint64]quarantineRecord
	gauge  *prometheus.GaugeVec
	// meta: the metadata replica's quarantine, nil while none
	meta      *metaQuarantine
	metaGauge prometheus.Gauge
	// peerReports caches other nodes' reports of their replicas for
	// leaders asking whether a voter is quarantined (one call per node a
	// second)
	peerReports map[string]cachedReports
}

type cachedReports struct {
	at      time.Time
	reports []plan.Report
}

func newQuarantiner(n *Node) *quarantiner {
	return &quarantiner{n: n, shards: map[uint64]quarantineRecord{}, peerReports: map[string]cachedReports{},
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cep_shard_quarantined",
			Help: "1 while this node's replica of the shard is quarantined (its log or snapshot is damaged): closed, its files moved aside, until it is rebuilt from a healthy peer; with no other replica the shard is stopped.",
		}, []string{"shard"}),
		metaGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cep_meta_quarantined",
			Help: "1 while this node's metadata replica is quarantined (its log or snapshot was damaged): rebuilt from its peers, not voting until it is promoted again.",
		})}
}

// Describe and Collect make the quarantine's gauges one collector.
func (q *quarantiner) Describe(ch chan<- *prometheus.Desc) {
	q.gauge.Describe(ch)
	q.metaGauge.Describe(ch)
}

func (q *quarantiner) Collect(ch chan<- prometheus.Metric) {
	q.gauge.Collect(ch)
	q.metaGauge.Collect(ch)
}

func (q *quarantiner) get(id uint64) (quarantineRecord, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r, ok := q.shards[id]
	return r, ok
}

func (q *quarantiner) list() []quarantineRecord {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]quarantineRecord, 0, len(q.shards))
	for _, r := range q.shards {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b quarantineRecord) int { return int(a.Shard) - int(b.Shard) })
	return out
}

func (q *quarantiner) set(r quarantineRecord) {
	q.mu.Lock()
	q.shards[r.Shard] = r
	q.mu.Unlock()
	q.gauge.WithLabelValues(strconv.FormatUint(r.Shard, 10)).Set(1)
}

func (q *quarantiner) clear(id uint64) {
	q.mu.Lock()
	delete(q.shards, id)
	q.mu.Unlock()
	q.gauge.DeleteLabelValues(strconv.FormatUint(id, 10))
}

// replica closes this node's replica of shard id (when open), moves its
// files aside and records why. It never fails the node: what cannot be
// moved is logged, and the replica stays closed.
func (q *quarantiner) replica(id uint64, cause error) {
	n := q.n
	if _, ok := q.get(id); ok {
		return
	}
	// recorded before the replica closes, so that nothing sees it neither
	// open nor quarantined (replicaSet.place would open it afresh)
	q.set(quarantineRecord{Shard: id, Err: cause.Error(), Since: time.Now().UTC()})
	if err := n.replicas.close(id, false); err != nil {
		n.log.Warn("closing a damaged replica", "shard", id, "err", err)
	}
	rec := q.moveAside(n.shardDir(id), strconv.FormatUint(id, 10), id, cause)
	q.set(rec)
	n.log.Error("replica quarantined: its files are damaged; it is rebuilt from a healthy peer, if the shard has one", "shard", id, "err", cause, "moved_to", rec.Dir)
}

// readQuarantine reads the marker of a replica quarantined before a
// restart (ok false: none).
func readQuarantine(dir string) (quarantineRecord, bool) {
	b, err := os.ReadFile(filepath.Join(dir, quarantineMarker))
	if err != nil {
		return quarantineRecord{}, false
	}
	var r quarantineRecord
	if json.Unmarshal(b, &r) != nil || r.Err == "" {
		r.Err = fmt.Sprintf("%s: unreadable quarantine marker", filepath.Join(dir, quarantineMarker))
	}
	return r, true
}

// onCorrupt is shard.Config.OnCorrupt: a replica met a damaged entry
// while running. It is told on the state machine's goroutine, which the
// replica's close waits for: the quarantine runs on its own (none once
// the node closes: its replicas close anyway, and the damage is found
// again at the next start).
func (q *quarantiner) onCorrupt(ce *raftlog.CorruptError) {
	if q.n.ctx.Err() != nil {
		return
	}
	q.n.spawn(func() { q.replica(ce.Shard, ce) })
}

// rebuild opens, empty, a quarantined replica of info once the shard's
// leader no longer counts it as a voter, so that the leader catches it
// up; it reports whether it did. A shard with no other replica in the map
// cannot be rebuilt: it stays stopped.
func (q *quarantiner) rebuild(info meta.ShardInfo, groups int) bool {
	n := q.n
	rec, ok := q.get(info.ID)
	if !ok {
		return false
	}
	if plan.Stranded(n.cfg.NodeID, info.Replicas) {
		return false
	}
	others := slices.DeleteFunc(slices.Clone(info.Replicas), func(id string) bool { return id == n.cfg.NodeID })
	leader, known := n.replicas.leaderReport(info, others)
	if !plan.Rebuild(n.cfg.NodeID, leader, known) {
		return false // no leader heard, or it has not demoted this one yet
	}
	if err := os.Remove(filepath.Join(n.shardDir(info.ID), quarantineMarker)); err != nil && !errors.Is(err, os.ErrNotExist) {
		n.log.Error("rebuilding a quarantined replica", "shard", info.ID, "err", err)
		return false
	}
	q.clear(info.ID)
	start := info
	start.First, start.Last = info.StartRange()
	if err := n.replicas.open(start, groups, nil, nil); err != nil {
		n.log.Error("rebuilding a quarantined replica", "shard", info.ID, "err", err)
		return false
	}
	n.log.Info("quarantined replica rebuilding from the shard's leader", "shard", info.ID, "was", rec.Err, "files", rec.Dir)
	return true
}

// stoppedHere reports whether the shard is quarantined on this node with
// no other replica to rebuild it from (a single node): it reads nothing
// until a restore, so it is left out of its sources' clocks instead of
// holding every other shard's matches back.
func (q *quarantiner) stoppedHere(info meta.ShardInfo) bool {
	if _, ok := q.get(info.ID); !ok {
		return false
	}
	return plan.Stranded(q.n.cfg.NodeID, info.Replicas)
}

// forget drops the quarantine of a replica the shard map no longer gives
// this node (its moved files stay where they are).
func (q *quarantiner) forget(m *meta.Meta) {
	n := q.n
	recs := q.list()
	ids := make([]uint64, len(recs))
	for i, rec := range recs {
		ids[i] = rec.Shard
	}
	for _, id := range plan.ForgetQuarantined(n.cfg.NodeID, m, ids) {
		rec := recs[slices.Index(ids, id)]
		os.RemoveAll(n.shardDir(id))
		q.clear(id)
		n.log.Info("quarantined replica no longer placed here", "shard", id, "files", rec.Dir)
	}
}

// demote makes a voter of shard sh whose node reports its
// replica quarantined a non-voter (sh's leader runs it before each
// configuration change): it lost its log, so it must not vote until it is
// caught up and promoted again. It reports whether it changed anything.
func (q *quarantiner) demote(ctx context.Context, sh *shard.Shard, cfg raft.Configuration) (bool, error) {
	n := q.n
	c := plan.DemoteQuarantined(n.cfg.NodeID, planServers(cfg), func(id string) bool {
		_, ok := n.peer(id)
		return ok && q.reported(ctx, id, sh.ID())
	})
	if c.Kind == plan.None {
		return false, nil
	}
	if err := raftlog.Wait(ctx, sh.Raft().DemoteVoter(raft.ServerID(c.ID), 0, 10*time.Second)); err != nil {
		return false, fmt.Errorf("demoting quarantined replica %s: %w", c.ID, err)
	}
	p, _ := n.peer(c.ID)
	n.log.Warn("quarantined replica made a non-voter until it is rebuilt", "shard", sh.ID(), "member", c.ID, "addr", p.RaftAddr)
	return true, nil
}

// planServers is a Raft configuration as the planners take it.
func planServers(c raft.Configuration) []plan.Server {
	out := make([]plan.Server, 0, len(c.Servers))
	for _, s := range c.Servers {
		out = append(out, plan.Server{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out
}

// cachedReports are the reports of the node at addr, at most a second
// old.
func (q *quarantiner) cachedReports(ctx context.Context, addr string) ([]plan.Report, error) {
	q.mu.Lock()
	c, ok := q.peerReports[addr]
	q.mu.Unlock()
	if ok && time.Since(c.at) < time.Second {
		return c.reports, nil
	}
	reports, err := q.n.peerAt(addr).Reports(ctx)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	q.peerReports[addr] = cachedReports{at: time.Now(), reports: reports}
	q.mu.Unlock()
	return reports, nil
}

// listShards reports this node's quarantined replicas as its list of
// shards does.
func (q *quarantiner) listShards() []*cepv1.Shard {
	var out []*cepv1.Shard
	q.mu.Lock()
	if mq := q.meta; mq != nil && !mq.demoted {
		// group 0, the metadata group: its leader demotes this replica
		out = append(out, &cepv1.Shard{Id: 0, Quarantined: mq.rec.Err, QuarantineDir: mq.rec.Dir})
	}
	q.mu.Unlock()
	for _, rec := range q.list() {
		out = append(out, &cepv1.Shard{Id: uint32(rec.Shard), Quarantined: rec.Err, QuarantineDir: rec.Dir})
	}
	return out
}

// ready is Ready's part: an error naming the first quarantined replica of
// this node.
func (q *quarantiner) ready() error {
	q.mu.Lock()
	mq := q.meta
	q.mu.Unlock()
	if mq != nil {
		return fmt.Errorf("the metadata replica is quarantined (rebuilding from its peers): %s", mq.rec.Err)
	}
	if g := q.n.meta; g != nil {
		if err := g.fsm.Corrupt(); err != nil {
			return fmt.Errorf("the metadata replica stopped at a damaged log entry (a restart rebuilds it from its peers): %w", err)
		}
	}
	for _, rec := range q.list() {
		return fmt.Errorf("shard %d is quarantined (stopped until rebuilt from a healthy peer): %s", rec.Shard, rec.Err)
	}
	return nil
}

// metaQuarantine is the state of this node's metadata replica when it
// was quarantined.
type metaQuarantine struct {
	rec     quarantineRecord
	demoted bool // the metadata leader made it a non-voter
}

// openMeta opens this node's metadata replica. One whose files are
// damaged is moved aside (<data>/quarantine/meta-<time>/) and opened
// empty, not bootstrapped, its votes withheld (transport.VoteGuard) until the
// metadata leader has made it a non-voter and, once it caught up, a voter
// again: it neither votes with a forgotten term or vote nor counts for a
// quorum with a log it no longer has. A node alone in its cluster has no
// peer to rebuild from: it does not start, and the files stay.
func (q *quarantiner) openMeta(dir string, trans *transport.Transport, voters []raft.Server) (*metaGroup, error) {
	n := q.n
	rec, quarantined := readQuarantine(dir)
	if !quarantined {
		g, err := openMetaGroup(dir, n.cfg.NodeID, trans, voters, n.cfg.Raft, n.log)
		if err == nil || !raftlog.IsCorrupt(err) {
			return g, err
		}
		if q.alone() {
			return nil, fmt.Errorf("%w (this node is the cluster's only member: no peer to rebuild the metadata from; restore %s from a backup)", err, dir)
		}
		rec = q.moveAside(dir, "meta", 0, err)
		if rec.Dir == "" {
			return nil, err
		}
		n.log.Error("metadata replica quarantined: its files are damaged; it is rebuilt from its peers", "group", "meta", "err", err, "moved_to", rec.Dir)
		if trans.IsShutdown() {
			// the open got as far as a Raft group that it shut down (a
			// snapshot that did not restore), and raft closes its
			// transport then: the rebuilt replica needs one of its own
			layer, err := n.mux.Layer(0)
			if err != nil {
				return nil, err
			}
			trans = transport.NewTransport(layer, n.log)
		}
	}
	guard := transport.NewVoteGuard(trans)
	g, err := openMetaGroup(dir, n.cfg.NodeID, guard, nil, n.cfg.Raft, n.log)
	if err != nil {
		guard.Close()
		return nil, fmt.Errorf("opening the rebuilt metadata replica: %w", err)
	}
	g.fresh = false // a member already: not a new cluster's first start
	q.mu.Lock()
	q.meta = &metaQuarantine{rec: rec}
	q.mu.Unlock()
	q.metaGauge.Set(1)
	n.spawn(func() { q.watchMetaRebuild(g, guard, dir) })
	return g, nil
}

// alone reports whether this node is configured as its cluster's only
// member (no other peer, nothing to join).
func (q *quarantiner) alone() bool {
	return len(q.n.cfg.Join) == 0 && len(q.n.cfg.Peers) <= 1
}

// moveAside moves dir to <data>/quarantine/<name>-<time>/ and leaves a
// marker in an empty dir; the record's Dir is empty when that failed.
func (q *quarantiner) moveAside(dir, name string, id uint64, cause error) quarantineRecord {
	to := filepath.Join(q.n.cfg.DataDir, "quarantine", fmt.Sprintf("%s-%s", name, time.Now().UTC().Format("20060102T150405.000Z")))
	rec := quarantineRecord{Shard: id, Err: cause.Error(), Dir: to, Since: time.Now().UTC()}
	err := os.MkdirAll(filepath.Dir(to), 0o755)
	if err == nil {
		err = os.Rename(dir, to)
	}
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		b, _ := json.Marshal(rec)
		err = os.WriteFile(filepath.Join(dir, quarantineMarker), b, 0o644)
	}
	if err != nil {
		q.n.log.Error("cannot move a damaged replica's files aside", "dir", dir, "err", err)
		rec.Dir = ""
	}
	return rec
}

// watchMetaRebuild follows the rebuilt metadata replica's configuration:
// once it has been a non-voter and is a voter again (promoted after
// catching up), it votes again and is no longer quarantined.
func (q *quarantiner) watchMetaRebuild(g *metaGroup, guard *transport.VoteGuard, dir string) {
	n := q.n
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		f := g.raft.GetConfiguration()
		if f.Error() != nil {
			continue
		}
		s, ok := suffrages(f.Configuration())[n.cfg.NodeID]
		q.mu.Lock()
		var done bool
		q.meta.demoted, done = plan.MetaRebuilt(q.meta.demoted, ok && s != raft.Staging, s == raft.Voter)
		rec := q.meta.rec
		if done {
			q.meta = nil
		}
		q.mu.Unlock()
		if done {
			guard.Release()
			os.Remove(filepath.Join(dir, quarantineMarker))
			q.metaGauge.Set(0)
			n.log.Info("metadata replica rebuilt from its peers", "was", rec.Err, "files", rec.Dir)
			return
		}
	}
}

// demoteMeta is leader.demoteQuarantined for the metadata group (its
// leader runs it before each change).
func (q *quarantiner) demoteMeta(ctx context.Context, cfg raft.Configuration) (bool, error) {
	n := q.n
	c := plan.DemoteQuarantined(n.cfg.NodeID, planServers(cfg), func(id string) bool { return q.reported(ctx, id, 0) })
	if c.Kind == plan.None {
		return false, nil
	}
	if err := raftlog.Wait(ctx, n.meta.raft.DemoteVoter(raft.ServerID(c.ID), 0, 10*time.Second)); err != nil {
		return false, fmt.Errorf("demoting quarantined metadata replica %s: %w", c.ID, err)
	}
	n.log.Warn("quarantined metadata replica made a non-voter until it is rebuilt", "member", c.ID)
	return true, nil
}

// reported reports whether member id reports its replica of group (0: the
// metadata group) quarantined: seen in the cached reports, confirmed by
// fresh ones.
func (q *quarantiner) reported(ctx context.Context, id string, group uint64) bool {
	p, ok := q.n.peer(id)
	if !ok {
		return false
	}
	reports, err := q.cachedReports(ctx, p.APIAddr)
	if err != nil || !plan.Quarantined(reports, group) {
		return false
	}
	q.mu.Lock()
	delete(q.peerReports, p.APIAddr)
	q.mu.Unlock()
	reports, err = q.cachedReports(ctx, p.APIAddr)
	return err == nil && plan.Quarantined(reports, group)
}
