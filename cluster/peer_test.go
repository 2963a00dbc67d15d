package cluster

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster/peer"
	"github.com/cepcluster/cep/cluster/secret"
)

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
	auth := make(chan string, 1) // what peerAt's client presents
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth <- r.Header.Get("Authorization")
	}))
	defer srv.Close()
	n.peerHTTP = srv.Client()
	if _, err := n.peerAt(strings.TrimPrefix(srv.URL, "http://")).SavepointPart(context.Background(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if got := <-auth; got != "Bearer "+s.Token(secret.Node) {
		t.Errorf("peer Authorization %q", got)
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

// The status states a health probe's answer as the API's node state.
func TestNodeState(t *testing.T) {
	for st, want := range map[peer.State]cepv1.NodeState{
		peer.Alive:   cepv1.NodeState_NODE_STATE_ALIVE,
		peer.Suspect: cepv1.NodeState_NODE_STATE_SUSPECT,
		peer.Dead:    cepv1.NodeState_NODE_STATE_DEAD,
	} {
		if got := nodeState(st); got != want {
			t.Errorf("nodeState(%v) = %v, want %v", st, got, want)
		}
	}
}
