package plan

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// drawMetaCase draws 1–7 members, each removing, down, alive or caught up
// at random, and a configuration over them and over 0–2 servers that are
// no member.
func drawMetaCase(t *rapid.T) (self string, members []Member, servers []Server, caught map[string]bool) {
	n := rapid.IntRange(1, 7).Draw(t, "members")
	caught = map[string]bool{}
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		members = append(members, Member{ID: id, RaftAddr: id + ":7000",
			Removing: rapid.IntRange(0, 4).Draw(t, id+"-removing") == 0,
			Down:     rapid.IntRange(0, 3).Draw(t, id+"-down") == 0,
			Alive:    rapid.IntRange(0, 3).Draw(t, id+"-alive") != 0,
		})
		caught[id] = rapid.IntRange(0, 2).Draw(t, id+"-caught") != 0
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
	return self, members, servers, caught
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
// carried out; a transfer moves the leadership to another up voter.
func applyChange(self string, members []Member, servers []Server, c Change) (string, []Server, bool) {
	out := slices.Clone(servers)
	switch c.Kind {
	case AddNonvoter:
		out = append(out, Server{ID: c.ID, Addr: c.Addr})
	case Promote:
		out[serverIndex(out, c.ID)].Voter = true
	case Demote:
		out[serverIndex(out, c.ID)].Voter = false
	case Remove:
		i := serverIndex(out, c.ID)
		out = append(out[:i], out[i+1:]...)
	case Transfer:
		for _, s := range out {
			if m, ok := memberOf(members, s.ID); ok && s.Voter && s.ID != self && !m.Down && m.Alive {
				return s.ID, out, true
			}
		}
		return self, out, false // no one to hand over to: stays
	}
	return self, out, true
}

// quorum counts the voters, and those the members have as live (a member
// not down) and as up (also alive in the gossip).
func quorum(members []Member, servers []Server) (voters, live, up int) {
	for _, s := range servers {
		if !s.Voter {
			continue
		}
		voters++
		if m, ok := memberOf(members, s.ID); ok && !m.Down {
			live++
			if m.Alive {
				up++
			}
		}
	}
	return voters, live, up
}

func isVoter(servers []Server, id string) bool {
	i := serverIndex(servers, id)
	return i >= 0 && servers[i].Voter
}

func TestMetaGroupChangesAreValid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		self, members, servers, caught := drawMetaCase(t)
		asked := map[string]bool{}
		c := MetaGroupChange(self, members, servers, func(id string) bool { asked[id] = true; return caught[id] }, MetaVoters)
		for id := range asked {
			if i := serverIndex(servers, id); i < 0 || servers[i].Voter {
				t.Fatalf("asked %s, no non-voter, whether it caught up", id)
			}
		}
		m, member := memberOf(members, c.ID)
		i := serverIndex(servers, c.ID)
		voters, live, up := quorum(members, servers)
		// up majority of the voters left once one is taken out
		safe := func(id string) bool {
			u := up
			if m, ok := memberOf(members, id); ok && !m.Down && m.Alive && isVoter(servers, id) {
				u--
			}
			return 2*u > voters-1
		}
		switch c.Kind {
		case AddNonvoter:
			if !member || m.Down || !m.Alive || i >= 0 || c.Addr != m.RaftAddr {
				t.Fatalf("adds %v: member %v %+v, server %d", c, member, m, i)
			}
		case Promote:
			if !member || m.Down || m.Removing || !m.Alive || !caught[c.ID] || i < 0 || servers[i].Voter || c.Addr != servers[i].Addr {
				t.Fatalf("promotes %v: member %v %+v, caught up %v", c, member, m, caught[c.ID])
			}
		case Remove:
			if i < 0 || c.ID == self {
				t.Fatalf("removes %v (self %s) from %v", c, self, servers)
			}
			if member && !m.Down {
				t.Fatalf("removes a member that is not down: %+v", m)
			}
			if servers[i].Voter && !safe(c.ID) {
				t.Fatalf("removes voter %s leaving no majority up: %v %v", c.ID, members, servers)
			}
		case Demote:
			if i < 0 || !servers[i].Voter || !member || m.Down || c.ID == self || !safe(c.ID) {
				t.Fatalf("demotes %v: member %v %+v in %v", c, member, m, servers)
			}
		case Transfer:
			me, ok := memberOf(members, self)
			if ok && !me.Removing || !safe(self) {
				t.Fatalf("hands over, a member not removing or alone: %v %v", members, servers)
			}
		}
		_, after, ok := applyChange(self, members, servers, c)
		if !ok {
			return
		}
		v2, live2, _ := quorum(members, after)
		if 2*live > voters && 2*live2 <= v2 {
			t.Fatalf("%v takes the live voters' majority away: %d of %d, then %d of %d (%v, %v)", c, live, voters, live2, v2, members, servers)
		}
	})
}

// oddTarget is the voter count the group should rest at with n
// candidates: at most MetaVoters, odd.
func oddTarget(n int) int {
	t := min(MetaVoters, n)
	if t%2 == 0 {
		t--
	}
	return max(t, 1)
}

// Carried out change after change, the plan reaches a configuration where
// it changes nothing, and that configuration is what the group should be.
func TestMetaGroupConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		self, members, servers, caught := drawMetaCase(t)
		start := slices.Clone(servers)
		for step := 0; ; step++ {
			if step > 3*len(members)+2*len(servers)+6 {
				t.Fatalf("no fixed point after %d changes: %v", step, servers)
			}
			c := MetaGroupChange(self, members, servers, func(id string) bool { return caught[id] }, MetaVoters)
			if c.Kind == None {
				break
			}
			var ok bool
			if self, servers, ok = applyChange(self, members, servers, c); !ok {
				return // a leader alone cannot hand over: nothing more to check
			}
		}
		for _, m := range members {
			if serverIndex(servers, m.ID) < 0 && m.Alive && !m.Down {
				t.Fatalf("member %s alive but not a server: %v", m.ID, servers)
			}
			if !caught[m.ID] && isVoter(servers, m.ID) && !isVoter(start, m.ID) {
				t.Fatalf("member %s became a voter without catching up: %v", m.ID, servers)
			}
		}
		voters, _, up := quorum(members, servers)
		if up < voters {
			return // a voter not alive yet not down holds the rest back
		}
		candidates := 0
		for _, s := range servers {
			m, _ := memberOf(members, s.ID)
			if m.Down {
				t.Fatalf("server %s down stays: %v", s.ID, servers)
			}
			if s.Voter && m.Removing && voters > 1 {
				t.Fatalf("voter %s removing stays: %v", s.ID, servers)
			}
			if !m.Removing && (s.Voter || caught[s.ID] && m.Alive && !m.Down) {
				candidates++
			}
			if _, ok := memberOf(members, s.ID); !ok {
				t.Fatalf("server %s is no member", s.ID)
			}
		}
		if want := oddTarget(candidates); voters != want {
			t.Fatalf("%d voters, want %d of %d candidates: %v (members %v)", voters, want, candidates, servers, members)
		}
	})
}

func TestMetaGroupExamples(t *testing.T) {
	alive := func(id string) Member { return Member{ID: id, RaftAddr: id + ":1", Alive: true} }
	down := func(id string) Member { return Member{ID: id, RaftAddr: id + ":1", Down: true} }
	removing := func(id string) Member { return Member{ID: id, RaftAddr: id + ":1", Alive: true, Removing: true} }
	voter := func(id string) Server { return Server{ID: id, Addr: id + ":1", Voter: true} }
	nonvoter := func(id string) Server { return Server{ID: id, Addr: id + ":1"} }
	for _, tc := range []struct {
		name    string
		members []Member
		servers []Server
		caught  string // the non-voters caught up
		want    Change
	}{
		{"steady", []Member{alive("a"), alive("b"), alive("c")}, []Server{voter("a"), voter("b"), voter("c")}, "", Change{}},
		{"joins as non-voter", []Member{alive("a"), alive("b")}, []Server{voter("a")}, "", Change{Kind: AddNonvoter, ID: "b", Addr: "b:1"}},
		{"not while dead", []Member{alive("a"), down("b")}, []Server{voter("a")}, "", Change{}},
		{"a down non-voter goes", []Member{alive("a"), down("b")}, []Server{voter("a"), nonvoter("b")}, "", Change{Kind: Remove, ID: "b"}},
		{"not promoted before it caught up", []Member{alive("a"), alive("b"), alive("c")}, []Server{voter("a"), nonvoter("b"), nonvoter("c")}, "b", Change{}},
		{"no second voter of two", []Member{alive("a"), alive("b")}, []Server{voter("a"), nonvoter("b")}, "b", Change{}},
		{"two caught up: on the way to three", []Member{alive("a"), alive("b"), alive("c")}, []Server{voter("a"), nonvoter("b"), nonvoter("c")}, "bc",
			Change{Kind: Promote, ID: "b", Addr: "b:1"}},
		{"the third", []Member{alive("a"), alive("b"), alive("c")}, []Server{voter("a"), voter("b"), nonvoter("c")}, "c", Change{Kind: Promote, ID: "c", Addr: "c:1"}},
		{"two without a third: back to one", []Member{alive("a"), alive("b"), alive("c")}, []Server{voter("a"), voter("b"), nonvoter("c")}, "",
			Change{Kind: Demote, ID: "b"}},
		{"fourth stays non-voter", []Member{alive("a"), alive("b"), alive("c"), alive("d")},
			[]Server{voter("a"), voter("b"), voter("c"), nonvoter("d")}, "d", Change{}},
		{"a down voter goes", []Member{alive("a"), alive("b"), down("c")}, []Server{voter("a"), voter("b"), voter("c")}, "", Change{Kind: Remove, ID: "c"}},
		{"a down voter of two goes", []Member{alive("a"), down("b")}, []Server{voter("a"), voter("b")}, "", Change{Kind: Remove, ID: "b"}},
		{"replaced before it is demoted", []Member{alive("a"), alive("b"), removing("c"), alive("d")},
			[]Server{voter("a"), voter("b"), voter("c"), nonvoter("d")}, "d", Change{Kind: Promote, ID: "d", Addr: "d:1"}},
		{"then demoted", []Member{alive("a"), alive("b"), removing("c"), alive("d")},
			[]Server{voter("a"), voter("b"), voter("c"), voter("d")}, "", Change{Kind: Demote, ID: "c"}},
		{"forgotten removed", []Member{alive("a")}, []Server{voter("a"), voter("b")}, "", Change{Kind: Remove, ID: "b"}},
		{"forgotten self hands over", []Member{alive("b")}, []Server{voter("a"), voter("b")}, "", Change{Kind: Transfer}},
		{"not removed while the others are not up", []Member{alive("a"), {ID: "b", RaftAddr: "b:1"}}, []Server{voter("a"), voter("b"), voter("x")}, "",
			Change{}},
	} {
		caught := func(id string) bool {
			return len(id) == 1 && tc.caught != "" && slices.Contains([]byte(tc.caught), id[0])
		}
		if got := MetaGroupChange("a", tc.members, tc.servers, caught, MetaVoters); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
