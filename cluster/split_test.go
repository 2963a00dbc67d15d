package cluster

import (
	"strings"
	"testing"

	"github.com/cepcluster/cep/cluster/gossip"
	"github.com/cepcluster/cep/cluster/meta"
)

// Shards split only while every member is alive in the gossip with a
// release that applies OpSplit: an older replica could not decode it.
func TestCanSplitNeedsEveryNodesRelease(t *testing.T) {
	m := &meta.Meta{Nodes: []meta.Node{{ID: "n1"}, {ID: "n2"}, {ID: "n3", Removing: true}}}
	n := &Node{cfg: Config{NodeID: "n1"}, gossip: gossip.Static(gossip.Member{ID: "n2", State: gossip.Alive, Proto: protoSplit})}
	if err := n.canSplit(m); err != nil {
		t.Fatalf("every member able: %v", err)
	}
	for _, c := range []struct {
		mb   gossip.Member
		want string
	}{
		{gossip.Member{ID: "n2", State: gossip.Alive}, "runs a release that cannot split"},
		{gossip.Member{ID: "n2", State: gossip.Dead, Proto: protoSplit}, "not reachable"},
	} {
		n.gossip = gossip.Static(c.mb)
		if err := n.canSplit(m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.mb, err, c.want)
		}
	}
	n.gossip = gossip.Static()
	if err := n.canSplit(m); err == nil || !strings.Contains(err.Error(), "not reachable") {
		t.Errorf("a member the gossip has not seen: %v", err)
	}
}

// A split leaves the re-keying of a derived source where it was: on one of
// the shards the cluster was created with, not on a shard split off.
func TestForwarderAfterSplit(t *testing.T) {
	m := meta.New()
	m.Apply(1, meta.Init{ClusterID: "c", KeyGroups: 256, Replication: 2, Nodes: []meta.Node{{ID: "n1"}, {ID: "n2"}, {ID: "n3"}},
		Shards: []meta.ShardInfo{{ID: 1, First: 0, Last: 127, Replicas: []string{"n1", "n2"}}, {ID: 2, First: 128, Last: 255, Replicas: []string{"n2", "n1"}}}})
	m.Apply(3, meta.SplitShard{ShardID: 2})
	m.Apply(7, meta.SplitDone{ShardID: 2})
	m.Apply(8, meta.SplitShard{ShardID: 3, At: 248})
	m.Apply(9, meta.SplitDone{ShardID: 3})
	if len(m.Shards) != 4 {
		t.Fatalf("shards %+v", m.Shards)
	}
	if got := forwarderOf(m, "bank.by-region"); got != 1 && got != 2 {
		t.Fatalf("a shard split off forwards: %d", got)
	}
}

// A tombstone is forgotten per name only while every member's release
// applies it so: a member of the release before (it speaks the split's
// protocol, not this one) or one not reachable makes it the old way.
func TestForgetPerNameNeedsEveryNodesRelease(t *testing.T) {
	m := &meta.Meta{Nodes: []meta.Node{{ID: "n1"}, {ID: "n2"}, {ID: "n3", Removing: true}}}
	for _, c := range []struct {
		g    *gossip.Gossip
		want string
	}{
		{gossip.Static(gossip.Member{ID: "n2", State: gossip.Alive, Proto: protoCurrent}), ""},
		{gossip.Static(gossip.Member{ID: "n2", State: gossip.Alive, Proto: protoSplit}), "n2"},
		{gossip.Static(gossip.Member{ID: "n2", State: gossip.Suspect, Proto: protoCurrent}), "n2"},
		{gossip.Static(), "n2"},
	} {
		n := &Node{cfg: Config{NodeID: "n1"}, gossip: c.g}
		if id, _ := n.behindProto(m, protoForgetPerName); id != c.want {
			t.Errorf("%+v: behind %q, want %q", c.g.Members(), id, c.want)
		}
	}
	alone := &Node{cfg: Config{NodeID: "n1"}}
	if id, _ := alone.behindProto(&meta.Meta{Nodes: []meta.Node{{ID: "n1"}}}, protoForgetPerName); id != "" {
		t.Errorf("a single node without gossip: behind %q", id)
	}
}
