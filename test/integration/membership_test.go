package integration

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
)

// A single-node cluster of one shard grows: two nodes join it through the
// gossip, every shard is replicated onto them (added as non-voters, caught
// up, promoted) and the shard splits until there is one per node; then the
// first node is removed and its replicas move to a fourth node that
// joins. Events published before, while and after the
// replicas move produce, on NATS, exactly the offline engine's records.
func TestNodesJoinAndAreRemoved(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 nodes")
	}
	tc := newCluster(t, 3*time.Minute)
	ctx := tc.ctx
	// nodes that join through the gossip, as configured by hand
	start := func(id string, join []string) *cluster.Node {
		return tc.nodes[tc.add(cluster.Config{NodeID: id, DataDir: filepath.Join(tc.base, id), RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0",
			NATSURL: tc.natsURL(), Shards: 1, Join: join, Testing: &cluster.Testing{FastGossip: true}, Raft: testRaft(), Logger: testutil.EnvLogger(),
			GossipKey: []byte("0123456789abcdef")})]
	}
	n1 := start("n1", nil)
	if err := n1.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	c1 := tc.client(0)
	tc.createBank(c1)
	tc.deploy(c1, &cepv1.DeployPatternRequest{Spec: string(lflSpec)})
	lines := bankEvents(11, 3000)
	keyOf := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	tc.publish("bank", keyOf, lines[:1000])

	// the replicas move while events flow
	n2 := start("n2", []string{n1.GossipAddr()})
	start("n3", []string{n1.GossipAddr()})
	tc.publishSlowly(keyOf, lines[1000:1500], 2*time.Second)
	placed := tc.waitPlaced([]int{0, 1, 2}, 3, 3, func(string) bool { return true }, time.Minute)
	t.Logf("after two joins: %v", placed)
	st, err := tc.client(2).cluster.GetStatus(ctx, req(&cepv1.GetStatusRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Msg.Summary; s.Nodes != 3 || s.Alive != 3 {
		t.Fatalf("status through a joined node: %+v", s)
	}
	tc.publish("bank", keyOf, lines[1500:2000])

	// n1, the first node, leaves once n4 has joined (through n2) to take
	// its place: before, the two others could not hold three replicas
	c2 := tc.client(1)
	if _, err := c2.cluster.RemoveNode(ctx, req(&cepv1.RemoveNodeRequest{NodeId: "n9"})); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Fatalf("removing an unknown node: %v", err)
	}
	if _, err := c2.cluster.RemoveNode(ctx, req(&cepv1.RemoveNodeRequest{NodeId: "n1"})); err == nil || !strings.Contains(err.Error(), "add a node first") {
		t.Fatalf("removing one of three nodes with three replicas: %v", err)
	}
	start("n4", []string{n2.GossipAddr()})
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		res, err := c2.cluster.RemoveNode(ctx, req(&cepv1.RemoveNodeRequest{NodeId: "n1"}))
		if err == nil && !res.Msg.Node.Removing {
			return fmt.Errorf("n1 not removing: %v", res.Msg.Node)
		}
		return err
	})
	tc.publishSlowly(keyOf, lines[2000:2500], 2*time.Second)
	placed = tc.waitPlaced([]int{1, 2, 3}, 3, 3, func(id string) bool { return id != "n1" }, time.Minute)
	t.Logf("after n1's removal: %v", placed)
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		st, err := tc.client(1).cluster.GetStatus(ctx, req(&cepv1.GetStatusRequest{}))
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
	// the node closes its replicas once it sees itself out of their
	// shards, which may come after the members list drops it
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		if held := len(n1.Shards()); held != 0 {
			return fmt.Errorf("the removed node still has %d replicas open", held)
		}
		return nil
	})
	// and, its process still running, it says it was removed: not ready
	// (a Kubernetes probe, a load balancer) and one line in its log — at
	// the latest once no metadata leader has been heard for 10 s (the
	// group may drop it before sending it the change)
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		if err := n1.Ready(); err == nil || !strings.Contains(err.Error(), "removed from the cluster") {
			return fmt.Errorf("the removed node's readiness: %v", err)
		}
		return nil
	})
	for i, n := range tc.nodes[1:] {
		if err := n.Ready(); err != nil && strings.Contains(err.Error(), "removed") {
			t.Errorf("n%d, a member, takes itself for removed: %v", i+2, err)
		}
	}
	tc.publish("bank", keyOf, lines[2500:])
	// any node lists every shard, as its leader reports it — once the
	// leaderships have settled: the shards n1 led were handed over as it
	// left, and a leader not on its shard's preferred replica hands the
	// shard on after HandOverAfter, so a shard may be between two leaders
	// (no leader listed) for a moment at any time
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		all, err := tc.client(3).cluster.ListShards(ctx, req(&cepv1.ListShardsRequest{ClusterWide: true}))
		if err != nil || len(all.Msg.Shards) != 3 {
			return fmt.Errorf("cluster-wide shards through n4: %v %v", all, err)
		}
		for _, sh := range all.Msg.Shards {
			if sh.LeaderNodeId == "" || sh.LeaderNodeId == "n1" || len(sh.Replicas) != 3 || sh.KeyGroups == nil {
				return fmt.Errorf("shard %d as listed cluster-wide: %v", sh.Id, sh)
			}
		}
		return nil
	})

	want := withoutIDs(offline(t, lflSpec, lines))
	got := withoutIDs(tc.outputsOnceThere("cep.out.lfl", len(want), time.Minute))
	if d := differsFromOffline(got, want, string(lflSpec)); d != "" {
		t.Fatalf("output across joins and a removal: %s", d)
	}
	t.Logf("%d records, as offline", len(got))
	// n4's replicas came by snapshot or by the log from its start (the
	// shards split meanwhile): they hold what the others hold
	tc.checkReplicasIdentical(1, 2, 3)
}

// Of four nodes (each shard on three), one stops for good: after
// DeadAfter its replicas move to the other three, so that when a second
// node stops every shard still has a quorum and the events published
// after both failures are processed. Without the move, two shards would
// have lost two of their three replicas.
func TestDeadNodesReplicasMove(t *testing.T) {
	tc, _, lines, keyOf := fourNodesDeadAfter2s(t, 12, 2000)
	ctx := tc.ctx

	both := 0
	for _, info := range tc.nodes[0].Meta().Shards {
		if slices.Contains(info.Replicas, "n3") && slices.Contains(info.Replicas, "n4") {
			both++
		}
	}
	if both == 0 {
		t.Fatal("no shard has replicas on both n3 and n4: the test would prove nothing")
	}
	tc.stop(3)
	on := []int{0, 1, 2}
	placed := tc.waitPlaced(on, 4, 3, func(id string) bool { return id != "n4" }, time.Minute)
	t.Logf("n4 stopped; %d shards had replicas on n3 and n4; now %v", both, placed)
	// the metrics say so: n4 dead, each shard's leader with the voters its
	// map entry wants (asked again while leadership moves)
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		if v := tc.metric(0, "cep_cluster_members", `state="dead"`); v != 1 {
			return fmt.Errorf("cep_cluster_members{state=\"dead\"} = %v, want 1", v)
		}
		led := 0
		for i, n := range tc.nodes[:3] {
			for _, sh := range n.Shards() {
				id := fmt.Sprintf(`shard="%d"`, sh.ID())
				if v, ok := tc.metricValue(i, "cep_shard_voters", id); ok {
					led++
					if w, _ := tc.metricValue(i, "cep_shard_replicas_wanted", id); v != 3 || w != 3 {
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
	// the metadata group too has left n4 behind: with n4 and n3 among its
	// three voters, stopping n3 would leave it without a quorum (under
	// load the swap can come after the shards' moves)
	testutil.EventuallyEvery(t, time.Minute, poll, func() error {
		voters, _, err := tc.nodes[0].MetaServers()
		if err != nil || slices.Contains(voters, "n4") {
			return fmt.Errorf("metadata voters %v (%v)", voters, err)
		}
		return nil
	})
	tc.stop(2)
	tc.publish("bank", keyOf, lines[1000:])

	want := withoutIDs(offline(t, lflSpec, lines))
	got := withoutIDs(tc.outputsOnceThere("cep.out.lfl", len(want), time.Minute))
	if d := differsFromOffline(got, want, string(lflSpec)); d != "" {
		t.Fatalf("output after two nodes stopped: %s", d)
	}
	t.Logf("%d records, as offline", len(got))

	// the stopped nodes are removed: n4 at once (it holds nothing now);
	// n3 only allowing the shards two replicas, the two nodes left
	c2 := tc.client(1)
	if _, err := c2.cluster.RemoveNode(ctx, req(&cepv1.RemoveNodeRequest{NodeId: "n4"})); err != nil {
		t.Fatalf("removing n4: %v", err)
	}
	tc.waitMembers(c2, "n1,n2,n3")
	if _, err := c2.cluster.RemoveNode(ctx, req(&cepv1.RemoveNodeRequest{NodeId: "n3"})); err == nil || !strings.Contains(err.Error(), "add a node first") {
		t.Fatalf("removing n3 of three nodes with three replicas: %v", err)
	}
	if _, err := c2.cluster.RemoveNode(ctx, req(&cepv1.RemoveNodeRequest{NodeId: "n3", AllowFewerReplicas: true})); err != nil {
		t.Fatalf("removing n3, allowing fewer replicas: %v", err)
	}
	tc.waitMembers(c2, "n1,n2")
	placed = tc.waitPlaced(on[:2], 4, 2, func(id string) bool { return id == "n1" || id == "n2" }, 30*time.Second)
	t.Logf("on the two nodes left: %v", placed)
	tc.checkReplicasIdentical()
}

// fourNodesDeadAfter2s starts four nodes that move an unreachable node's
// replicas after 2 s, deploys lflSpec through the first and publishes the
// first 1,000 of n bank events drawn with seed.
func fourNodesDeadAfter2s(t *testing.T, seed uint64, n int) (*testCluster, clients, []string, func(map[string]any) string) {
	t.Helper()
	tc := newPeers(t, 4, 3*time.Minute)
	for i := range tc.cfgs {
		tc.cfgs[i].DeadAfter = 2 * time.Second
	}
	tc.startAll()
	c := tc.client(0)
	tc.createBank(c)
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(lflSpec)})
	lines := bankEvents(seed, n)
	keyOf := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	tc.publish("bank", keyOf, lines[:1000])
	return tc, c, lines, keyOf
}

// A node declared dead comes back with its data: its old replicas, which
// the shards replaced meanwhile, are deleted, placement gives it replicas
// again, and the records stay exactly the offline engine's.
func TestDeadNodeComesBack(t *testing.T) {
	tc, c, lines, keyOf := fourNodesDeadAfter2s(t, 14, 3000)
	ctx := tc.ctx

	tc.stop(3)
	tc.waitPlaced([]int{0, 1, 2}, 4, 3, func(id string) bool { return id != "n4" }, time.Minute)
	tc.publish("bank", keyOf, lines[1000:2000])

	n4 := tc.start(3)
	// balanced again: twelve replicas over four nodes, three each
	testutil.EventuallyEvery(t, time.Minute, poll, func() error {
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
	placed := tc.waitPlaced([]int{0, 1, 2, 3}, 4, 3, func(string) bool { return true }, time.Minute)
	t.Logf("n4 back: %v", placed)
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		if held := len(n4.Shards()); held != 3 {
			return fmt.Errorf("n4 has %d replicas open, want 3 (its stale ones deleted)", held)
		}
		return nil
	})
	tc.publish("bank", keyOf, lines[2000:])

	want := withoutIDs(offline(t, lflSpec, lines))
	got := withoutIDs(tc.outputsOnceThere("cep.out.lfl", len(want), time.Minute))
	if d := differsFromOffline(got, want, string(lflSpec)); d != "" {
		t.Fatalf("output across a node's death and return: %s", d)
	}
	t.Logf("%d records, as offline", len(got))
	tc.checkReplicasIdentical()
}
