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
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/cluster/gossip"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/shard"
)

// Splitting a shard. The metadata records the split (meta.SplitShard: the
// key groups from SplitAt on go to a new shard with the same replicas);
// the shard's leader proposes OpSplit into its log; every replica, applying
// it, keeps the lower part and hands the upper part's state to its node
// (storeSplit), which writes it beside the new shard's data; each node
// then opens its replica of the new shard from that state, all of them
// bootstrapped with the same members (the old shard's voters at the split),
// so they form one group that starts where the old shard's log left its
// key groups. The new shard reads its key groups from the positions the
// split gave it; the old one drops the events of those key groups it had
// read past the split. Once the old shard's leader reports its new range
// and the new shard has a leader, the metadata leader records the split
// done (meta.SplitDone); placement may then move the new shard's replicas.

// splitFile and splitMembersFile hold, in a new shard's directory, its
// first state and members until its first Raft snapshot.
const (
	splitFile        = "split.snap"
	splitMembersFile = "split-members.json"
)

// storeSplit is every replica's shard.Config.OnSplit: it stores the new
// shard's first state and members durably, for replicaSet.place to open it.
func (n *Node) storeSplit(sp shard.Split, state []byte) {
	dir := n.shardDir(sp.Shard)
	members, _ := json.Marshal(sp.Members)
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = writeDurably(filepath.Join(dir, splitMembersFile), members)
	}
	if err == nil {
		err = writeDurably(filepath.Join(dir, splitFile), state)
	}
	if err != nil {
		// the other replicas start the new shard; this one is caught up
		// by its leader instead
		n.log.Error("storing the state of a shard split off", "shard", sp.Shard, "err", err)
		return
	}
	select {
	case n.replicas.kick <- struct{}{}:
	default:
	}
}

// writeDurably writes data to path through a synced temporary file.
func writeDurably(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		if d, derr := os.Open(filepath.Dir(path)); derr == nil {
			err = d.Sync()
			d.Close()
		}
	}
	return err
}

// readSplit returns the first state and members of shard id stored by a
// split on this node; ok is false when there is none.
func (n *Node) readSplit(id uint64) (state []byte, members []raft.Server, ok bool) {
	dir := n.shardDir(id)
	state, err := os.ReadFile(filepath.Join(dir, splitFile))
	if err != nil {
		return nil, nil, false
	}
	b, err := os.ReadFile(filepath.Join(dir, splitMembersFile))
	var ids []string
	if err == nil {
		err = json.Unmarshal(b, &ids)
	}
	if err != nil {
		n.log.Warn("a split's members are unreadable; the shard is caught up by its leader instead", "shard", id, "err", err)
		return nil, nil, false
	}
	for _, m := range ids {
		id, addr, _ := strings.Cut(m, "=")
		members = append(members, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addr)})
	}
	return state, members, true
}

// forgetSplit removes the split files of shard id once its replica here
// has a Raft snapshot, which holds the state from then on: the leader's
// install of it (installSplitState), or the snapshot the leader sent. (A
// snapshot of its own taken before the install would let the install be
// skipped, so none is asked for here.)
func (n *Node) forgetSplit(id uint64) {
	path := filepath.Join(n.shardDir(id), splitFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return
	}
	if rep := n.replicas.get(id); rep == nil || rep.sh.SnapshotIndex() == 0 {
		return
	}
	os.Remove(path)
	os.Remove(filepath.Join(n.shardDir(id), splitMembersFile))
}

// steerSplits records as done the splits whose old shard's leader reports
// its new range and whose new shard has a leader.
func (n *Node) steerSplits(ctx context.Context, m *meta.Meta) (bool, error) {
	var splitting []meta.ShardInfo
	for _, s := range m.Shards {
		if s.SplitAt != 0 {
			splitting = append(splitting, s)
		}
	}
	if len(splitting) == 0 {
		return false, nil
	}
	res, err := n.clusterShards(ctx)
	if err != nil {
		return false, err
	}
	type report struct {
		last     int
		snapshot uint64
	}
	reported := map[uint64]report{}
	for _, s := range res.Shards {
		if s.LeaderNodeId != "" && s.KeyGroups != nil {
			reported[uint64(s.Id)] = report{int(s.KeyGroups.Last), s.SnapshotIndex}
		}
	}
	for _, s := range splitting {
		// the new shard's leader has installed its state (a snapshot):
		// replicas opened without it from now on are sent it
		old, ok1 := reported[s.ID]
		split, ok2 := reported[s.SplitInto]
		if !ok1 || !ok2 || old.last != s.SplitAt-1 || split.snapshot == 0 {
			continue
		}
		if _, err := n.meta.propose(ctx, meta.SplitDone{ShardID: s.ID}); err != nil {
			return true, fmt.Errorf("recording shard %d's split: %w", s.ID, err)
		}
		n.log.Info("shard split done", "shard", s.ID, "keeps", fmt.Sprintf("%d-%d", s.First, s.SplitAt-1), "new_shard", s.SplitInto)
		return true, nil
	}
	return false, nil
}

// waitSplit waits until shard id's split is done, or ctx ends.
func (n *Node) waitSplit(ctx context.Context, id uint64) bool {
	for {
		m, changed := n.meta.fsm.View()
		i := m.ShardIndex(id)
		if i < 0 || m.Shards[i].SplitAt == 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// protoSplit is the protocol of a release whose shards apply OpSplit: a
// shard splits only while every member has it (an older replica could not
// decode the entry and would keep the whole range). The gossip carries
// each node's (gossip.Config.Proto): protoCurrent.
const protoSplit = 2

// protoForgetPerName is the protocol of a release that applies
// meta.ForgetPattern's PerName: proposed so only while every member has
// it, as an older replica would apply it otherwise.
const protoForgetPerName = 3

// protoCurrent is this release's protocol, the highest it speaks.
const protoCurrent = protoRequestID

// behindProto returns a member of m, not being removed, that the gossip
// does not see alive or whose release speaks a protocol below proto, and
// which of the two; "" when there is none.
func (n *Node) behindProto(m *meta.Meta, proto int) (id string, unreachable bool) {
	for _, nd := range m.Nodes {
		if nd.Removing || nd.ID == n.cfg.NodeID {
			continue
		}
		if n.gossip == nil {
			return nd.ID, true
		}
		mb, ok := n.gossip.Member(nd.ID)
		switch {
		case !ok || mb.State != gossip.Alive:
			return nd.ID, true
		case mb.Proto < proto:
			return nd.ID, false
		}
	}
	return "", false
}

// canSplit reports why the shards cannot split now, if they cannot: a
// member the gossip does not see alive with a release that applies
// OpSplit (during a rolling upgrade, say).
func (n *Node) canSplit(m *meta.Meta) error {
	switch id, unreachable := n.behindProto(m, protoSplit); {
	case id == "":
		return nil
	case unreachable:
		return fmt.Errorf("%w: node %s is not reachable; shards split only while every node is", api.ErrFailedPrecondition, id)
	default:
		return fmt.Errorf("%w: node %s runs a release that cannot split shards; upgrade every node first", api.ErrFailedPrecondition, id)
	}
}

// splitting refuses what needs a settled shard map (savepoints, restores)
// while a shard splits.
func splitting(m *meta.Meta) error {
	for _, s := range m.Shards {
		if s.SplitAt != 0 {
			return fmt.Errorf("%w: shard %d is splitting (into shard %d); retry once it is done", api.ErrFailedPrecondition, s.ID, s.SplitInto)
		}
	}
	return nil
}

// dropStraySplits removes the state a split stored here for a shard whose
// split is done and that the map does not give this node (this replica of
// the old shard was being replaced when it split).
func (n *Node) dropStraySplits(m *meta.Meta) {
	for _, info := range m.Shards {
		if info.Splitting || slices.Contains(info.Replicas, n.cfg.NodeID) {
			continue
		}
		if _, err := os.Stat(filepath.Join(n.shardDir(info.ID), splitFile)); err == nil && n.replicas.get(info.ID) == nil {
			os.RemoveAll(n.shardDir(info.ID))
		}
	}
}
