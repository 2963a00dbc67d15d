package integration

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/snapshot"
)

// shardVoters returns, for each shard, its replicas as the node serving the
// API at addr reports them from its shard map (GetStatus) and, from the
// shards' leaders, the voters and non-voters of each configuration.
func shardVoters(ctx context.Context, addrs []string) (map[uint32][]string, error) {
	out := map[uint32][]string{}
	for _, addr := range addrs {
		res, err := newClients(addr).cluster.ListShards(ctx, req(&cepv1.ListShardsRequest{}))
		if err != nil {
			continue
		}
		for _, sh := range res.Msg.Shards {
			var voters []string
			for _, r := range sh.Replicas {
				if r.Suffrage == cepv1.Suffrage_SUFFRAGE_VOTER {
					voters = append(voters, r.NodeId)
				} else {
					voters = append(voters, r.NodeId+"(non-voter)")
				}
			}
			if sh.LeaderNodeId != "" && len(sh.Replicas) > 0 {
				out[sh.Id] = voters
			}
		}
	}
	return out, nil
}

// waitPlaced waits until each of the shards has exactly the voters want
// returns true for, as many as n, as their leaders report them.
func waitPlaced(t *testing.T, ctx context.Context, addrs []string, shards, n int, ok func(node string) bool, timeout time.Duration) map[uint32][]string {
	t.Helper()
	var got map[uint32][]string
	checkFor(t, timeout, func() error {
		var err error
		if got, err = shardVoters(ctx, addrs); err != nil {
			return err
		}
		if len(got) != shards {
			return fmt.Errorf("%d of %d shards report a leader: %v", len(got), shards, got)
		}
		for id, voters := range got {
			if len(voters) != n {
				return fmt.Errorf("shard %d has replicas %v, want %d voters", id, voters, n)
			}
			for _, v := range voters {
				if strings.HasSuffix(v, "(non-voter)") || !ok(v) {
					return fmt.Errorf("shard %d has replicas %v", id, voters)
				}
			}
		}
		return nil
	})
	return got
}

// publishSlowly publishes lines to the source "bank" in ten parts spread
// over about d.
func publishSlowly(t *testing.T, natsURL string, keyOf func(map[string]any) string, lines []string, d time.Duration) {
	t.Helper()
	for i := 0; i < 10; i++ {
		publish(t, natsURL, "bank", keyOf, lines[i*len(lines)/10:(i+1)*len(lines)/10])
		time.Sleep(d / 10)
	}
}

// A single-node cluster of one shard grows: two nodes join it through the
// gossip, every shard is replicated onto them (added as non-voters, caught
// up, promoted) and the shard splits until there is one per node; then the
// first node is removed and its replicas move to a fourth node that
// joins. Events published before, while and after the
// replicas move produce, on NATS, exactly the offline engine's records.
func TestNodesJoinAndAreRemoved(t *testing.T) {
	ctx, ns, base, _ := inProcessPeers(t, 1, 3*time.Minute)
	start := func(id string, join []string) *cluster.Node {
		cfg := cluster.Config{NodeID: id, DataDir: filepath.Join(base, id), RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0",
			NATSURL: ns.ClientURL(), Shards: 1, Join: join, FastGossip: true, Raft: testRaft(), Logger: logger(t),
			GossipKey: []byte("0123456789abcdef")}
		n, err := cluster.Start(context.Background(), cfg)
		if err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	n1 := start("n1", nil)
	if err := n1.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	c1 := newClients(n1.APIAddr())
	createBank(t, ctx, c1)
	deploy(t, ctx, c1, &cepv1.DeployPatternRequest{Spec: string(lflSpec)})
	lines := bankEvents(11, 3000)
	keyOf := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	publish(t, ns.ClientURL(), "bank", keyOf, lines[:1000])

	// the replicas move while events flow
	n2 := start("n2", []string{n1.GossipAddr()})
	n3 := start("n3", []string{n1.GossipAddr()})
	publishSlowly(t, ns.ClientURL(), keyOf, lines[1000:1500], 2*time.Second)
	addrs := []string{n1.APIAddr(), n2.APIAddr(), n3.APIAddr()}
	placed := waitPlaced(t, ctx, addrs, 3, 3, func(string) bool { return true }, time.Minute)
	t.Logf("after two joins: %v", placed)
	st, err := newClients(n3.APIAddr()).cluster.GetStatus(ctx, req(&cepv1.GetStatusRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Msg.Summary; s.Nodes != 3 || s.Alive != 3 {
		t.Fatalf("status through a joined node: %+v", s)
	}
	publish(t, ns.ClientURL(), "bank", keyOf, lines[1500:2000])

	// n1, the first node, leaves once n4 has joined (through n2) to take
	// its place: before, the two others could not hold three replicas
	c2 := newClients(n2.APIAddr())
	if _, err := c2.cluster.RemoveNode(ctx, req(&cepv1.RemoveNodeRequest{NodeId: "n9"})); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Fatalf("removing an unknown node: %v", err)
	}
	if _, err := c2.cluster.RemoveNode(ctx, req(&cepv1.RemoveNodeRequest{NodeId: "n1"})); err == nil || !strings.Contains(err.Error(), "add a node first") {
		t.Fatalf("removing one of three nodes with three replicas: %v", err)
	}
	n4 := start("n4", []string{n2.GossipAddr()})
	checkFor(t, 30*time.Second, func() error {
		res, err := c2.cluster.RemoveNode(ctx, req(&cepv1.RemoveNodeRequest{NodeId: "n1"}))
		if err == nil && !res.Msg.Node.Removing {
			return fmt.Errorf("n1 not removing: %v", res.Msg.Node)
		}
		return err
	})
	publishSlowly(t, ns.ClientURL(), keyOf, lines[2000:2500], 2*time.Second)
	addrs = []string{n2.APIAddr(), n3.APIAddr(), n4.APIAddr()}
	placed = waitPlaced(t, ctx, addrs, 3, 3, func(id string) bool { return id != "n1" }, time.Minute)
	t.Logf("after n1's removal: %v", placed)
	checkFor(t, 30*time.Second, func() error {
		st, err := newClients(n2.APIAddr()).cluster.GetStatus(ctx, req(&cepv1.GetStatusRequest{}))
		if err != nil {
			return err
		}
		var ids []string
		for _, nd := range st.Msg.Nodes {
			ids = append(ids, nd.Id)
		}
		if slices.Contains(ids, "n1") {
			return fmt.Errorf("members %v", ids)
		}
		return nil
	})
	if held := len(n1.Shards()); held != 0 {
		t.Fatalf("the removed node still has %d replicas open", held)
	}
	publish(t, ns.ClientURL(), "bank", keyOf, lines[2500:])
	// any node lists every shard, as its leader reports it
	all, err := newClients(n4.APIAddr()).cluster.ListShards(ctx, req(&cepv1.ListShardsRequest{ClusterWide: true}))
	if err != nil || len(all.Msg.Shards) != 3 {
		t.Fatalf("cluster-wide shards through n4: %v %v", all, err)
	}
	for _, sh := range all.Msg.Shards {
		if sh.LeaderNodeId == "" || sh.LeaderNodeId == "n1" || len(sh.Replicas) != 3 || sh.KeyGroups == nil {
			t.Errorf("shard %d as listed cluster-wide: %v", sh.Id, sh)
		}
	}

	want := withoutIDs(offline(t, lflSpec, lines))
	got := withoutIDs(outputsOnceThere(t, ns.ClientURL(), "cep.out.lfl", len(want), time.Minute))
	if d := differsFromOffline(got, want, string(lflSpec)); d != "" {
		t.Fatalf("output across joins and a removal: %s", d)
	}
	t.Logf("%d records, as offline", len(got))
	// n4's replicas came by snapshot or by the log from its start (the
	// shards split meanwhile): they hold what the others hold
	checkReplicasIdentical(t, []*cluster.Node{n2, n3, n4})
}

// Of four nodes (each shard on three), one stops for good: after
// DeadAfter its replicas move to the other three, so that when a second
// node stops every shard still has a quorum and the events published
// after both failures are processed. Without the move, two shards would
// have lost two of their three replicas.
func TestDeadNodesReplicasMove(t *testing.T) {
	ctx, ns, _, nodes, _, lines, keyOf := fourNodesDeadAfter2s(t, 12, 2000)

	both := 0
	for _, info := range nodes[0].Meta().Shards {
		if slices.Contains(info.Replicas, "n3") && slices.Contains(info.Replicas, "n4") {
			both++
		}
	}
	if both == 0 {
		t.Fatal("no shard has replicas on both n3 and n4: the test would prove nothing")
	}
	nodes[3].Close()
	nodes[3] = nil
	addrs := []string{nodes[0].APIAddr(), nodes[1].APIAddr(), nodes[2].APIAddr()}
	placed := waitPlaced(t, ctx, addrs, 4, 3, func(id string) bool { return id != "n4" }, time.Minute)
	t.Logf("n4 stopped; %d shards had replicas on n3 and n4; now %v", both, placed)
	// the metrics say so: n4 dead, each shard's leader with the voters its
	// map entry wants (asked again while leadership moves)
	checkFor(t, 10*time.Second, func() error {
		if v := metric(t, nodes[0], "cep_cluster_members", `state="dead"`); v != 1 {
			return fmt.Errorf("cep_cluster_members{state=\"dead\"} = %v, want 1", v)
		}
		led := 0
		for _, n := range nodes[:3] {
			for _, sh := range n.Shards() {
				id := fmt.Sprintf(`shard="%d"`, sh.ID())
				if v, ok := metricValue(t, n, "cep_shard_voters", id); ok {
					led++
					if w, _ := metricValue(t, n, "cep_shard_replicas_wanted", id); v != 3 || w != 3 {
						return fmt.Errorf("shard %d: %v voters, %v wanted", sh.ID(), v, w)
					}
				}
			}
		}
		if led != 4 {
			return fmt.Errorf("%d shards report voters, want 4 (one leader each)", led)
		}
		return nil
	})
	nodes[2].Close()
	nodes[2] = nil
	publish(t, ns.ClientURL(), "bank", keyOf, lines[1000:])

	want := withoutIDs(offline(t, lflSpec, lines))
	got := withoutIDs(outputsOnceThere(t, ns.ClientURL(), "cep.out.lfl", len(want), time.Minute))
	if d := differsFromOffline(got, want, string(lflSpec)); d != "" {
		t.Fatalf("output after two nodes stopped: %s", d)
	}
	t.Logf("%d records, as offline", len(got))

	// the stopped nodes are removed: n4 at once (it holds nothing now);
	// n3 only allowing the shards two replicas, the two nodes left
	c2 := newClients(nodes[1].APIAddr())
	if _, err := c2.cluster.RemoveNode(ctx, req(&cepv1.RemoveNodeRequest{NodeId: "n4"})); err != nil {
		t.Fatalf("removing n4: %v", err)
	}
	waitMembers(t, ctx, c2, "n1,n2,n3")
	if _, err := c2.cluster.RemoveNode(ctx, req(&cepv1.RemoveNodeRequest{NodeId: "n3"})); err == nil || !strings.Contains(err.Error(), "add a node first") {
		t.Fatalf("removing n3 of three nodes with three replicas: %v", err)
	}
	if _, err := c2.cluster.RemoveNode(ctx, req(&cepv1.RemoveNodeRequest{NodeId: "n3", AllowFewerReplicas: true})); err != nil {
		t.Fatalf("removing n3, allowing fewer replicas: %v", err)
	}
	waitMembers(t, ctx, c2, "n1,n2")
	placed = waitPlaced(t, ctx, addrs[:2], 4, 2, func(id string) bool { return id == "n1" || id == "n2" }, 30*time.Second)
	t.Logf("on the two nodes left: %v", placed)
	checkReplicasIdentical(t, nodes)
}

// waitMembers waits until the cluster's members are ids (sorted, joined by
// commas) as c's node reports them.
func waitMembers(t *testing.T, ctx context.Context, c clients, ids string) {
	t.Helper()
	checkFor(t, 30*time.Second, func() error {
		st, err := c.cluster.GetStatus(ctx, req(&cepv1.GetStatusRequest{}))
		if err != nil {
			return err
		}
		var got []string
		for _, nd := range st.Msg.Nodes {
			got = append(got, nd.Id)
		}
		if strings.Join(got, ",") != ids {
			return fmt.Errorf("members %v, want %s", got, ids)
		}
		return nil
	})
}

// fourNodesDeadAfter2s starts four nodes that move an unreachable node's
// replicas after 2 s, deploys lflSpec through the first and publishes the
// first 1,000 of n bank events drawn with seed.
func fourNodesDeadAfter2s(t *testing.T, seed uint64, n int) (context.Context, *server.Server, []cluster.Config, []*cluster.Node, clients, []string, func(map[string]any) string) {
	t.Helper()
	ctx, ns, _, cfgs := inProcessPeers(t, 4, 3*time.Minute)
	for i := range cfgs {
		cfgs[i].DeadAfter = 2 * time.Second
	}
	nodes := startAll(t, ctx, cfgs)
	c := newClients(nodes[0].APIAddr())
	createBank(t, ctx, c)
	deploy(t, ctx, c, &cepv1.DeployPatternRequest{Spec: string(lflSpec)})
	lines := bankEvents(seed, n)
	keyOf := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	publish(t, ns.ClientURL(), "bank", keyOf, lines[:1000])
	return ctx, ns, cfgs, nodes, c, lines, keyOf
}

// A node declared dead comes back with its data: its old replicas, which
// the shards replaced meanwhile, are deleted, placement gives it replicas
// again, and the records stay exactly the offline engine's.
func TestDeadNodeComesBack(t *testing.T) {
	ctx, ns, cfgs, nodes, c, lines, keyOf := fourNodesDeadAfter2s(t, 14, 3000)

	nodes[3].Close()
	nodes[3] = nil
	addrs := []string{nodes[0].APIAddr(), nodes[1].APIAddr(), nodes[2].APIAddr()}
	waitPlaced(t, ctx, addrs, 4, 3, func(id string) bool { return id != "n4" }, time.Minute)
	publish(t, ns.ClientURL(), "bank", keyOf, lines[1000:2000])

	n4, err := cluster.Start(context.Background(), cfgs[3])
	if err != nil {
		t.Fatal(err)
	}
	nodes[3] = n4
	// balanced again: twelve replicas over four nodes, three each
	checkFor(t, time.Minute, func() error {
		st, err := c.cluster.GetStatus(ctx, req(&cepv1.GetStatusRequest{}))
		if err != nil {
			return err
		}
		for _, nd := range st.Msg.Nodes {
			if nd.Replicas != 3 || nd.State != cepv1.NodeState_NODE_STATE_ALIVE {
				return fmt.Errorf("%s: %v with %d replicas", nd.Id, nd.State, nd.Replicas)
			}
		}
		return nil
	})
	placed := waitPlaced(t, ctx, append(addrs, n4.APIAddr()), 4, 3, func(string) bool { return true }, time.Minute)
	t.Logf("n4 back: %v", placed)
	checkFor(t, 30*time.Second, func() error {
		if held := len(n4.Shards()); held != 3 {
			return fmt.Errorf("n4 has %d replicas open, want 3 (its stale ones deleted)", held)
		}
		return nil
	})
	publish(t, ns.ClientURL(), "bank", keyOf, lines[2000:])

	want := withoutIDs(offline(t, lflSpec, lines))
	got := withoutIDs(outputsOnceThere(t, ns.ClientURL(), "cep.out.lfl", len(want), time.Minute))
	if d := differsFromOffline(got, want, string(lflSpec)); d != "" {
		t.Fatalf("output across a node's death and return: %s", d)
	}
	t.Logf("%d records, as offline", len(got))
	checkReplicasIdentical(t, nodes)
}

// checkReplicasIdentical waits until the replicas of each shard on the
// running nodes have applied the same log index and fails unless their
// states then encode to the same bytes: replicas added later, by a
// snapshot or by replaying the log, hold what the others hold.
func checkReplicasIdentical(t *testing.T, nodes []*cluster.Node) {
	t.Helper()
	checkFor(t, 30*time.Second, func() error {
		type replicaState struct {
			node  string
			index uint64
			state []byte
		}
		byShard := map[uint64][]replicaState{}
		for _, n := range nodes {
			if n == nil {
				continue
			}
			for _, sh := range n.Shards() {
				var rs replicaState
				rs.node = n.Config().NodeID
				var err error
				sh.FSM().View(func(s *shard.State, index uint64) {
					var buf bytes.Buffer
					err = s.WriteSnapshot(&buf, snapshot.Header{ID: "compare", Kind: snapshot.KindRaftSnapshot})
					rs.index, rs.state = index, buf.Bytes()
				})
				if err != nil {
					return err
				}
				byShard[sh.ID()] = append(byShard[sh.ID()], rs)
			}
		}
		for id, rs := range byShard {
			for _, r := range rs[1:] {
				if r.index != rs[0].index {
					return fmt.Errorf("shard %d: %s applied index %d, %s %d", id, rs[0].node, rs[0].index, r.node, r.index)
				}
				if !bytes.Equal(r.state, rs[0].state) {
					t.Fatalf("shard %d at index %d: %s's state differs from %s's", id, r.index, r.node, rs[0].node)
				}
			}
		}
		return nil
	})
}
