package plan

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// simNode is a member in a simulated cluster: a real node catches up with
// the metadata log once told to; a fake one (a process that joins the
// gossip and answers health checks but runs no Raft) never does.
type simNode struct {
	id       string
	real     bool
	caught   bool // it has the metadata log, as its leader would find
	running  bool // the gossip sees it alive
	down     bool // unreachable for the dead-after time
	removing bool
}

// simCluster is the metadata (its members, in order), the metadata
// group's configuration and its leader.
type simCluster struct {
	nodes   []*simNode
	servers []Server
	leader  string
	joined  int
}

func (c *simCluster) node(id string) *simNode {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

func (c *simCluster) members() []Member {
	out := make([]Member, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, Member{ID: n.id, RaftAddr: n.id + ":7000", Removing: n.removing, Down: n.down, Alive: n.running})
	}
	return out
}

func (c *simCluster) caughtUp(id string) bool {
	n := c.node(id)
	return n != nil && n.real && n.caught && n.running
}

// majorities reports whether the voters the metadata has as live (not
// down), and those running, are a majority of the voters.
func (c *simCluster) majorities() (live, running bool) {
	voters, l, r := 0, 0, 0
	for _, s := range c.servers {
		if !s.Voter {
			continue
		}
		voters++
		if n := c.node(s.ID); n != nil {
			if !n.down {
				l++
			}
			if n.running {
				r++
			}
		}
	}
	return 2*l > voters, 2*r > voters
}

// settle has the leader change the group until it changes nothing,
// checking every change; false: the group has no leader.
func (c *simCluster) settle(t *rapid.T) bool {
	for step := 0; ; step++ {
		if step > 40 {
			t.Fatalf("no fixed point after %d changes: %v", step, c.servers)
		}
		if !c.elect() {
			return false
		}
		liveBefore, runBefore := c.majorities()
		ch := MetaGroupChange(c.leader, c.members(), c.servers, c.caughtUp, MetaVoters)
		switch ch.Kind {
		case None:
			return true
		case AddNonvoter:
			c.servers = append(c.servers, Server{ID: ch.ID, Addr: ch.Addr})
		case Promote:
			c.servers[serverIndex(c.servers, ch.ID)].Voter = true
		case Demote:
			c.servers[serverIndex(c.servers, ch.ID)].Voter = false
		case Remove:
			c.servers = slices.Delete(c.servers, serverIndex(c.servers, ch.ID), serverIndex(c.servers, ch.ID)+1)
		case Transfer:
			to := ""
			for _, s := range c.servers {
				if n := c.node(s.ID); s.Voter && s.ID != c.leader && n != nil && n.running && !n.down {
					to = s.ID
					break
				}
			}
			if to == "" {
				t.Fatalf("hands over with no voter to take it: %v", c.servers)
			}
			c.leader = to
		}
		live, run := c.majorities()
		if liveBefore && !live || runBefore && !run {
			t.Fatalf("%v takes the majority away (live %v→%v, running %v→%v): %v", ch, liveBefore, live, runBefore, run, c.servers)
		}
		for _, s := range c.servers {
			if n := c.node(s.ID); s.Voter && n != nil && !n.real {
				t.Fatalf("%v: fake member %s votes: %v", ch, s.ID, c.servers)
			}
		}
	}
}

// elect keeps the leader, or makes a running voter the leader while the
// running voters are a majority; false when there is none.
func (c *simCluster) elect() bool {
	if n := c.node(c.leader); n != nil && n.running && isVoter(c.servers, c.leader) {
		return true
	}
	if _, run := c.majorities(); !run {
		return false
	}
	for _, s := range c.servers {
		if n := c.node(s.ID); s.Voter && n != nil && n.running {
			c.leader = s.ID
			n.down = false // the new leader does not find itself down
			return true
		}
	}
	return false
}

// event draws and applies one member event; fakesOnly limits them to the
// fake members (and the time passing).
func (c *simCluster) event(t *rapid.T, fakesOnly bool) {
	pick := func(ok func(*simNode) bool) *simNode {
		var ns []*simNode
		for _, n := range c.nodes {
			if ok(n) && (!fakesOnly || !n.real) {
				ns = append(ns, n)
			}
		}
		if len(ns) == 0 {
			return nil
		}
		return ns[rapid.IntRange(0, len(ns)-1).Draw(t, "who")]
	}
	switch rapid.SampledFrom([]string{"join", "catch up", "die", "dead after", "come back", "remove", "forget"}).Draw(t, "event") {
	case "join":
		if len(c.nodes) < 8 {
			c.joined++
			c.nodes = append(c.nodes, &simNode{id: fmt.Sprintf("j%d", c.joined), real: !fakesOnly && rapid.Bool().Draw(t, "real"), running: true})
		}
	case "catch up":
		if n := pick(func(n *simNode) bool { return n.running }); n != nil && n.real {
			n.caught = true
		}
	case "die":
		if n := pick(func(n *simNode) bool { return n.running }); n != nil {
			n.running = false
		}
	case "dead after":
		for _, n := range c.nodes {
			n.down = !n.running && n.id != c.leader
		}
	case "come back":
		if n := pick(func(n *simNode) bool { return !n.running }); n != nil {
			n.running, n.down, n.caught = true, false, false // behind the log until it catches up
		}
	case "remove":
		if n := pick(func(n *simNode) bool { return !n.removing }); n != nil {
			n.removing = true
		}
	case "forget":
		if n := pick(func(n *simNode) bool { return n.removing }); n != nil {
			c.nodes = slices.DeleteFunc(c.nodes, func(x *simNode) bool { return x == n })
		}
	}
}

// Through any sequence of member events, every change the leader makes
// keeps the live (and the running) voters a majority where they were one,
// no fake member ever votes, and once every real member is running and
// caught up, the real members not removing vote, as many as odd allows.
func TestMetaGroupThroughMemberEvents(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := &simCluster{leader: "n0", servers: []Server{{ID: "n0", Addr: "n0:7000", Voter: true}}}
		c.nodes = []*simNode{{id: "n0", real: true, caught: true, running: true}}
		for range rapid.IntRange(1, 40).Draw(t, "events") {
			c.event(t, false)
			if !c.settle(t) {
				return // the events took the majority away: no leader to check
			}
			real, ready := 0, true
			for _, n := range c.nodes {
				if n.real {
					ready = ready && n.running && n.caught && !n.down
					if !n.removing {
						real++
					}
				}
			}
			voters, _, _ := quorum(c.members(), c.servers)
			if ready && voters != oddTarget(real) {
				t.Fatalf("%d voters with %d real members ready: %v", voters, real, c.servers)
			}
		}
	})
}

// One node, and members that appear, vanish, come back, are removed or
// forgotten without ever catching up: the node stays the only voter.
func TestMetaGroupOneNodeKeepsItsVote(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := &simCluster{leader: "n0", servers: []Server{{ID: "n0", Addr: "n0:7000", Voter: true}}}
		c.nodes = []*simNode{{id: "n0", real: true, caught: true, running: true}}
		for range rapid.IntRange(1, 40).Draw(t, "events") {
			c.event(t, true)
			if !c.settle(t) {
				t.Fatalf("no leader: %v", c.servers)
			}
			var voters []string
			for _, s := range c.servers {
				if s.Voter {
					voters = append(voters, s.ID)
				}
			}
			if !slices.Equal(voters, []string{"n0"}) || c.leader != "n0" {
				t.Fatalf("voters %v, leader %s", voters, c.leader)
			}
		}
	})
}
