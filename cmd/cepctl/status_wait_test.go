package main

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// status --wait asks until the cluster has a metadata leader, shards and
// a leader for each, then prints; when the time runs out it fails saying
// what is missing. Without --wait it prints at once, whatever it gets.
func TestStatusWait(t *testing.T) {
	defer func(d time.Duration) { statusWaitPoll = d }(statusWaitPoll)
	statusWaitPoll = 10 * time.Millisecond
	var asked atomic.Int32
	// the summaries a starting cluster goes through, the last repeated
	steps := []*cepv1.ClusterSummary{
		{Nodes: 3},
		{Nodes: 3, MetaLeaderId: "n1"},
		{Nodes: 3, MetaLeaderId: "n1", Shards: 3, ShardsWithoutLeader: 2},
		{Nodes: 3, MetaLeaderId: "n1", Shards: 3},
	}
	serve := func(last int) string {
		asked.Store(0)
		return startAPI(t, api.Backends{Cluster: &fakeCluster{
			StatusFunc: func(context.Context, *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error) {
				i := min(int(asked.Add(1))-1, last)
				return &cepv1.GetStatusResponse{Summary: steps[i]}, nil
			},
			ShardsFunc: func(context.Context, *cepv1.ListShardsRequest) (*cepv1.ListShardsResponse, error) {
				return &cepv1.ListShardsResponse{}, nil
			},
		}})
	}
	url := serve(3)
	out := cepctl(t, url, "status", "--wait", "10s").mustOK(t).stdout
	if n := asked.Load(); n != 5 || !strings.Contains(out, "meta leader n1") {
		t.Fatalf("status --wait: %d calls (want 4 waiting and 1 to print), output %q", n, out)
	}
	url = serve(3)
	if out := cepctl(t, url, "status").mustOK(t).stdout; asked.Load() != 1 || !strings.Contains(out, "NO META LEADER") {
		t.Fatalf("status without --wait: %d calls, %q", asked.Load(), out)
	}
	url = serve(2)
	r := cepctl(t, url, "status", "--wait", "2s")
	if r.code == 0 || !strings.Contains(r.stderr, "after waiting 2s: 2 shards have no leader yet") {
		t.Fatalf("status --wait on shards that stay unled: exit %d, %q", r.code, r.stderr)
	}
	// the wait runs out while a call is under way (a loaded machine, a
	// slow link): the answer before still says what is missing. (A
	// counter of its own: a call the last command gave up on may reach
	// serve(2)'s handler late, and counted in asked it made this server's
	// first answer block too — seen in a parallel run.)
	var slowAsked atomic.Int32
	slow := startAPI(t, api.Backends{Cluster: &fakeCluster{
		StatusFunc: func(ctx context.Context, _ *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error) {
			if slowAsked.Add(1) > 1 {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return &cepv1.GetStatusResponse{Summary: steps[2]}, nil
		},
	}})
	r = cepctl(t, slow, "status", "--wait", "2s")
	if r.code == 0 || !strings.Contains(r.stderr, "after waiting 2s: 2 shards have no leader yet") {
		t.Fatalf("status --wait running out during a call: exit %d, %q", r.code, r.stderr)
	}
	r = cepctl(t, deadURL(t), "status", "--wait", "2s")
	if r.code == 0 || !strings.Contains(r.stderr, "after waiting 2s: cannot reach the server") {
		t.Fatalf("status --wait on a dead server: exit %d, %q", r.code, r.stderr)
	}
}
