package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/internal/testutil"

	"connectrpc.com/connect"
)

// A shard of a three-node cluster splits in two while events flow: the new
// shard starts on the same nodes from the old one's state, both process
// their key groups from then on, and a node stopped and started again
// afterwards changes nothing. The records of a pattern keyed like the source and of one
// re-keyed by region (read through a derived source one shard forwards)
// equal the offline engine's.
func TestShardSplit(t *testing.T) {
	tc := newPeers(t, 3, 3*time.Minute)
	ctx := tc.ctx
	for i := range tc.cfgs {
		tc.cfgs[i].Shards = 2
		tc.cfgs[i].NoAutoSplit = true // this test splits by hand
	}
	tc.startAll()
	c := tc.client(0)
	tc.createBank(c)
	regional := []byte(strings.NewReplacer("name: lfl", "name: lfl-region", "key: e.account", "key: e.region").Replace(string(lflSpec)))
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(lflSpec)})
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(regional)})
	lines := bankEvents(13, 3000)
	keyOf := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	tc.publish("bank", keyOf, lines[:1000])

	// a client asks again while the metadata group elects a leader (the
	// answer says the change was not applied)
	split := func(r *cepv1.SplitShardRequest) (*connect.Response[cepv1.SplitShardResponse], error) {
		for {
			res, err := c.cluster.SplitShard(ctx, req(r))
			if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "not applied") || ctx.Err() != nil {
				return res, err
			}
			time.Sleep(poll)
		}
	}
	if _, err := split(&cepv1.SplitShardRequest{ShardId: 1, AtKeyGroup: 3}); err == nil || !strings.Contains(err.Error(), "invalid_argument") {
		t.Fatalf("a split point inside a block: %v", err)
	}
	done := make(chan *cepv1.SplitShardResponse, 1)
	go func() {
		res, err := split(&cepv1.SplitShardRequest{ShardId: 1})
		if err != nil {
			t.Errorf("split: %v", err)
			done <- nil
			return
		}
		done <- res.Msg
	}()
	tc.publishSlowly(keyOf, lines[1000:2000], time.Second)
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
	all, err := tc.client(2).cluster.ListShards(ctx, req(&cepv1.ListShardsRequest{ClusterWide: true}))
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
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		for _, cfg := range tc.cfgs {
			if _, err := os.Stat(filepath.Join(cfg.DataDir, "shards", fmt.Sprint(res.NewShardId), "split.snap")); err == nil {
				return fmt.Errorf("%s still has the split's state file", cfg.NodeID)
			}
		}
		return nil
	})

	// a node stops: every shard keeps a quorum
	tc.stop(0)
	tc.publish("bank", keyOf, lines[2000:2500])
	// and starts again: its replicas of both parts of the split shard
	// open from its disk (the old shard's recorded range is the one
	// before the split) and catch up
	n0 := tc.start(0)
	tc.waitPlaced([]int{0, 1, 2}, 3, 3, func(string) bool { return true }, time.Minute)
	if held := len(n0.Shards()); held != 3 {
		t.Fatalf("the restarted node holds %d replicas, want 3", held)
	}
	tc.publish("bank", keyOf, lines[2500:])
	for _, tt := range []struct {
		name string
		spec []byte
	}{{"lfl", lflSpec}, {"lfl-region", regional}} {
		want := withoutIDs(offline(t, tt.spec, lines))
		got := withoutIDs(tc.outputsOnceThere("cep.out."+tt.name, len(want), time.Minute))
		if d := differsFromOffline(got, want, string(tt.spec)); d != "" {
			t.Errorf("%s across the split: %s", tt.name, d)
		} else {
			t.Logf("%s: %d records, as offline", tt.name, len(got))
		}
	}
	tc.checkReplicasIdentical()
}
