package cluster

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/api/apitest"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// A non-voter of the metadata group counts as caught up only when its API
// says it hears from this node as the leader and has committed the log
// to within metaCatchUpLag of this node's commit index; a member that
// answers health checks only, or that is unknown, never does.
func TestMetaCaughtUp(t *testing.T) {
	const token = "s3cret"
	answer := func(commit uint64, leader string) string {
		backend := http.NewServeMux()
		backend.Handle("/", api.NewHandler(api.Backends{Cluster: &apitest.Cluster{
			StatusFunc: func(context.Context, *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error) {
				return &cepv1.GetStatusResponse{Summary: &cepv1.ClusterSummary{MetaCommitIndex: commit, MetaLeaderId: leader}}, nil
			}}}, api.WithToken(token)))
		srv := httptest.NewServer(backend)
		t.Cleanup(srv.Close)
		return strings.TrimPrefix(srv.URL, "http://")
	}
	healthOnly := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(healthOnly.Close)
	failing := httptest.NewServer(api.NewHandler(api.Backends{Cluster: &apitest.Cluster{
		StatusFunc: func(context.Context, *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error) {
			return nil, errors.New("broken")
		}}}, api.WithToken(token)))
	t.Cleanup(failing.Close)

	peers := []Peer{
		{ID: "level", APIAddr: answer(1000, "a")},
		{ID: "close", APIAddr: answer(1000-metaCatchUpLag, "a")},
		{ID: "behind", APIAddr: answer(1000-metaCatchUpLag-1, "a")},
		{ID: "ahead", APIAddr: answer(1005, "a")},
		{ID: "other-leader", APIAddr: answer(1000, "b")},
		{ID: "no-leader", APIAddr: answer(1000, "")},
		{ID: "health-only", APIAddr: strings.TrimPrefix(healthOnly.URL, "http://")},
		{ID: "failing", APIAddr: strings.TrimPrefix(failing.URL, "http://")},
		{ID: "no-api"},
	}
	n := &Node{cfg: Config{NodeID: "a", APIToken: token, Peers: peers}, peerHTTP: http.DefaultClient, log: slog.New(slog.DiscardHandler)}
	var ids []string
	for _, p := range append(peers, Peer{ID: "unknown"}) {
		ids = append(ids, p.ID)
	}
	caughtUp := (&membership{n: n}).metaCaughtUp(context.Background(), 1000, ids[1:])
	want := map[string]bool{"close": true, "ahead": true} // level is not asked: no non-voter
	for _, p := range append(peers, Peer{ID: "unknown"}) {
		if got := caughtUp(p.ID); got != want[p.ID] {
			t.Errorf("%s: caught up %v, want %v", p.ID, got, want[p.ID])
		}
	}
}
