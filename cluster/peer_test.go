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
	"github.com/cepcluster/cep/cluster/secret"
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

// With a cluster secret a node presents the node credential to its peers,
// never the users' token, and takes it as role node; the savepoint part
// endpoint takes nothing else.
func TestPeerClientNodeCredential(t *testing.T) {
	s := secret.Generate()
	cfg := Config{APIToken: "user-token", Secret: s}
	n := &Node{cfg: cfg}
	if got := n.cfg.nodeCredential(); got != s.Token(secret.Node) || strings.Contains(got, "user-token") {
		t.Fatalf("node credential %q", got)
	}
	p := n.peerAt("127.0.0.1:1")
	if p.auth != "Bearer "+s.Token(secret.Node) {
		t.Errorf("peer Authorization %q", p.auth)
	}
	tk := n.cfg.apiTokens()
	if tk.Role(s.Token(secret.Node)) != api.RoleNode || tk.Role("user-token") != api.RoleAdmin || tk.Users() != 1 {
		t.Errorf("roles: node %s, user %s, users %d", tk.Role(s.Token(secret.Node)), tk.Role("user-token"), tk.Users())
	}
	if a := n.partAccess(); a.Allows(api.RoleAdmin) || !a.Allows(api.RoleNode) {
		t.Errorf("savepoint part access %+v", a)
	}
	// without a secret: the admin token, as before
	insecure := &Node{cfg: Config{APIToken: "user-token"}}
	if insecure.cfg.nodeCredential() != "user-token" || !insecure.partAccess().Allows(api.RoleAdmin) {
		t.Errorf("insecure: credential %q", insecure.cfg.nodeCredential())
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7070": true, "[::1]:7070": true, "127.3.2.1:1": true,
		"0.0.0.0:7070": false, "[::]:7070": false, "10.0.0.1:7070": false, "nohost": false,
	} {
		if got := isLoopback(stringAddr(addr)); got != want {
			t.Errorf("isLoopback(%s) = %v", addr, got)
		}
	}
}
