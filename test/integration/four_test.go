package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
)

// On four nodes no node holds a replica of every shard (each shard has
// three). A savepoint still covers every shard — the nodes holding the
// others write their parts — and restores into a single node, where
// processing continues: the records of both clusters together equal the
// offline engine's.
func TestSavepointOfFourNodes(t *testing.T) {
	tc := newPeers(t, 4, 2*time.Minute)
	ctx, base := tc.ctx, tc.base
	tc.startAll()
	if held := len(tc.nodes[0].Shards()); held == 4 {
		t.Fatalf("node n1 holds every shard (%d); the test needs one that does not", held)
	}

	spec := lflSpec
	lines := bankEvents(4, 2000)
	keyOf := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	half := 1000

	c := tc.client(0)
	tc.createBank(c)
	// the node that handles the deploy holds three of the four shards and
	// asks another node about the fourth; so does n1 for GetPattern
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(spec)})
	if got, err := c.patterns.GetPattern(ctx, req(&cepv1.GetPatternRequest{Name: "lfl"})); err != nil || len(got.Msg.PendingShards) > 0 {
		t.Fatalf("GetPattern through n1: %v, %v", got, err)
	}
	tc.publish("bank", keyOf, lines[:half])
	// every shard has applied its part of the first half
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		applied := map[uint32]bool{}
		for i := range tc.nodes {
			res, err := tc.client(i).cluster.ListShards(ctx, req(&cepv1.ListShardsRequest{}))
			if err != nil {
				return err
			}
			for _, sh := range res.Msg.Shards {
				if sh.LastAppliedIndex >= 3 {
					applied[sh.Id] = true
				}
			}
		}
		if len(applied) != 4 {
			return fmt.Errorf("%d of 4 shards applied events", len(applied))
		}
		return nil
	})
	time.Sleep(time.Second)
	dir := filepath.Join(base, "savepoints")
	var sp *connect.Response[cepv1.CreateSavepointResponse]
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		var err error
		if sp, err = c.savepoints.CreateSavepoint(ctx, req(&cepv1.CreateSavepointRequest{Target: "dir://" + dir})); connect.CodeOf(err) == connect.CodeUnavailable {
			return err // a shard's leadership moving (to its preferred replica): a client asks again
		} else if err != nil {
			t.Fatalf("savepoint of four nodes: %v", err)
		}
		return nil
	})
	if sp.Msg.Savepoint.ShardCount != 4 {
		t.Fatalf("savepoint: %+v", sp.Msg.Savepoint)
	}
	files, _ := os.ReadDir(dir)
	if len(files) != 4 {
		t.Fatalf("savepoint files: %v", files)
	}
	// restored into the same four nodes (nothing happened since), the call
	// through n1 returns once every shard has restored, the one n1 holds
	// no replica of included
	if res, err := c.savepoints.RestoreSavepoint(ctx, req(&cepv1.RestoreSavepointRequest{Savepoint: &cepv1.RestoreSavepointRequest_Location{Location: sp.Msg.Savepoint.Location}})); err != nil || len(res.Msg.PendingShards) > 0 {
		t.Fatalf("restore into the four nodes: %v, shards %v not restored", err, res.Msg.GetPendingShards())
	}
	for i := range tc.nodes {
		tc.stop(i)
	}

	b := tc.addOne(cluster.Config{DataDir: filepath.Join(base, "b"), Shards: 1})
	cb := tc.client(b)
	if res, err := cb.savepoints.RestoreSavepoint(ctx, req(&cepv1.RestoreSavepointRequest{Savepoint: &cepv1.RestoreSavepointRequest_Location{Location: sp.Msg.Savepoint.Location}})); err != nil || len(res.Msg.PendingShards) > 0 {
		t.Fatalf("restore: %v, shards %v not restored", err, res.Msg.GetPendingShards())
	}
	tc.publish("bank", keyOf, lines[half:])
	want := withoutIDs(offline(t, spec, lines))
	if len(want) < 20 {
		t.Fatalf("the offline run produced only %d records", len(want))
	}
	got := withoutIDs(tc.waitOutputs("cep.out.lfl", len(want), 60*time.Second))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("output across the restore (%d records) differs from the offline engine (%d)", len(got), len(want))
	}
}
