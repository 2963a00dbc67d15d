package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/cluster/leader"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/plan"
	"github.com/cepcluster/cep/cluster/transport"
	"github.com/cepcluster/cep/internal/raftlog"
	"github.com/cepcluster/cep/shard"
)

// replicaSet is this node's shard replicas, by shard id, each with its
// leader loop: it opens and closes them as the shard map places replicas
// (run, the loop that follows the map, is its one writer besides the
// quarantine and Close).
type replicaSet struct {
	n    *Node
	mu   sync.RWMutex
	byID map[uint64]*replica
	kick chan struct{} // wakes run (a split stored)
}

func newReplicaSet(n *Node) *replicaSet {
	return &replicaSet{n: n, byID: map[uint64]*replica{}, kick: make(chan struct{}, 1)}
}

// list is the replicas' shards, by shard id.
func (rs *replicaSet) list() []*shard.Shard {
	if rs == nil {
		return nil // a node that failed to start before it had any
	}
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	out := make([]*shard.Shard, 0, len(rs.byID))
	for _, r := range rs.byID {
		out = append(out, r.sh)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// replica is one of this node's shard replicas with its leader loop.
type replica struct {
	sh     *shard.Shard
	trans  *transport.Transport
	cancel context.CancelFunc
	done   chan struct{} // closed when the leader loop has returned
}

// rangeFile records a replica's key-group range beside its data, so that a
// restarted node opens its replicas before its metadata replica has caught
// up with the shard map.
const rangeFile = "range.json"

// replicaRange is what rangeFile holds.
type replicaRange struct {
	ID     uint64 `json:"id"`
	First  int    `json:"first"`
	Last   int    `json:"last"`
	Groups int    `json:"groups"` // K, the cluster's key groups
}

func (n *Node) shardDir(id uint64) string {
	return filepath.Join(n.cfg.DataDir, "shards", strconv.FormatUint(id, 10))
}

// openLocal opens, at start, the replicas this node has on disk; on
// a new cluster's first start (the metadata group had no state) also those
// of the initial layout, bootstrapped with their initial members. Replicas
// added later are opened by run.
func (rs *replicaSet) openLocal() error {
	n := rs.n
	initial := map[uint64]meta.ShardInfo{}
	for _, info := range n.infos {
		initial[info.ID] = info
	}
	entries, err := os.ReadDir(filepath.Join(n.cfg.DataDir, "shards"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		id, err := strconv.ParseUint(e.Name(), 10, 64)
		if err != nil || !e.IsDir() {
			continue
		}
		if rec, ok := readQuarantine(n.shardDir(id)); ok {
			// quarantined before this start: closed until rebuilt
			n.quarantine.set(rec)
			continue
		}
		rr, err := readRange(n.shardDir(id))
		if err != nil {
			// written before ranges were recorded: the initial layout's
			if in, ok := initial[id]; ok {
				rr, err = replicaRange{First: in.First, Last: in.Last, Groups: n.cfg.KeyGroups}, nil
			}
		}
		if err != nil {
			n.log.Warn("not opening a shard directory", "dir", n.shardDir(id), "err", err)
			continue
		}
		initial, _, _ := n.readSplit(id) // split off before its first snapshot
		if err := rs.open(meta.ShardInfo{ID: id, First: rr.First, Last: rr.Last}, rr.Groups, nil, initial); err != nil {
			return err
		}
	}
	if !n.meta.fresh {
		return nil
	}
	for _, info := range n.infos {
		if !slices.Contains(info.Replicas, n.cfg.NodeID) || rs.get(info.ID) != nil {
			continue
		}
		var members []raft.Server
		for _, id := range info.Replicas {
			for _, p := range n.cfg.Peers {
				if p.ID == id {
					members = append(members, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(p.RaftAddr)})
				}
			}
		}
		if err := rs.open(info, n.cfg.KeyGroups, members, nil); err != nil {
			return err
		}
	}
	return nil
}

func readRange(dir string) (replicaRange, error) {
	b, err := os.ReadFile(filepath.Join(dir, rangeFile))
	if err != nil {
		return replicaRange{}, err
	}
	var rr replicaRange
	if err := json.Unmarshal(b, &rr); err != nil || rr.Groups <= 0 {
		return replicaRange{}, fmt.Errorf("%s: %q is not a key-group range", filepath.Join(dir, rangeFile), b)
	}
	return rr, nil
}

// get returns this node's replica of shard id, or nil.
func (rs *replicaSet) get(id uint64) *replica {
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	return rs.byID[id]
}

// shard returns this node's replica of shard id, nil when it holds none.
func (rs *replicaSet) shard(id uint64) *shard.Shard {
	if rs == nil {
		return nil
	}
	if r := rs.get(id); r != nil {
		return r.sh
	}
	return nil
}

// open opens this node's replica of a shard of a cluster of groups
// key groups and starts its leader loop. bootstrap, for a new cluster's
// initial layout or a shard split off, are the shard's first members, and
// initial a split-off shard's first state; a replica added later starts
// empty and is caught up by the shard's leader once it is in the shard's
// configuration.
func (rs *replicaSet) open(info meta.ShardInfo, groups int, bootstrap []raft.Server, initial []byte) error {
	n := rs.n
	if rs.get(info.ID) != nil {
		return nil
	}
	dir := n.shardDir(info.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, _ := json.Marshal(replicaRange{ID: info.ID, First: info.First, Last: info.Last, Groups: groups})
	if err := os.WriteFile(filepath.Join(dir, rangeFile), b, 0o644); err != nil {
		return err
	}
	layer, err := n.mux.Layer(info.ID)
	if err != nil {
		return err
	}
	trans := transport.NewTransport(layer, n.log)
	scfg := shard.Config{
		ID: info.ID, First: info.First, Last: info.Last, Groups: groups, ClusterID: "cep",
		Dir: dir, LocalID: n.cfg.NodeID, Transport: trans, Bootstrap: bootstrap, Logger: n.log, Raft: n.cfg.Raft,
		Initial: initial, OnSplit: n.storeSplit, OnCorrupt: n.quarantine.onCorrupt,
	}
	if d := n.cfg.knobs().ApplyDelay; d > 0 {
		scfg.Testing = &shard.Testing{ApplyDelay: d}
	}
	sh, err := shard.Open(scfg)
	if err != nil {
		trans.Close()
		if raftlog.IsCorrupt(err) {
			// this replica alone: the node's others go on
			n.quarantine.replica(info.ID, err)
			return nil
		}
		return err
	}
	n.writeShardFormats(sh)
	ctx, cancel := context.WithCancel(n.ctx)
	rep := &replica{sh: sh, trans: trans, cancel: cancel, done: make(chan struct{})}
	rs.mu.Lock()
	rs.byID[info.ID] = rep
	rs.mu.Unlock()
	r := leader.New(ctx, n.leaderEnv(), sh)
	go func() {
		defer close(rep.done)
		r.Run()
	}()
	return nil
}

// close stops the leader loop of this node's replica of shard id, shuts
// the replica down and, with remove, deletes its data.
func (rs *replicaSet) close(id uint64, remove bool) error {
	n := rs.n
	rs.mu.Lock()
	rep := rs.byID[id]
	delete(rs.byID, id)
	rs.mu.Unlock()
	if rep == nil {
		return nil
	}
	rep.cancel()
	<-rep.done
	err := rep.sh.Close()
	rep.trans.Close()
	if remove && err == nil {
		err = os.RemoveAll(n.shardDir(id))
	}
	return err
}

// closeAll closes every replica of this node (keeping their data).
func (rs *replicaSet) closeAll() error {
	var errs []error
	for _, sh := range rs.list() {
		errs = append(errs, rs.close(sh.ID(), false))
	}
	return errors.Join(errs...)
}

// run makes this node's replicas follow the shard map: it opens
// a replica of each shard the map gives this node, and closes and deletes
// one the map no longer gives it once the shard's configuration no longer
// has it (the shard's leader removes it after the replicas replacing it
// have caught up).
func (rs *replicaSet) run() {
	n := rs.n
	for {
		m, changed := n.meta.fsm.View()
		if m.KeyGroups != 0 {
			rs.place(m)
		}
		select {
		case <-n.ctx.Done():
			return
		case <-changed:
		case <-rs.kick:
		case <-time.After(time.Second):
		}
	}
}

func (rs *replicaSet) place(m *meta.Meta) {
	n := rs.n
	for _, info := range m.Shards {
		if !slices.Contains(info.Replicas, n.cfg.NodeID) {
			continue
		}
		if _, ok := n.quarantine.get(info.ID); ok {
			n.quarantine.rebuild(info, m.KeyGroups)
			continue
		}
		if rs.get(info.ID) != nil {
			n.forgetSplit(info.ID)
			continue
		}
		// a shard split off starts from the state the split stored here;
		// while splitting, only from it (this node's replica of the old
		// shard has not split yet otherwise)
		initial, members, ok := n.readSplit(info.ID)
		if !ok && info.Splitting {
			continue
		}
		// a replica that starts empty may be sent the log from its start
		// (not a snapshot): it starts from the range the log began with,
		// and applies the splits since as the others did
		start := info
		start.First, start.Last = info.StartRange()
		if err := rs.open(start, m.KeyGroups, members, initial); err != nil {
			n.log.Error("opening a replica", "shard", info.ID, "err", err)
			continue
		}
		n.log.Info("replica added", "shard", info.ID, "from_split", ok)
	}
	n.dropStraySplits(m)
	n.quarantine.forget(m)
	for _, sh := range n.Shards() {
		// a shard this copy of the metadata does not list yet (one split
		// off, on a node whose metadata is catching up after a restart)
		// stays: only its leader's word removes a replica
		i := m.ShardIndex(sh.ID())
		if i < 0 || slices.Contains(m.Shards[i].Replicas, n.cfg.NodeID) || !rs.removedFrom(m.Shards[i], sh) {
			continue
		}
		if err := rs.close(sh.ID(), true); err != nil {
			n.log.Error("removing a replica", "shard", sh.ID(), "err", err)
			continue
		}
		n.log.Info("replica removed", "shard", sh.ID())
	}
}

// removedFrom reports whether the shard's configuration no longer has this
// node: as this replica last saw it while it knew a leader, or as the
// shard's leader (a replica of the shard map) reports it.
func (rs *replicaSet) removedFrom(info meta.ShardInfo, sh *shard.Shard) bool {
	n := rs.n
	if f := sh.Raft().GetConfiguration(); f.Error() == nil {
		if _, id := sh.Raft().LeaderWithID(); id != "" && !hasServer(f.Configuration(), n.cfg.NodeID) {
			return true
		}
	}
	s, ok := rs.leaderReport(info, info.Replicas)
	if !ok {
		return false
	}
	return !slices.ContainsFunc(s.Servers, func(s plan.Server) bool { return s.ID == n.cfg.NodeID })
}

// leaderReport asks the nodes of ids (within 2s) for their replicas of the
// shard and returns the report of the one that leads it: only the leader's
// own configuration counts (a replica just added knows the leader before it
// has the configuration). ok is false when no leader answers.
func (rs *replicaSet) leaderReport(info meta.ShardInfo, ids []string) (plan.Report, bool) {
	n := rs.n
	ctx, cancel := context.WithTimeout(n.ctx, 2*time.Second)
	defer cancel()
	for _, id := range ids {
		p, found := n.peer(id)
		if !found {
			continue
		}
		reports, err := n.peerAt(p.APIAddr).Reports(ctx)
		if err != nil {
			continue
		}
		if s, ok := plan.LeaderReport(id, reports, info.ID); ok {
			return s, true
		}
	}
	return plan.Report{}, false
}

func hasServer(c raft.Configuration, id string) bool {
	for _, s := range c.Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// peer returns the addresses of member id: from the metadata, else from
// the configuration the cluster was created with, else from the gossip.
func (n *Node) peer(id string) (Peer, bool) {
	if n.meta != nil {
		var p Peer
		found := false
		n.meta.fsm.Read(func(m *meta.Meta) {
			if nd := m.Node(id); nd != nil {
				p, found = peerOf(nd), true
			}
		})
		if found {
			return p, true
		}
	}
	for _, p := range n.cfg.Peers {
		if p.ID == id {
			return p, true
		}
	}
	if n.gossip != nil {
		if mb, ok := n.gossip.Member(id); ok && n.cfg.proven(mb) {
			return Peer{ID: mb.ID, RaftAddr: mb.RaftAddr, APIAddr: mb.APIAddr, GossipAddr: mb.GossipAddr}, true
		}
	}
	return Peer{}, false
}

// peers lists the cluster's members: the metadata's, or before the cluster
// is initialised the configured ones.
func (n *Node) peers() []Peer {
	var out []Peer
	n.meta.fsm.Read(func(m *meta.Meta) {
		for _, nd := range m.Nodes {
			out = append(out, peerOf(&nd))
		}
	})
	if len(out) == 0 {
		return n.cfg.Peers
	}
	return out
}

// keyGroups is the cluster's K: the metadata's once this node has it (a
// node that joined may have been started with another --key-groups),
// else the configured one.
func (n *Node) keyGroups() int {
	k := 0
	if n.meta != nil {
		n.meta.fsm.Read(func(m *meta.Meta) { k = m.KeyGroups })
	}
	if k != 0 {
		return k
	}
	return n.cfg.KeyGroups
}
