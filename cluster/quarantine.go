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
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/transport"
	"github.com/cepcluster/cep/shard"
)

// A replica whose files hold something it cannot trust (a damaged log
// entry, an unreadable log or snapshot: shard.CorruptError) is
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

// quarantines are this node's quarantined replicas.
type quarantines struct {
	mu     sync.Mutex
	shards map[uint64]quarantineRecord
	gauge  *prometheus.GaugeVec
	// meta: the metadata replica's quarantine, nil while none
	meta      *metaQuarantine
	metaGauge prometheus.Gauge
	// peerShards caches other nodes' lists of shards for leaders asking
	// whether a voter is quarantined (one call per node a second)
	peerShards map[string]cachedShards
}

type cachedShards struct {
	at     time.Time
	shards []*cepv1.Shard
}

func newQuarantines() *quarantines {
	return &quarantines{shards: map[uint64]quarantineRecord{}, peerShards: map[string]cachedShards{},
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
func (q *quarantines) Describe(ch chan<- *prometheus.Desc) {
	q.gauge.Describe(ch)
	q.metaGauge.Describe(ch)
}

func (q *quarantines) Collect(ch chan<- prometheus.Metric) {
	q.gauge.Collect(ch)
	q.metaGauge.Collect(ch)
}

func (q *quarantines) get(id uint64) (quarantineRecord, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r, ok := q.shards[id]
	return r, ok
}

func (q *quarantines) list() []quarantineRecord {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]quarantineRecord, 0, len(q.shards))
	for _, r := range q.shards {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b quarantineRecord) int { return int(a.Shard) - int(b.Shard) })
	return out
}

func (q *quarantines) set(r quarantineRecord) {
	q.mu.Lock()
	q.shards[r.Shard] = r
	q.mu.Unlock()
	q.gauge.WithLabelValues(strconv.FormatUint(r.Shard, 10)).Set(1)
}

func (q *quarantines) clear(id uint64) {
	q.mu.Lock()
	delete(q.shards, id)
	q.mu.Unlock()
	q.gauge.DeleteLabelValues(strconv.FormatUint(id, 10))
}

// quarantineReplica closes this node's replica of shard id (when open),
// moves its files aside and records why. It never fails the node: what
// cannot be moved is logged, and the replica stays closed.
func (n *Node) quarantineReplica(id uint64, cause error) {
	if _, ok := n.quarantine.get(id); ok {
		return
	}
	// recorded before the replica closes, so that nothing sees it neither
	// open nor quarantined (placeReplicas would open it afresh)
	n.quarantine.set(quarantineRecord{Shard: id, Err: cause.Error(), Since: time.Now().UTC()})
	if err := n.closeReplica(id, false); err != nil {
		n.log.Warn("closing a damaged replica", "shard", id, "err", err)
	}
	rec := n.moveAside(n.shardDir(id), strconv.FormatUint(id, 10), id, cause)
	n.quarantine.set(rec)
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
// replica's close waits for: the quarantine runs on its own.
func (n *Node) onCorrupt(ce *shard.CorruptError) {
	if n.ctx.Err() != nil {
		return
	}
	n.spawn(func() { n.quarantineReplica(ce.Shard, ce) })
}

// rebuildQuarantined opens, empty, a quarantined replica of info once the
// shard's leader no longer counts it as a voter, so that the leader
// catches it up; it reports whether it did. A shard with no other
// replica in the map cannot be rebuilt: it stays stopped.
func (n *Node) rebuildQuarantined(info meta.ShardInfo, groups int) bool {
	rec, ok := n.quarantine.get(info.ID)
	if !ok {
		return false
	}
	others := slices.DeleteFunc(slices.Clone(info.Replicas), func(id string) bool { return id == n.cfg.NodeID })
	if len(others) == 0 {
		return false
	}
	s, known := n.leaderReport(info, others)
	voter := !known
	if known {
		for _, r := range s.Replicas {
			if r.NodeId == n.cfg.NodeID && r.Suffrage == cepv1.Suffrage_SUFFRAGE_VOTER {
				voter = true
			}
		}
	}
	if !known || voter {
		return false // no leader heard, or it has not demoted this one yet
	}
	if err := os.Remove(filepath.Join(n.shardDir(info.ID), quarantineMarker)); err != nil && !errors.Is(err, os.ErrNotExist) {
		n.log.Error("rebuilding a quarantined replica", "shard", info.ID, "err", err)
		return false
	}
	n.quarantine.clear(info.ID)
	start := info
	start.First, start.Last = info.StartRange()
	if err := n.openReplica(start, groups, nil, nil); err != nil {
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
func (n *Node) stoppedHere(info meta.ShardInfo) bool {
	if _, ok := n.quarantine.get(info.ID); !ok {
		return false
	}
	return !slices.ContainsFunc(info.Replicas, func(id string) bool { return id != n.cfg.NodeID })
}

// forgetQuarantined drops the quarantine of a replica the shard map no
// longer gives this node (its moved files stay where they are).
func (n *Node) forgetQuarantined(m *meta.Meta) {
	for _, rec := range n.quarantine.list() {
		// a shard this copy of the metadata does not list yet (catching
		// up) stays quarantined
		i := m.ShardIndex(rec.Shard)
		if i < 0 || slices.Contains(m.Shards[i].Replicas, n.cfg.NodeID) {
			continue
		}
		os.RemoveAll(n.shardDir(rec.Shard))
		n.quarantine.clear(rec.Shard)
		n.log.Info("quarantined replica no longer placed here", "shard", rec.Shard, "files", rec.Dir)
	}
}

// demoteQuarantined makes a voter of the shard whose node reports its
// replica quarantined a non-voter (the leader r runs it before each
// configuration change): it lost its log, so it must not vote until it is
// caught up and promoted again. It reports whether it changed anything.
func (r *leader) demoteQuarantined(ctx context.Context, cfg raft.Configuration) (bool, error) {
	for _, s := range cfg.Servers {
		id := string(s.ID)
		if s.Suffrage != raft.Voter || id == r.n.cfg.NodeID {
			continue
		}
		p, ok := r.n.peer(id)
		if !ok {
			continue
		}
		if !ok || !r.n.reportsQuarantine(ctx, id, r.sh.ID()) {
			continue
		}
		if err := shard.Wait(ctx, r.sh.Raft().DemoteVoter(s.ID, 0, 10*time.Second)); err != nil {
			return false, fmt.Errorf("demoting quarantined replica %s: %w", id, err)
		}
		r.log.Warn("quarantined replica made a non-voter until it is rebuilt", "member", id, "addr", p.RaftAddr)
		return true, nil
	}
	return false, nil
}

// cachedPeerShards is the node's list of shards (ListShards), at most a
// second old.
func (n *Node) cachedPeerShards(ctx context.Context, addr string) ([]*cepv1.Shard, error) {
	q := n.quarantine
	q.mu.Lock()
	c, ok := q.peerShards[addr]
	q.mu.Unlock()
	if ok && time.Since(c.at) < time.Second {
		return c.shards, nil
	}
	shards, err := n.peerAt(addr).Shards(ctx)
	if err != nil {
		return nil, err
	}
	q.mu.Lock()
	q.peerShards[addr] = cachedShards{at: time.Now(), shards: shards}
	q.mu.Unlock()
	return shards, nil
}

// quarantinedShards reports this node's quarantined replicas as its list
// of shards does.
func (n *Node) quarantinedShards() []*cepv1.Shard {
	var out []*cepv1.Shard
	n.quarantine.mu.Lock()
	if mq := n.quarantine.meta; mq != nil && !mq.demoted {
		// group 0, the metadata group: its leader demotes this replica
		out = append(out, &cepv1.Shard{Id: 0, Quarantined: mq.rec.Err, QuarantineDir: mq.rec.Dir})
	}
	n.quarantine.mu.Unlock()
	for _, rec := range n.quarantine.list() {
		out = append(out, &cepv1.Shard{Id: uint32(rec.Shard), Quarantined: rec.Err, QuarantineDir: rec.Dir})
	}
	return out
}

// quarantineReady is Ready's part: an error naming the first quarantined
// replica of this node.
func (n *Node) quarantineReady() error {
	n.quarantine.mu.Lock()
	mq := n.quarantine.meta
	n.quarantine.mu.Unlock()
	if mq != nil {
		return fmt.Errorf("the metadata replica is quarantined (rebuilding from its peers): %s", mq.rec.Err)
	}
	if n.meta != nil {
		if err := n.meta.fsm.Corrupt(); err != nil {
			return fmt.Errorf("the metadata replica stopped at a damaged log entry (a restart rebuilds it from its peers): %w", err)
		}
	}
	for _, rec := range n.quarantine.list() {
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
// empty, not bootstrapped, its votes withheld (voteGuard) until the
// metadata leader has made it a non-voter and, once it caught up, a voter
// again: it neither votes with a forgotten term or vote nor counts for a
// quorum with a log it no longer has. A node alone in its cluster has no
// peer to rebuild from: it does not start, and the files stay.
func (n *Node) openMeta(dir string, trans *transport.Transport, voters []raft.Server) (*metaGroup, error) {
	rec, quarantined := readQuarantine(dir)
	if !quarantined {
		g, err := openMetaGroup(dir, n.cfg.NodeID, trans, voters, n.cfg.Raft, n.log)
		if err == nil || !shard.IsCorrupt(err) {
			return g, err
		}
		if n.alone() {
			return nil, fmt.Errorf("%w (this node is the cluster's only member: no peer to rebuild the metadata from; restore %s from a backup)", err, dir)
		}
		rec = n.moveAside(dir, "meta", 0, err)
		if rec.Dir == "" {
			return nil, err
		}
		n.log.Error("metadata replica quarantined: its files are damaged; it is rebuilt from its peers", "group", "meta", "err", err, "moved_to", rec.Dir)
	}
	guard := newVoteGuard(trans)
	g, err := openMetaGroup(dir, n.cfg.NodeID, guard, nil, n.cfg.Raft, n.log)
	if err != nil {
		guard.Close()
		return nil, fmt.Errorf("opening the rebuilt metadata replica: %w", err)
	}
	g.fresh = false // a member already: not a new cluster's first start
	n.quarantine.mu.Lock()
	n.quarantine.meta = &metaQuarantine{rec: rec}
	n.quarantine.mu.Unlock()
	n.quarantine.metaGauge.Set(1)
	n.spawn(func() { n.watchMetaRebuild(g, guard, dir) })
	return g, nil
}

// alone reports whether this node is configured as its cluster's only
// member (no other peer, nothing to join).
func (n *Node) alone() bool {
	return len(n.cfg.Join) == 0 && len(n.cfg.Peers) <= 1
}

// moveAside moves dir to <data>/quarantine/<name>-<time>/ and leaves a
// marker in an empty dir; the record's Dir is empty when that failed.
func (n *Node) moveAside(dir, name string, id uint64, cause error) quarantineRecord {
	to := filepath.Join(n.cfg.DataDir, "quarantine", fmt.Sprintf("%s-%s", name, time.Now().UTC().Format("20060102T150405.000Z")))
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
		n.log.Error("cannot move a damaged replica's files aside", "dir", dir, "err", err)
		rec.Dir = ""
	}
	return rec
}

// watchMetaRebuild follows the rebuilt metadata replica's configuration:
// once it has been a non-voter and is a voter again (promoted after
// catching up), it votes again and is no longer quarantined.
func (n *Node) watchMetaRebuild(g *metaGroup, guard *voteGuard, dir string) {
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
		if !ok {
			continue
		}
		q := n.quarantine
		q.mu.Lock()
		if s == raft.Nonvoter {
			q.meta.demoted = true
		}
		done := s == raft.Voter && q.meta.demoted
		rec := q.meta.rec
		if done {
			q.meta = nil
		}
		q.mu.Unlock()
		if done {
			guard.release()
			os.Remove(filepath.Join(dir, quarantineMarker))
			q.metaGauge.Set(0)
			n.log.Info("metadata replica rebuilt from its peers", "was", rec.Err, "files", rec.Dir)
			return
		}
	}
}

// demoteQuarantinedMeta is demoteQuarantined for the metadata group (its
// leader runs it before each change).
func (n *Node) demoteQuarantinedMeta(ctx context.Context, cfg raft.Configuration) (bool, error) {
	for _, s := range cfg.Servers {
		id := string(s.ID)
		if s.Suffrage != raft.Voter || id == n.cfg.NodeID || !n.reportsQuarantine(ctx, id, 0) {
			continue
		}
		if err := shard.Wait(ctx, n.meta.raft.DemoteVoter(s.ID, 0, 10*time.Second)); err != nil {
			return false, fmt.Errorf("demoting quarantined metadata replica %s: %w", id, err)
		}
		n.log.Warn("quarantined metadata replica made a non-voter until it is rebuilt", "member", id)
		return true, nil
	}
	return false, nil
}

// reportsQuarantine reports whether member id's list of shards says its
// replica of group (0: the metadata group) is quarantined: seen in the
// cached list, confirmed by a fresh one.
func (n *Node) reportsQuarantine(ctx context.Context, id string, group uint64) bool {
	p, ok := n.peer(id)
	if !ok {
		return false
	}
	has := func(shards []*cepv1.Shard) bool {
		for _, sh := range shards {
			if uint64(sh.Id) == group && sh.Quarantined != "" {
				return true
			}
		}
		return false
	}
	shards, err := n.cachedPeerShards(ctx, p.APIAddr)
	if err != nil || !has(shards) {
		return false
	}
	n.quarantine.mu.Lock()
	delete(n.quarantine.peerShards, p.APIAddr)
	n.quarantine.mu.Unlock()
	shards, err = n.cachedPeerShards(ctx, p.APIAddr)
	return err == nil && has(shards)
}

// voteGuard is a Raft transport that withholds a replica's votes: it
// answers vote and pre-vote requests with a refusal and sends none, until
// released. Everything else passes.
type voteGuard struct {
	*transport.Transport
	held  atomic.Bool
	in    chan raft.RPC
	stop  chan struct{}
	close sync.Once
}

func newVoteGuard(t *transport.Transport) *voteGuard {
	g := &voteGuard{Transport: t, in: make(chan raft.RPC), stop: make(chan struct{})}
	g.held.Store(true)
	// owned by the guard: it ends when the transport closes (raft's
	// Shutdown closes it)
	go g.forward()
	return g
}

var errVotesWithheld = errors.New("votes withheld: this replica is rebuilding its log")

func (g *voteGuard) forward() {
	src := g.Transport.Consumer()
	for {
		var rpc raft.RPC
		select {
		case rpc = <-src:
		case <-g.stop:
			return
		}
		if g.held.Load() {
			switch req := rpc.Command.(type) {
			case *raft.RequestVoteRequest:
				rpc.Respond(&raft.RequestVoteResponse{RPCHeader: req.RPCHeader, Term: req.Term, Granted: false}, nil)
				continue
			case *raft.RequestPreVoteRequest:
				rpc.Respond(&raft.RequestPreVoteResponse{RPCHeader: req.RPCHeader, Term: req.Term, Granted: false}, nil)
				continue
			}
		}
		select {
		case g.in <- rpc:
		case <-g.stop:
			return
		}
	}
}

func (g *voteGuard) release() { g.held.Store(false) }

func (g *voteGuard) Consumer() <-chan raft.RPC { return g.in }

func (g *voteGuard) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if g.held.Load() {
		return errVotesWithheld
	}
	return g.Transport.RequestVote(id, target, args, resp)
}

func (g *voteGuard) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if g.held.Load() {
		return errVotesWithheld
	}
	return g.Transport.RequestPreVote(id, target, args, resp)
}

func (g *voteGuard) Close() error {
	g.close.Do(func() { close(g.stop) })
	return g.Transport.Close()
}
