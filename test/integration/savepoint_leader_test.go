package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/raft"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/shard"
)

// A savepoint is what the shard's leader applied when it was asked, not
// what a follower had applied: a follower learns that entries committed
// only with the leader's next message to it (at the latest a commit
// timeout later), so its state can lack the last events the leader
// applied and published records from. Restored where those events are
// not read again (a fresh cluster, from-start), they would be lost.
// Here followers learn of commits up to seconds late (a long commit
// timeout), the savepoint's coordinator (the metadata leader) holds only
// a follower's replica of the shard, and the savepoint is taken as soon
// as the shard's leader has applied every event: its position must be
// the last event's.
func TestSavepointIsTheLeadersState(t *testing.T) {
	tc := newPeers(t, 3, 2*time.Minute)
	for i := range tc.cfgs {
		rc := testRaft()
		rc.CommitTimeout = 3 * time.Second
		tc.cfgs[i].Raft, tc.cfgs[i].HandOverAfter = rc, time.Hour
	}
	tc.startAll()
	ctx := tc.ctx
	meta := -1
	for i, n := range tc.nodes {
		if n.IsMetaLeader() {
			meta = i
		}
	}
	if meta < 0 {
		t.Fatal("no metadata leader")
	}
	c := tc.client(meta)
	tc.createBank(c)
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(lflSpec)})
	savepoint := func() *cepv1.Savepoint {
		t.Helper()
		for {
			res, err := c.savepoints.CreateSavepoint(ctx, req(&cepv1.CreateSavepointRequest{Target: "dir://" + tc.base + "/sp"}))
			if connect.CodeOf(err) == connect.CodeUnavailable || connect.CodeOf(err) == connect.CodeFailedPrecondition && strings.Contains(err.Error(), "splitting") {
				time.Sleep(poll)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			return res.Msg.Savepoint
		}
	}
	savepoint() // once the shards are laid out for three nodes

	// every shard led by another node than the metadata leader
	var leaders []*shard.Shard
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		leaders = nil
		for i, n := range tc.nodes {
			for _, sh := range n.Shards() {
				if !sh.IsLeader() {
					continue
				}
				if i != meta {
					leaders = append(leaders, sh)
					continue
				}
				to := tc.cfgs[(i+1)%len(tc.cfgs)]
				if err := sh.Raft().LeadershipTransferToServer(raft.ServerID(to.NodeID), raft.ServerAddress(to.RaftAddr)).Error(); err != nil {
					return err
				}
			}
		}
		if shards := len(tc.nodes[meta].Meta().Shards); len(leaders) != shards {
			return fmt.Errorf("%d of %d shards led by another node than the metadata leader", len(leaders), shards)
		}
		return nil
	})

	lines := bankEvents(21, 400)
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
	// what the leaders applied (the least of their positions, as the
	// savepoint gives), once it stops moving
	applied := func() (least uint64) {
		for i, sh := range leaders {
			sh.FSM().View(func(st *shard.State, _ uint64) {
				if p := st.Positions()["bank"]; i == 0 || p < least {
					least = p
				}
			})
		}
		return least
	}
	// every leader has applied all of its key groups' events (no lag),
	// and that is still so after reading the positions: a pause of the
	// leaders on a loaded machine is not taken for the end
	leaderIndex := func(sh *shard.Shard) int {
		for i, n := range tc.nodes {
			for _, s := range n.Shards() {
				if s == sh {
					return i
				}
			}
		}
		return -1
	}
	caughtUp := func() error {
		for _, sh := range leaders {
			lag, ok := tc.metricValue(leaderIndex(sh), "cep_ingest_lag_messages", fmt.Sprintf(`shard="%d"`, sh.ID()), `source="bank"`)
			if !ok || lag != 0 {
				return fmt.Errorf("shard %d: ingest lag %v (listed %v)", sh.ID(), lag, ok)
			}
		}
		return nil
	}
	var want uint64
	testutil.EventuallyEvery(t, 30*time.Second, 10*time.Millisecond, func() error {
		if err := caughtUp(); err != nil {
			return err
		}
		want = applied()
		if err := caughtUp(); err != nil {
			return err
		}
		if applied() != want || want == 0 {
			return fmt.Errorf("the shard leaders applied bank to %d (%d events published)", want, len(lines))
		}
		return nil
	})
	sp := savepoint()
	if p := sp.SourcePositions; len(p) != 1 || p[0].Sequence != want {
		t.Fatalf("savepoint positions %v, want bank at %d (what the shards' leaders had applied)", p, want)
	}
}
