package peer

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/api/apitest"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// Every call one node makes of another presents the credential the
// client was made with, Connect calls and plain HTTP ones alike.
func TestClientCredential(t *testing.T) {
	const token = "s3cret"
	var mu sync.Mutex
	seen := map[string]string{} // path: Authorization
	backend := http.NewServeMux()
	backend.Handle("/", api.NewHandler(api.Backends{Cluster: &apitest.Cluster{
		ShardsFunc: func(context.Context, *cepv1.ListShardsRequest) (*cepv1.ListShardsResponse, error) {
			return &cepv1.ListShardsResponse{Shards: []*cepv1.Shard{{Id: 2, LastAppliedIndex: 7}}}, nil
		}}}, api.WithToken(token)))
	backend.HandleFunc(SavepointPartPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"bank":3}`))
	})
	backend.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Header.Get("Authorization")
		mu.Unlock()
		backend.ServeHTTP(w, r)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()

	p := New(srv.Client(), addr, srv.URL, token)
	if applied, err := p.Applied(ctx, 2); err != nil || applied != 7 {
		t.Errorf("Applied = %d, %v", applied, err)
	}
	if _, err := p.Applied(ctx, 3); err == nil || err.Error() != "node at "+addr+" has no replica of shard 3" {
		t.Errorf("Applied of a shard it has no replica of: %v", err)
	}
	if b, err := p.SavepointPart(ctx, []byte(`{}`)); err != nil || string(b) != `{"bank":3}` {
		t.Errorf("SavepointPart = %s, %v", b, err)
	}
	if st := p.Probe(ctx); st != Alive {
		t.Errorf("Probe = %v", st)
	}
	if len(seen) != 3 {
		t.Errorf("calls seen: %v", seen)
	}
	for path, auth := range seen {
		if path != "/healthz" && auth != "Bearer "+token {
			t.Errorf("%s: Authorization %q", path, auth)
		}
	}

	// without the token, the node answers what it says to anyone
	p = New(srv.Client(), addr, srv.URL, "")
	if _, err := p.Shards(ctx); err == nil {
		t.Error("Shards without the token answered")
	}
	if _, err := p.SavepointPart(ctx, []byte(`{}`)); err == nil || err.Error() != "unauthenticated" {
		t.Errorf("SavepointPart without the token: %v", err)
	}
}

// Probe says Alive only of a node whose /healthz answers 200, Suspect of
// one that answers otherwise, and Dead of one that does not answer (the
// zero State).
func TestProbe(t *testing.T) {
	status := http.StatusOK
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		w.WriteHeader(status)
	}))
	addr := strings.TrimPrefix(srv.URL, "http://")
	p := New(srv.Client(), addr, srv.URL, "")
	ctx := context.Background()
	for _, tc := range []struct {
		status int
		want   State
	}{
		{http.StatusOK, Alive},
		{http.StatusServiceUnavailable, Suspect},
		{http.StatusInternalServerError, Suspect},
		{http.StatusUnauthorized, Suspect},
	} {
		mu.Lock()
		status = tc.status
		mu.Unlock()
		if got := p.Probe(ctx); got != tc.want {
			t.Errorf("/healthz answering %d: Probe = %v, want %v", tc.status, got, tc.want)
		}
	}
	srv.Close()
	if got := p.Probe(ctx); got != Dead {
		t.Errorf("a node that does not answer: Probe = %v, want dead", got)
	}
	if got := New(http.DefaultClient, "bad", "http://[bad", "").Probe(ctx); got != Dead {
		t.Errorf("a malformed address: Probe = %v, want dead", got)
	}
	var zero State
	if zero != Dead || zero.String() != "dead" || Alive.String() != "alive" || Suspect.String() != "suspect" {
		t.Errorf("states: zero %v, %v, %v", zero, Alive, Suspect)
	}
}

// Rollouts and Reports read a node's ListShards answer as the decisions
// take it.
func TestRolloutsAndReports(t *testing.T) {
	srv := httptest.NewServer(api.NewHandler(api.Backends{Cluster: &apitest.Cluster{
		ShardsFunc: func(context.Context, *cepv1.ListShardsRequest) (*cepv1.ListShardsResponse, error) {
			return &cepv1.ListShardsResponse{Shards: []*cepv1.Shard{
				{Id: 1, LeaderNodeId: "a", RestoreId: "sp1", Running: []*cepv1.PatternVersion{{Name: "p", Version: 3}, {Name: "q", Version: 1}},
					Replicas: []*cepv1.Replica{{NodeId: "a", Suffrage: cepv1.Suffrage_SUFFRAGE_VOTER}, {NodeId: "b"}}},
				{Id: 4, Quarantined: "damaged", NatsUnreachableMs: 1500, LastAppliedIndex: 9},
			}}, nil
		}}}))
	defer srv.Close()
	p := New(srv.Client(), strings.TrimPrefix(srv.URL, "http://"), srv.URL, "")
	ctx := context.Background()

	ro, err := p.Rollouts(ctx)
	if err != nil || len(ro) != 2 {
		t.Fatalf("Rollouts = %+v, %v", ro, err)
	}
	if r := ro[0]; r.Shard != 1 || r.RestoreID != "sp1" || len(r.Running) != 2 || r.Running[0] != (PatternVersion{"p", 3}) || r.Running[1] != (PatternVersion{"q", 1}) {
		t.Errorf("rollout of shard 1: %+v", r)
	}
	if r := ro[1]; r.Shard != 4 || r.RestoreID != "" || len(r.Running) != 0 {
		t.Errorf("rollout of shard 4: %+v", r)
	}

	reports, err := p.Reports(ctx)
	if err != nil || len(reports) != 2 {
		t.Fatalf("Reports = %+v, %v", reports, err)
	}
	if r := reports[0]; r.Group != 1 || r.Leader != "a" || r.Quarantined || len(r.Servers) != 2 || !r.Servers[0].Voter || r.Servers[0].ID != "a" || r.Servers[1].Voter || r.Servers[1].ID != "b" {
		t.Errorf("report of shard 1: %+v", r)
	}
	if r := reports[1]; r.Group != 4 || !r.Quarantined || len(r.Servers) != 0 {
		t.Errorf("report of shard 4: %+v", r)
	}

	rep, err := p.Replica(ctx, 4)
	if err != nil || rep.Applied != 9 || rep.NATSUnreachable != 1500*time.Millisecond || rep.Plan().NATSReachable {
		t.Errorf("Replica(4) = %+v, %v", rep, err)
	}
	if rep, err := p.Replica(ctx, 1); err != nil || !rep.Plan().NATSReachable {
		t.Errorf("Replica(1) = %+v, %v", rep, err)
	}
}
