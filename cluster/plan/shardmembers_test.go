package plan

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// drawShardCase draws a shard map entry and a configuration over 1–6
// nodes, the leader a voter; some addresses unknown, some non-voters
// behind.
func drawShardCase(t *rapid.T) ShardMembers {
	var nodes []string
	for i := range rapid.IntRange(1, 6).Draw(t, "nodes") {
		nodes = append(nodes, fmt.Sprintf("n%d", i))
	}
	s := ShardMembers{Self: nodes[0], Addrs: map[string]string{}, CaughtUp: map[string]bool{}}
	s.Servers = []Server{{ID: s.Self, Addr: s.Self + ":1", Voter: true}}
	for _, id := range nodes[1:] {
		if rapid.Bool().Draw(t, id+"-server") {
			s.Servers = append(s.Servers, Server{ID: id, Addr: id + ":1", Voter: rapid.Bool().Draw(t, id+"-voter")})
		}
	}
	perm := rapid.Permutation(nodes).Draw(t, "target")
	s.Target = perm[:rapid.IntRange(0, len(perm)).Draw(t, "replicas")]
	for _, id := range nodes {
		if id == s.Self || rapid.IntRange(0, 5).Draw(t, id+"-unknown") > 0 {
			s.Addrs[id] = id + ":1"
		}
		s.CaughtUp[id] = rapid.IntRange(0, 3).Draw(t, id+"-behind") > 0
	}
	return s
}

func voters(servers []Server) int {
	c := 0
	for _, s := range servers {
		if s.Voter {
			c++
		}
	}
	return c
}

func TestShardChangesAreValid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := drawShardCase(t)
		c, busy := ShardChange(s)
		i := serverIndex(s.Servers, c.ID)
		switch c.Kind {
		case None:
			return
		case AddNonvoter:
			if i >= 0 || !slices.Contains(s.Target, c.ID) || c.Addr != s.Addrs[c.ID] {
				t.Fatalf("adds %v to %v for %v", c, s.Servers, s.Target)
			}
		case Promote:
			if i < 0 || s.Servers[i].Voter || !s.CaughtUp[c.ID] || !slices.Contains(s.Target, c.ID) {
				t.Fatalf("promotes %v in %v", c, s.Servers)
			}
		case Remove, Transfer:
			// only once every replica of the map votes
			for _, id := range s.Target {
				if j := serverIndex(s.Servers, id); j < 0 || !s.Servers[j].Voter {
					t.Fatalf("%v while %s of %v does not vote: %v", c, id, s.Target, s.Servers)
				}
			}
			if c.Kind == Remove && (i < 0 || c.ID == s.Self || slices.Contains(s.Target, c.ID)) {
				t.Fatalf("removes %v from %v for %v", c, s.Servers, s.Target)
			}
			if c.Kind == Transfer && (c.ID != s.Target[0] || slices.Contains(s.Target, s.Self)) {
				t.Fatalf("hands over %v for %v (self %s)", c, s.Target, s.Self)
			}
		}
		if !busy {
			t.Fatalf("%v made but not busy", c)
		}
	})
}

// With every address known and every non-voter caught up, the changes
// carried out one by one reach the map's replicas, all voting, and the
// voters never drop below what the shard had or what the map wants.
func TestShardConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := drawShardCase(t)
		for id := range s.CaughtUp {
			s.CaughtUp[id] = true
			s.Addrs[id] = id + ":1"
		}
		floor := min(voters(s.Servers), len(s.Target))
		for step := 0; ; step++ {
			if step > 3*len(s.Addrs) {
				t.Fatalf("no fixed point after %d changes: %v", step, s.Servers)
			}
			c, _ := ShardChange(s)
			if c.Kind == None {
				break
			}
			switch c.Kind {
			case AddNonvoter:
				s.Servers = append(s.Servers, Server{ID: c.ID, Addr: c.Addr})
			case Promote:
				s.Servers[serverIndex(s.Servers, c.ID)].Voter = true
			case Remove, Transfer:
				id := c.ID
				if c.Kind == Transfer {
					id, s.Self = s.Self, c.ID // the new leader removes the old
				}
				i := serverIndex(s.Servers, id)
				s.Servers = slices.Delete(s.Servers, i, i+1)
			}
			if v := voters(s.Servers); v < floor {
				t.Fatalf("%d voters after %v, below %d", v, c, floor)
			}
		}
		if len(s.Target) == 0 {
			return
		}
		if len(s.Servers) != len(s.Target) || voters(s.Servers) != len(s.Target) {
			t.Fatalf("ends at %v for %v", s.Servers, s.Target)
		}
		for _, id := range s.Target {
			if serverIndex(s.Servers, id) < 0 {
				t.Fatalf("ends at %v for %v", s.Servers, s.Target)
			}
		}
	})
}

func TestShardWaitsForCatchUp(t *testing.T) {
	s := ShardMembers{Self: "a", Target: []string{"a", "b"},
		Servers:  []Server{{ID: "a", Voter: true}, {ID: "b"}, {ID: "c", Voter: true}},
		Addrs:    map[string]string{"a": "a:1", "b": "b:1", "c": "c:1"},
		CaughtUp: map[string]bool{}}
	if c, busy := ShardChange(s); c.Kind != None || !busy {
		t.Fatalf("%v busy %v: a non-voter behind is waited for, c stays", c, busy)
	}
	s.CaughtUp["b"] = true
	if c, _ := ShardChange(s); c != (Change{Kind: Promote, ID: "b", Addr: "b:1"}) {
		t.Fatalf("%v", c)
	}
}
