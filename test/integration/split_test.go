package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
)

// A shard of a three-node cluster splits in two while events flow: the new
// shard starts on the same nodes from the old one's state, both process
// their key groups from then on, and a node stopped and started again
// afterwards changes nothing. The records of a pattern keyed like the source and of one
// re-keyed by region (read through a derived source one shard forwards)
// equal the offline engine's.
func TestShardSplit(t *testing.T) {
	ctx, ns, _, cfgs := inProcessPeers(t, 3, 3*time.Minute)
	for i := range cfgs {
		cfgs[i].Shards = 2
		cfgs[i].NoAutoSplit = true // this test splits by hand
	}
	nodes := startAll(t, ctx, cfgs)
	c := newClients(nodes[0].APIAddr())
	createBank(t, ctx, c)
	regional := []byte(strings.NewReplacer("name: lfl", "name: lfl-region", "key: e.account", "key: e.region").Replace(string(lflSpec)))
	deploy(t, ctx, c, &cepv1.DeployPatternRequest{Spec: string(lflSpec)})
	deploy(t, ctx, c, &cepv1.DeployPatternRequest{Spec: string(regional)})
	lines := bankEvents(13, 3000)
	keyOf := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	publish(t, ns.ClientURL(), "bank", keyOf, lines[:1000])

	if _, err := c.cluster.SplitShard(ctx, req(&cepv1.SplitShardRequest{ShardId: 1, AtKeyGroup: 3})); err == nil || !strings.Contains(err.Error(), "invalid_argument") {
		t.Fatalf("a split point inside a block: %v", err)
	}
	done := make(chan *cepv1.SplitShardResponse, 1)
	go func() {
		res, err := c.cluster.SplitShard(ctx, req(&cepv1.SplitShardRequest{ShardId: 1}))
		if err != nil {
			t.Errorf("split: %v", err)
			done <- nil
			return
		}
		done <- res.Msg
	}()
	publishSlowly(t, ns.ClientURL(), keyOf, lines[1000:2000], time.Second)
	res := <-done
	if res == nil {
		t.FailNow()
	}
	if res.Pending || res.NewShardId != 3 || res.KeyGroups.Last+1 != res.NewKeyGroups.First {
		t.Fatalf("split: %+v", res)
	}
	t.Logf("shard 1 keeps %d-%d, shard %d takes %d-%d", res.KeyGroups.First, res.KeyGroups.Last, res.NewShardId, res.NewKeyGroups.First, res.NewKeyGroups.Last)
	// every key group is in exactly one shard, each with a leader and
	// three replicas
	all, err := newClients(nodes[2].APIAddr()).cluster.ListShards(ctx, req(&cepv1.ListShardsRequest{ClusterWide: true}))
	if err != nil {
		t.Fatal(err)
	}
	var ranges []string
	next := uint32(0)
	for _, sh := range all.Msg.Shards {
		ranges = append(ranges, fmt.Sprintf("%d:%d-%d", sh.Id, sh.KeyGroups.First, sh.KeyGroups.Last))
		if sh.KeyGroups.First != next || sh.LeaderNodeId == "" || len(sh.Replicas) != 3 {
			t.Errorf("shard %d after the split: %v", sh.Id, sh)
		}
		next = sh.KeyGroups.Last + 1
	}
	if next != 256 || len(ranges) != 3 {
		t.Fatalf("shards after the split: %v", ranges)
	}
	sort.Strings(ranges)
	t.Logf("shards: %v", ranges)

	// the state a split stored for the new shard goes once its Raft
	// snapshots hold it
	checkFor(t, 30*time.Second, func() error {
		for _, cfg := range cfgs {
			if _, err := os.Stat(filepath.Join(cfg.DataDir, "shards", fmt.Sprint(res.NewShardId), "split.snap")); err == nil {
				return fmt.Errorf("%s still has the split's state file", cfg.NodeID)
			}
		}
		return nil
	})

	// a node stops: every shard keeps a quorum
	nodes[0].Close()
	nodes[0] = nil
	publish(t, ns.ClientURL(), "bank", keyOf, lines[2000:2500])
	// and starts again: its replicas of both parts of the split shard
	// open from its disk (the old shard's recorded range is the one
	// before the split) and catch up
	n0, err := cluster.Start(context.Background(), cfgs[0])
	if err != nil {
		t.Fatal(err)
	}
	nodes[0] = n0
	addrs := []string{nodes[0].APIAddr(), nodes[1].APIAddr(), nodes[2].APIAddr()}
	waitPlaced(t, ctx, addrs, 3, 3, func(string) bool { return true }, time.Minute)
	if held := len(n0.Shards()); held != 3 {
		t.Fatalf("the restarted node holds %d replicas, want 3", held)
	}
	publish(t, ns.ClientURL(), "bank", keyOf, lines[2500:])
	for _, tc := range []struct {
		name string
		spec []byte
	}{{"lfl", lflSpec}, {"lfl-region", regional}} {
		want := withoutIDs(offline(t, tc.spec, lines))
		got := withoutIDs(outputsOnceThere(t, ns.ClientURL(), "cep.out."+tc.name, len(want), time.Minute))
		if d := differsFromOffline(got, want, string(tc.spec)); d != "" {
			t.Errorf("%s across the split: %s", tc.name, d)
		} else {
			t.Logf("%s: %d records, as offline", tc.name, len(got))
		}
	}
	checkReplicasIdentical(t, nodes)
}
