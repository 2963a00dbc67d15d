package integration

import (
	"fmt"
	"math/rand/v2"
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

// A savepoint of a one-shard cluster restores into a fresh cluster with
// three shards; processing continues from the saved positions, and the
// output of both clusters together equals the offline engine's, with
// nothing lost or duplicated.
var restoreShards = 3

func TestSavepointRestoreIntoMoreShards(t *testing.T) {
	if s := os.Getenv("CEP_RESTORE_SHARDS"); s != "" {
		fmt.Sscan(s, &restoreShards)
	}
	tc := newCluster(t, 2*time.Minute)
	ctx, base := tc.ctx, tc.base

	spec := lflSpec
	lines := bankEvents(7, 3000)
	keyOf := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	half := 1500

	a := tc.addOne(cluster.Config{DataDir: filepath.Join(base, "a"), Shards: 1})
	ca := tc.client(a)
	if _, err := ca.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "bank", Key: "e.account"})); err != nil {
		t.Fatal(err)
	}
	// (a bound of its own, which the savepoint carries)
	tc.deploy(ca, &cepv1.DeployPatternRequest{Spec: string(spec), MaxPartialMatches: new(uint64(5000))})
	// random patterns of other shapes (random_test.go) over the events'
	// kind and v: their state goes through the savepoint too
	randomSpecs := randomSpecs(rand.New(rand.NewPCG(7, 7)), "rnd", 4, specShape{typeField: "kind", window: [2]int{100, 1000}, always: true, cadenceFree: true})
	for _, s := range randomSpecs {
		tc.deploy(ca, &cepv1.DeployPatternRequest{Spec: string(s)})
	}
	tc.publish("bank", keyOf, lines[:half])
	// wait until the first half is applied
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		res, err := ca.cluster.ListShards(ctx, req(&cepv1.ListShardsRequest{}))
		if err != nil {
			return err
		}
		if res.Msg.Shards[0].LastAppliedIndex < 3 {
			return fmt.Errorf("not applied yet")
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)
	target := "dir://" + filepath.Join(base, "savepoints")
	sp, err := ca.savepoints.CreateSavepoint(ctx, req(&cepv1.CreateSavepointRequest{Target: target}))
	if err != nil {
		t.Fatal(err)
	}
	// bank, and the sources re-keyed by region that random patterns read
	if sp.Msg.Savepoint.ShardCount != 1 || len(sp.Msg.Savepoint.SourcePositions) == 0 || sp.Msg.Savepoint.SourcePositions[0].Source != "bank" || sp.Msg.Savepoint.SourcePositions[0].Sequence == 0 {
		t.Fatalf("savepoint: %+v", sp.Msg.Savepoint)
	}
	tc.stop(a)

	b := tc.addOne(cluster.Config{DataDir: filepath.Join(base, "b"), Shards: restoreShards})
	cb := tc.client(b)
	res, err := cb.savepoints.RestoreSavepoint(ctx, req(&cepv1.RestoreSavepointRequest{Savepoint: &cepv1.RestoreSavepointRequest_Location{Location: sp.Msg.Savepoint.Location}}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Msg.ShardCount != uint32(restoreShards) || len(res.Msg.PendingShards) > 0 {
		t.Fatalf("restored into %d shards, %v not yet", res.Msg.ShardCount, res.Msg.PendingShards)
	}
	if got, err := cb.patterns.GetPattern(ctx, req(&cepv1.GetPatternRequest{Name: "lfl"})); err != nil || got.Msg.Pattern.Version != 1 || got.Msg.Pattern.MaxPartialMatches != 5000 {
		t.Fatalf("pattern after restore: %v %v", got, err)
	}
	tc.publish("bank", keyOf, lines[half:])

	want := withoutIDs(offline(t, spec, lines))
	if len(want) < 20 {
		t.Fatalf("the offline run produced only %d records", len(want))
	}
	got := withoutIDs(tc.waitOutputs("cep.out.lfl", len(want), 60*time.Second))
	if d := differsFromOffline(got, want, string(spec)); d != "" {
		t.Fatalf("output across the restore differs from the offline engine: %s", d)
	}
	producing := tc.compareEachWithOffline("rnd", randomSpecs, lines, "across the restore")
	if producing < len(randomSpecs)/2 {
		t.Fatalf("only %d of %d random patterns produce records; they would prove little", producing, len(randomSpecs))
	}

	// savepoints are deleted with their files, or only forgotten
	dir := filepath.Join(base, "more")
	var ids []string
	for range 2 {
		sp, err := cb.savepoints.CreateSavepoint(ctx, req(&cepv1.CreateSavepointRequest{Target: "dir://" + dir}))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sp.Msg.Savepoint.Id)
		time.Sleep(5 * time.Millisecond) // ids are milliseconds
	}
	del, err := cb.savepoints.DeleteSavepoint(ctx, req(&cepv1.DeleteSavepointRequest{Id: ids[0]}))
	if err != nil || len(del.Msg.DeletedFiles) != restoreShards {
		t.Fatalf("delete %s: %v, deleted %v", ids[0], err, del.Msg.GetDeletedFiles())
	}
	if _, err := cb.savepoints.DeleteSavepoint(ctx, req(&cepv1.DeleteSavepointRequest{Id: ids[1], KeepFiles: true})); err != nil {
		t.Fatal(err)
	}
	if _, err := cb.savepoints.DeleteSavepoint(ctx, req(&cepv1.DeleteSavepointRequest{Id: ids[0]})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("deleting it again: %v", err)
	}
	if l, err := cb.savepoints.ListSavepoints(ctx, req(&cepv1.ListSavepointsRequest{})); err != nil || len(l.Msg.Savepoints) != 0 {
		t.Fatalf("savepoints left: %v %v", l.Msg.GetSavepoints(), err)
	}
	files, _ := os.ReadDir(dir)
	for _, f := range files {
		if !strings.HasPrefix(f.Name(), ids[1]+"-shard-") {
			t.Errorf("file %s left in %s", f.Name(), dir)
		}
	}
	if len(files) != restoreShards {
		t.Fatalf("%d files in %s, want the %d of the savepoint only forgotten", len(files), dir, restoreShards)
	}
}
