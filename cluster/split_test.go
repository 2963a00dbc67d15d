package cluster

import (
	"strings"
	"testing"

	"github.com/cepcluster/cep/cluster/gossip"
)

// Shards split only while every member is alive in the gossip with a
// release that applies OpSplit: an older replica could not decode it.
func TestCanSplitNeedsEveryNodesRelease(t *testing.T) {
	m := &Meta{Nodes: []NodeM{{ID: "n1"}, {ID: "n2"}, {ID: "n3", Removing: true}}}
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
