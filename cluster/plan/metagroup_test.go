package plan

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// drawMembers draws 1–7 members, each removing, down or alive at random,
// and a configuration over them and over 0–2 servers that are no member.
func drawMetaCase(t *rapid.T) (self string, members []Member, servers []Server) {
	n := rapid.IntRange(1, 7).Draw(t, "members")
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		members = append(members, Member{ID: id, RaftAddr: id + ":7000",
			Removing: rapid.IntRange(0, 4).Draw(t, id+"-removing") == 0,
			Down:     rapid.IntRange(0, 3).Draw(t, id+"-down") == 0,
			Alive:    rapid.IntRange(0, 3).Draw(t, id+"-alive") != 0,
		})
	}
	ids := make([]string, 0, n+2)
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	for i := range rapid.IntRange(0, 2).Draw(t, "strangers") {
		ids = append(ids, fmt.Sprintf("x%d", i))
	}
	for _, id := range rapid.Permutation(ids).Draw(t, "order") {
		if rapid.Bool().Draw(t, id+"-server") {
			servers = append(servers, Server{ID: id, Addr: id + ":7000", Voter: rapid.Bool().Draw(t, id+"-voter")})
		}
	}
	// the leader is a voter of its group, and not down in its own eyes
	self = members[0].ID
	members[0].Down, members[0].Alive = false, true
	if i := serverIndex(servers, self); i >= 0 {
		servers[i].Voter = true
	} else {
		servers = append([]Server{{ID: self, Addr: self + ":7000", Voter: true}}, servers...)
	}
	return self, members, servers
}

func memberOf(members []Member, id string) (Member, bool) {
	for _, m := range members {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// applyChange is what the group's configuration becomes once c is
// carried out; a transfer moves the leadership to another live voter.
func applyChange(self string, members []Member, servers []Server, c Change) (string, []Server, bool) {
	out := append([]Server(nil), servers...)
	switch c.Kind {
	case AddNonvoter:
		out = append(out, Server{ID: c.ID, Addr: c.Addr})
	case Promote:
		out[serverIndex(out, c.ID)].Voter = true
	case Remove:
		i := serverIndex(out, c.ID)
		out = append(out[:i], out[i+1:]...)
	case Transfer:
		for _, s := range out {
			if m, _ := memberOf(members, s.ID); s.Voter && s.ID != self && !m.Down {
				return s.ID, out, true
			}
		}
		return self, out, false // no one to hand over to: stays
	}
	return self, out, true
}

func TestMetaGroupChangesAreValid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		self, members, servers := drawMetaCase(t)
		c := MetaGroupChange(self, members, servers, MetaVoters)
		m, member := memberOf(members, c.ID)
		i := serverIndex(servers, c.ID)
		switch c.Kind {
		case AddNonvoter:
			if !member || m.Down || !m.Alive || i >= 0 || c.Addr != m.RaftAddr {
				t.Fatalf("adds %v: member %v %+v, server %d", c, member, m, i)
			}
		case Promote:
			if !member || m.Down || m.Removing || i < 0 || servers[i].Voter {
				t.Fatalf("promotes %v: member %v %+v", c, member, m)
			}
		case Remove:
			if i < 0 || c.ID == self {
				t.Fatalf("removes %v (self %s) from %v", c, self, servers)
			}
			if member && !(m.Down && servers[i].Voter) {
				t.Fatalf("removes a member that is no dead voter: %+v", m)
			}
		}
	})
}

// Carried out change after change, the plan reaches a configuration where
// it changes nothing, and that configuration is what the group should be.
func TestMetaGroupConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		self, members, servers := drawMetaCase(t)
		for step := 0; ; step++ {
			if step > 3*len(members)+len(servers)+4 {
				t.Fatalf("no fixed point after %d changes: %v", step, servers)
			}
			c := MetaGroupChange(self, members, servers, MetaVoters)
			if c.Kind == None {
				break
			}
			var ok bool
			if self, servers, ok = applyChange(self, members, servers, c); !ok {
				return // a leader alone cannot hand over: nothing more to check
			}
		}
		live, voters, candidates, promotable := 0, 0, 0, 0
		for _, m := range members {
			i := serverIndex(servers, m.ID)
			if i < 0 && m.Alive && !m.Down {
				t.Fatalf("member %s alive but not a server: %v", m.ID, servers)
			}
			if !m.Removing && !m.Down {
				candidates++
				if i >= 0 && !servers[i].Voter {
					promotable++
				}
			}
		}
		for _, s := range servers {
			if _, ok := memberOf(members, s.ID); !ok {
				t.Fatalf("server %s is no member", s.ID)
			}
			if s.Voter {
				voters++
				if m, _ := memberOf(members, s.ID); !m.Down {
					live++
				}
			}
		}
		if want := min(MetaVoters, candidates); live < want && promotable > 0 {
			t.Fatalf("%d live voters of %d wanted with %d to promote: %v", live, want, promotable, servers)
		}
	})
}

func TestMetaGroupExamples(t *testing.T) {
	alive := func(id string) Member { return Member{ID: id, RaftAddr: id + ":1", Alive: true} }
	voter := func(id string) Server { return Server{ID: id, Addr: id + ":1", Voter: true} }
	for _, tc := range []struct {
		name    string
		members []Member
		servers []Server
		want    Change
	}{
		{"steady", []Member{alive("a"), alive("b"), alive("c")}, []Server{voter("a"), voter("b"), voter("c")}, Change{}},
		{"joins as non-voter", []Member{alive("a"), alive("b")}, []Server{voter("a")}, Change{Kind: AddNonvoter, ID: "b", Addr: "b:1"}},
		{"not while dead", []Member{alive("a"), {ID: "b", Down: true}}, []Server{voter("a")}, Change{}},
		{"promoted", []Member{alive("a"), alive("b")}, []Server{voter("a"), {ID: "b", Addr: "b:1"}}, Change{Kind: Promote, ID: "b", Addr: "b:1"}},
		{"fourth stays non-voter", []Member{alive("a"), alive("b"), alive("c"), alive("d")},
			[]Server{voter("a"), voter("b"), voter("c"), {ID: "d", Addr: "d:1"}}, Change{}},
		{"forgotten removed", []Member{alive("a")}, []Server{voter("a"), voter("b")}, Change{Kind: Remove, ID: "b"}},
		{"forgotten self hands over", []Member{alive("b")}, []Server{voter("a"), voter("b")}, Change{Kind: Transfer}},
	} {
		if got := MetaGroupChange("a", tc.members, tc.servers, MetaVoters); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
