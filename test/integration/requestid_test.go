package integration

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/internal/testutil"
)

// A deploy retried with its request id after the metadata leader that
// applied it stopped — through another node, as a client does whose
// answer was lost — is answered with the first deploy's pattern, and the
// pattern has one version; a savepoint and a delete retried alike apply
// once too. The same deploy with another id is refused as a second
// create, so the retries did not pass for lack of a check.
func TestRequestIDAppliesOnce(t *testing.T) {
	tc := newPeers(t, 3, 3*time.Minute)
	tc.startAll()
	tc.createBank(tc.client(0))
	leader := func() int {
		t.Helper()
		l := -1
		testutil.EventuallyEvery(t, 20*time.Second, poll, func() error {
			for i, n := range tc.nodes {
				if n != nil && n.IsMetaLeader() {
					l = i
					return nil
				}
			}
			return errors.New("no metadata leader")
		})
		return l
	}
	deploy := &cepv1.DeployPatternRequest{Spec: string(lflSpec), RequestId: "deploy-lfl-1"}
	first, err := tc.client(leader()).patterns.DeployPattern(tc.ctx, req(deploy))
	if err != nil {
		t.Fatal(err)
	}
	stopped := leader()
	tc.stop(stopped)
	other := (stopped + 1) % 3
	// the retry, through a node still up, as soon as a new leader answers
	var again *connect.Response[cepv1.DeployPatternResponse]
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		again, err = tc.client(other).patterns.DeployPattern(tc.ctx, req(deploy))
		if connect.CodeOf(err) == connect.CodeUnavailable {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if g, w := again.Msg.Pattern, first.Msg.Pattern; g.Version != w.Version || g.CreatedIndex != w.CreatedIndex || g.Version != 1 {
		t.Fatalf("the retry answered version %d (index %d), the deploy version %d (index %d)", g.Version, g.CreatedIndex, w.Version, w.CreatedIndex)
	}
	got, err := tc.client(other).patterns.GetPattern(tc.ctx, req(&cepv1.GetPatternRequest{Name: "lfl"}))
	if err != nil || got.Msg.Pattern.Version != 1 {
		t.Fatalf("the pattern after the retry: %v %v, want version 1", err, got)
	}
	deploy.RequestId = "deploy-lfl-2"
	if _, err := tc.client(other).patterns.DeployPattern(tc.ctx, req(deploy)); connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Fatalf("the deploy with a new id: %v, want AlreadyExists", err)
	}

	c := tc.client(other)
	sp := &cepv1.CreateSavepointRequest{Target: "dir://" + tc.base + "/sp", RequestId: "sp-1"}
	var ids []string
	for range 2 {
		res, err := c.savepoints.CreateSavepoint(tc.ctx, req(sp))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Msg.Savepoint.Id)
	}
	list, err := c.savepoints.ListSavepoints(tc.ctx, req(&cepv1.ListSavepointsRequest{}))
	if err != nil || len(list.Msg.Savepoints) != 1 || ids[0] != ids[1] {
		t.Fatalf("savepoints %v after two creates with one id answering %v (%v)", list.Msg.GetSavepoints(), ids, err)
	}
	del := &cepv1.DeletePatternRequest{Name: "lfl", RequestId: "delete-lfl"}
	var versions []uint64
	for range 2 {
		res, err := c.patterns.DeletePattern(tc.ctx, req(del))
		if err != nil {
			t.Fatalf("delete %d: %v", len(versions)+1, err)
		}
		versions = append(versions, res.Msg.Pattern.Version)
	}
	if fmt.Sprint(versions) != "[2 2]" {
		t.Fatalf("two deletes with one id answered versions %v, want [2 2]", versions)
	}
}
