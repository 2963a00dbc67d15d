package cluster

import (
	"strings"
	"testing"
)

// Shards split only while every member is alive in the gossip with a
// release that applies OpSplit: an older replica could not decode it.
func TestCanSplitNeedsEveryNodesRelease(t *testing.T) {
	m := &Meta{Nodes: []NodeM{{ID: "n1"}, {ID: "n2"}, {ID: "n3", Removing: true}}}
	g := &gossip{members: map[string]member{"n2": {ID: "n2", State: memberAlive, Proto: protoSplit}}}
	n := &Node{cfg: Config{NodeID: "n1"}, gossip: g}
	if err := n.canSplit(m); err != nil {
		t.Fatalf("every member able: %v", err)
	}
	for _, c := range []struct {
		mb   member
		want string
	}{
		{member{ID: "n2", State: memberAlive}, "runs a release that cannot split"},
		{member{ID: "n2", State: memberDead, Proto: protoSplit}, "not reachable"},
	} {
		g.members["n2"] = c.mb
		if err := n.canSplit(m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.mb, err, c.want)
		}
	}
	delete(g.members, "n2")
	if err := n.canSplit(m); err == nil || !strings.Contains(err.Error(), "not reachable") {
		t.Errorf("a member the gossip has not seen: %v", err)
	}
}
