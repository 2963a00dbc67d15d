package cluster

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/api/apitest"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// Every call one node makes of another presents the credential peerAt
// sets, Connect calls and plain HTTP ones alike.
func TestPeerClientCredential(t *testing.T) {
	const token = "s3cret"
	var mu sync.Mutex
	seen := map[string]string{} // path: Authorization
	backend := http.NewServeMux()
	backend.Handle("/", api.NewHandler(api.Backends{Cluster: &apitest.Cluster{
		ShardsFunc: func(context.Context, *cepv1.ListShardsRequest) (*cepv1.ListShardsResponse, error) {
			return &cepv1.ListShardsResponse{Shards: []*cepv1.Shard{{Id: 2, LastAppliedIndex: 7}}}, nil
		}}}, api.WithToken(token)))
	backend.HandleFunc(savepointPartPath, func(w http.ResponseWriter, r *http.Request) {
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

	n := &Node{cfg: Config{APIToken: token}, peerHTTP: srv.Client()}
	p := n.peerAt(addr)
	if applied, err := p.Applied(ctx, 2); err != nil || applied != 7 {
		t.Errorf("Applied = %d, %v", applied, err)
	}
	if _, err := p.Applied(ctx, 3); err == nil || err.Error() != "node at "+addr+" has no replica of shard 3" {
		t.Errorf("Applied of a shard it has no replica of: %v", err)
	}
	if b, err := p.SavepointPart(ctx, []byte(`{}`)); err != nil || string(b) != `{"bank":3}` {
		t.Errorf("SavepointPart = %s, %v", b, err)
	}
	if st := p.Probe(ctx); st != cepv1.NodeState_NODE_STATE_ALIVE {
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
	p = (&Node{peerHTTP: srv.Client()}).peerAt(addr)
	if _, err := p.Shards(ctx); err == nil {
		t.Error("Shards without the token answered")
	}
	if _, err := p.SavepointPart(ctx, []byte(`{}`)); err == nil || err.Error() != "unauthenticated" {
		t.Errorf("SavepointPart without the token: %v", err)
	}
}
