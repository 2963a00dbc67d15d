package leader

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	"pgregory.net/rapid"

	"github.com/cepcluster/cep/cluster/plan"
)

// reconcileMembersBefore is the decision reconcileMembers made before it
// asked plan.ShardChange, kept to show that the planner, given what
// shardMembers gathers, decides the same.
func reconcileMembersBefore(self string, target []string, c raft.Configuration, peer func(string) (Peer, bool), caughtUp func(Peer) bool) (plan.Change, bool) {
	if len(target) == 0 {
		return plan.Change{}, false
	}
	cfg := suffrages(c)
	for _, id := range target {
		if _, ok := cfg[id]; ok {
			continue
		}
		if p, ok := peer(id); ok {
			return plan.Change{Kind: plan.AddNonvoter, ID: id, Addr: p.RaftAddr}, true
		}
	}
	busy := false
	for _, id := range target {
		if cfg[id] != raft.Nonvoter {
			continue
		}
		p, ok := peer(id)
		if !ok {
			continue
		}
		if !caughtUp(p) {
			busy = true
			continue
		}
		return plan.Change{Kind: plan.Promote, ID: id, Addr: p.RaftAddr}, true
	}
	for _, id := range target {
		if cfg[id] != raft.Voter {
			return plan.Change{}, true
		}
	}
	for _, s := range c.Servers {
		id := string(s.ID)
		if slices.Contains(target, id) {
			continue
		}
		if id == self {
			p, ok := peer(target[0])
			if !ok {
				return plan.Change{}, false
			}
			return plan.Change{Kind: plan.Transfer, ID: target[0], Addr: p.RaftAddr}, true
		}
		return plan.Change{Kind: plan.Remove, ID: id}, true
	}
	_ = busy // always false here: a non-voter of the map returned above
	return plan.Change{}, false
}

// membersCase is a shard led by n0 over up to 6 nodes: servers voters,
// non-voters or (raft's deprecated) staging; some nodes unknown, some
// non-voters behind; configured addresses that differ from the known ones.
type membersCase struct {
	target   []string
	cfg      raft.Configuration
	known    map[string]bool
	caughtUp map[string]bool
}

func drawMembersCase(t *rapid.T) membersCase {
	var nodes []string
	for i := range rapid.IntRange(1, 6).Draw(t, "nodes") {
		nodes = append(nodes, fmt.Sprintf("n%d", i))
	}
	c := membersCase{known: map[string]bool{}, caughtUp: map[string]bool{}}
	c.cfg.Servers = []raft.Server{{ID: "n0", Address: "n0:cfg", Suffrage: raft.Voter}}
	for _, id := range nodes[1:] {
		if rapid.Bool().Draw(t, id+"-server") {
			sf := []raft.ServerSuffrage{raft.Voter, raft.Nonvoter, raft.Staging}[rapid.IntRange(0, 2).Draw(t, id+"-suffrage")]
			c.cfg.Servers = append(c.cfg.Servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":cfg"), Suffrage: sf})
		}
	}
	// the servers in any order: the first the map lacks is removed
	c.cfg.Servers = rapid.Permutation(c.cfg.Servers).Draw(t, "order")
	perm := rapid.Permutation(nodes).Draw(t, "target")
	c.target = perm[:rapid.IntRange(0, len(perm)).Draw(t, "replicas")]
	for _, id := range nodes {
		c.known[id] = id == "n0" || rapid.IntRange(0, 4).Draw(t, id+"-unknown") > 0
		c.caughtUp[id] = rapid.IntRange(0, 2).Draw(t, id+"-behind") > 0
	}
	return c
}

// Peer is what the node knew of another node when the decision was made
// here, as the oracle takes it.
type Peer struct{ ID, RaftAddr, APIAddr string }

func (c membersCase) peer(id string) (Peer, bool) {
	if !c.known[id] {
		return Peer{}, false
	}
	return Peer{ID: id, RaftAddr: id + ":raft", APIAddr: id + ":api"}, true
}

// addr is peer as shardMembers asks it: the Raft address.
func (c membersCase) addr(id string) (string, bool) {
	p, ok := c.peer(id)
	return p.RaftAddr, ok
}

// unknownMissing reports whether a replica of the map is neither a server
// nor known to the node: the one case where the two decisions differ.
func (c membersCase) unknownMissing() bool {
	cfg := suffrages(c.cfg)
	for _, id := range c.target {
		if _, ok := cfg[id]; !ok && !c.known[id] {
			return true
		}
	}
	return false
}

// The planner, given what shardMembers gathers, decides what
// reconcileMembers decided on its own, except where a replica of the map
// is neither a server nor known: the old code read its missing suffrage as
// raft.Voter (the zero value) and went on to remove a server or hand
// leadership over before that replica voted; the planner waits for it, as
// both say they do.
func TestReconcileMembersDecidesAsBefore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawMembersCase(t)
		var asked []string
		caughtUp := func(id string) bool {
			asked = append(asked, id)
			return c.caughtUp[id]
		}
		got, gotBusy := plan.ShardChange(shardMembers("n0", c.target, c.cfg, c.addr, caughtUp))
		want, wantBusy := reconcileMembersBefore("n0", c.target, c.cfg, c.peer, func(p Peer) bool { return c.caughtUp[p.ID] })
		if got != want || gotBusy != wantBusy {
			if !c.unknownMissing() || got != (plan.Change{}) || !gotBusy || (want.Kind != plan.Remove && want.Kind != plan.Transfer && want.Kind != plan.None) {
				t.Fatalf("planner %v busy %v, before %v busy %v (target %v, servers %v, known %v)", got, gotBusy, want, wantBusy, c.target, c.cfg.Servers, c.known)
			}
		}
		// the catch-up is asked of known non-voters of the map only
		cfg := suffrages(c.cfg)
		for _, id := range asked {
			if s, ok := cfg[id]; !ok || s != raft.Nonvoter || !c.known[id] || !slices.Contains(c.target, id) {
				t.Fatalf("asked %s (target %v, servers %v)", id, c.target, c.cfg.Servers)
			}
		}
	})
}

// The case where the decisions differ: x, a replica of the map this node
// does not know (yet), is not a server; a, b and c vote. Before, c was
// removed, leaving two voters where the map wants three; now the shard
// waits until x is known and added.
func TestReconcileMembersWaitsForAnUnknownReplica(t *testing.T) {
	c := membersCase{
		target: []string{"n0", "b", "x"},
		cfg: raft.Configuration{Servers: []raft.Server{
			{ID: "n0", Address: "n0:cfg"}, {ID: "b", Address: "b:cfg"}, {ID: "c", Address: "c:cfg"}}},
		known: map[string]bool{"n0": true, "b": true, "c": true},
	}
	never := func(Peer) bool { t.Fatal("no non-voter to ask"); return false }
	if got, busy := plan.ShardChange(shardMembers("n0", c.target, c.cfg, c.addr, func(string) bool { return never(Peer{}) })); got != (plan.Change{}) || !busy {
		t.Fatalf("%v busy %v, want to wait for x", got, busy)
	}
	if before, _ := reconcileMembersBefore("n0", c.target, c.cfg, c.peer, never); before != (plan.Change{Kind: plan.Remove, ID: "c"}) {
		t.Fatalf("before: %v", before)
	}
}
