package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/internal/testutil"
)

// logInto is a debug logger writing into b.
func logInto(b *lockedBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// accessTokens has one token of each user role.
func accessTokens(t *testing.T) *api.Tokens {
	t.Helper()
	tk, err := api.ParseTokens("tokens", strings.NewReader(`# the test's users
admin admin-0123456789abcdef
operator operator-0123456789abcdef
reader reader-0123456789abcdef
`))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func as(role string) connect.ClientOption {
	return api.WithClientToken(role + "-0123456789abcdef")
}

func wantCode(t *testing.T, what string, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Errorf("%s: %v, want %s", what, err, code)
	}
}

// authorised reports a call that got past the roles (it may fail for
// another reason).
func authorised(t *testing.T, what string, err error) {
	t.Helper()
	if c := connect.CodeOf(err); err != nil && (c == connect.CodePermissionDenied || c == connect.CodeUnauthenticated) {
		t.Errorf("%s: %v, want it let through", what, err)
	}
}

// Attacks on a node with roles that must fail: a reader changing
// patterns, sources or savepoints, an operator changing the cluster's
// shape, a call without a token or with a wrong one, a user token (even
// the admin's) or none writing a savepoint part, the node credential
// reading the output, /metrics without a token, profiles without an
// admin's. What each role may do goes through.
func TestSecurityAccessRoles(t *testing.T) {
	s := secret.Generate()
	tc := newSingle(t, 90*time.Second, cluster.Config{Tokens: accessTokens(t), Secret: s, MetricsAuth: true, Pprof: true, Shards: 1})
	ctx := tc.ctx
	admin, operator, reader := tc.client(0, as("admin")), tc.client(0, as("operator")), tc.client(0, as("reader"))

	// no token, a wrong one
	_, err := tc.client(0).patterns.ListPatterns(ctx, req(&cepv1.ListPatternsRequest{}))
	wantCode(t, "list without a token", err, connect.CodeUnauthenticated)
	_, err = tc.client(0, api.WithClientToken("reader-0123456789abcdeF")).patterns.ListPatterns(ctx, req(&cepv1.ListPatternsRequest{}))
	wantCode(t, "list with a wrong token", err, connect.CodeUnauthenticated)
	_, err = tc.client(0, api.WithClientToken(s.String())).patterns.ListPatterns(ctx, req(&cepv1.ListPatternsRequest{}))
	wantCode(t, "list with the cluster secret itself", err, connect.CodeUnauthenticated)

	// a reader changes nothing
	spec, err := os.ReadFile("../../examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = reader.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "bank", Key: "e.account"}))
	wantCode(t, "reader creates a source", err, connect.CodePermissionDenied)
	_, err = reader.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: string(spec)}))
	wantCode(t, "reader deploys", err, connect.CodePermissionDenied)

	// an operator deploys
	tc.createBank(operator)
	tc.deploy(operator, &cepv1.DeployPatternRequest{Spec: string(spec)})

	_, err = reader.patterns.DeletePattern(ctx, req(&cepv1.DeletePatternRequest{Name: "login-fail-logout"}))
	wantCode(t, "reader deletes", err, connect.CodePermissionDenied)
	_, err = reader.patterns.UpdatePattern(ctx, req(&cepv1.UpdatePatternRequest{Spec: string(spec)}))
	wantCode(t, "reader updates", err, connect.CodePermissionDenied)
	_, err = reader.savepoints.CreateSavepoint(ctx, req(&cepv1.CreateSavepointRequest{Target: "dir://by-a-reader"}))
	wantCode(t, "reader takes a savepoint", err, connect.CodePermissionDenied)
	_, err = reader.sources.DeleteSource(ctx, req(&cepv1.DeleteSourceRequest{Name: "bank"}))
	wantCode(t, "reader deletes a source", err, connect.CodePermissionDenied)

	// but reads: the list, the status, and the output
	list, err := reader.patterns.ListPatterns(ctx, req(&cepv1.ListPatternsRequest{}))
	if err != nil || len(list.Msg.Patterns) != 1 || list.Msg.Patterns[0].Name != "login-fail-logout" {
		t.Errorf("reader lists: %v %v", list, err)
	}
	if _, err := reader.cluster.GetStatus(ctx, req(&cepv1.GetStatusRequest{})); err != nil {
		t.Errorf("reader's status: %v", err)
	}
	lines := append(readLines(t, "../../examples/events.jsonl"),
		`{"account":"acc-9","type":"LOGIN","ts":400000}`, `{"account":"acc-9","type":"PAYMENT_OK","ts":410000}`)
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
	tc.waitOutputs("cep.out.login-fail-logout", 1, 20*time.Second)
	tailCtx, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	tail, err := reader.matches.Tail(tailCtx, req(&cepv1.TailRequest{Pattern: "login-fail-logout", Start: cepv1.TailStart_TAIL_START_ALL}))
	if err != nil {
		t.Fatal(err)
	}
	if !tail.Receive() || tail.Msg().Pattern != "login-fail-logout" {
		t.Errorf("reader tails: %v", tail.Err())
	}
	stop()

	// the node credential is for what members ask each other, not the output
	node := tc.client(0, api.WithClientToken(s.Token(secret.Node)))
	tail, err = node.matches.Tail(ctx, req(&cepv1.TailRequest{Pattern: "login-fail-logout", Start: cepv1.TailStart_TAIL_START_ALL}))
	if err == nil {
		tail.Receive()
		err = tail.Err()
	}
	wantCode(t, "node credential tails", err, connect.CodePermissionDenied)
	if _, err := node.cluster.ListShards(ctx, req(&cepv1.ListShardsRequest{})); err != nil {
		t.Errorf("node credential lists shards: %v", err)
	}

	// an operator does not change the cluster's shape; an admin does
	_, err = operator.cluster.SplitShard(ctx, req(&cepv1.SplitShardRequest{ShardId: 1}))
	wantCode(t, "operator splits a shard", err, connect.CodePermissionDenied)
	_, err = operator.cluster.RemoveNode(ctx, req(&cepv1.RemoveNodeRequest{NodeId: "n1"}))
	wantCode(t, "operator removes a node", err, connect.CodePermissionDenied)
	_, err = admin.cluster.RemoveNode(ctx, req(&cepv1.RemoveNodeRequest{NodeId: "nope"}))
	authorised(t, "admin removes a node", err)
	_, err = operator.patterns.DeletePattern(ctx, req(&cepv1.DeletePatternRequest{Name: "login-fail-logout"}))
	authorised(t, "operator deletes", err)

	// the savepoint part endpoint is the members' alone: a user's token,
	// even the admin's, cannot have the node write its state anywhere
	base := "http://" + tc.nodes[0].APIAddr()
	do := func(method, path, token, body string) int {
		r, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	part := `{"shard":1,"target":"dir://parts","file":"x-shard-1","shards":1}`
	if code := do(http.MethodPost, "/internal/v1/savepoint-part", "admin-0123456789abcdef", part); code != http.StatusForbidden {
		t.Errorf("savepoint part with the admin's token: HTTP %d, want 403", code)
	}
	if code := do(http.MethodPost, "/internal/v1/savepoint-part", "", part); code != http.StatusUnauthorized {
		t.Errorf("savepoint part without a token: HTTP %d, want 401", code)
	}
	if code := do(http.MethodPost, "/internal/v1/savepoint-part", s.Token(secret.Node), part); code != http.StatusOK {
		t.Errorf("savepoint part with the node credential: HTTP %d, want 200", code)
	}

	// /metrics behind a reader's token
	if code := do(http.MethodGet, "/metrics", "", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: HTTP %d, want 401", code)
	}
	if code := do(http.MethodGet, "/metrics", "reader-0123456789abcdef", ""); code != http.StatusOK {
		t.Errorf("/metrics with a reader's token: HTTP %d", code)
	}
	// profiles are the admin's
	if code := do(http.MethodGet, "/debug/pprof/", "operator-0123456789abcdef", ""); code != http.StatusForbidden {
		t.Errorf("profiles with an operator's token: HTTP %d, want 403", code)
	}
	if code := do(http.MethodGet, "/debug/pprof/", s.Token(secret.Node), ""); code != http.StatusForbidden {
		t.Errorf("profiles with the node credential: HTTP %d, want 403", code)
	}
	if code := do(http.MethodGet, "/debug/pprof/", "admin-0123456789abcdef", ""); code != http.StatusOK {
		t.Errorf("profiles with the admin's token: HTTP %d", code)
	}
	if code := do(http.MethodGet, "/healthz", "", ""); code != http.StatusOK {
		t.Errorf("/healthz without a token: HTTP %d", code)
	}
}

// seenAuth records the Authorization header of each request a node's API
// gets from the other nodes.
type seenAuth struct {
	mu   sync.Mutex
	list []string // "path auth"
}

func (s *seenAuth) add(path, auth string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, path+" "+auth)
}

func (s *seenAuth) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.list...)
}

// An attack that must fail: whoever controls (or listens to) one member
// of a cluster learns the users' token from the calls the other members
// make to it, and a user's token is in the nodes' logs; a reader has a
// change forwarded to the metadata leader under the node credential. Three nodes, each
// reached by the others through a proxy in front of its API that records
// the Authorization headers; a deploy and a delete forwarded to the
// metadata leader, a savepoint whose parts the replicas write: the peers
// present the node credential on every call and never the user's token,
// and no log line of any node holds either.
func TestSecurityAccessPeersGetTheNodeCredential(t *testing.T) {
	const userToken = "user-admin-token-0123456789"
	s := secret.Generate()
	nodeAuth := "Bearer " + s.Token(secret.Node)
	tc := newPeers(t, 3, 2*time.Minute)
	logs := &lockedBuffer{}
	real := freePorts(t, 3)
	seen := make([]*seenAuth, 3)
	for i := range tc.cfgs {
		// the others reach node i at its Peers address, where the proxy
		// listens; the node itself serves on real[i]
		proxyAddr := tc.cfgs[i].Peers[i].APIAddr
		tc.cfgs[i].APIAddr = real[i]
		tc.cfgs[i].APIToken, tc.cfgs[i].Secret, tc.cfgs[i].Logger = userToken, s, logInto(logs)
		tc.cfgs[i].Tokens = accessTokens(t) // a reader among them
		// one replica a shard: the metadata leader asks the others for
		// their shards and has them write their savepoint parts
		tc.cfgs[i].Replicas = 1
		ln, err := net.Listen("tcp", proxyAddr)
		if err != nil {
			t.Fatal(err)
		}
		seen[i] = &seenAuth{}
		target, _ := url.Parse("http://" + real[i])
		proxy := httputil.NewSingleHostReverseProxy(target)
		rec := seen[i]
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec.add(r.URL.Path, r.Header.Get("Authorization"))
			proxy.ServeHTTP(w, r)
		}), ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	tc.startAll()

	// the calls go to a node that does not lead the metadata group, which
	// forwards them
	var follower int
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		for i, n := range tc.nodes {
			if !n.IsMetaLeader() && n.MetaLeader() != "" {
				follower = i
				return nil
			}
		}
		return errors.New("no metadata leader yet")
	})
	c := tc.client(follower, api.WithClientToken(userToken))
	spec, err := os.ReadFile("../../examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tc.createBank(c)
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(spec)})
	if _, err := c.savepoints.CreateSavepoint(tc.ctx, req(&cepv1.CreateSavepointRequest{Target: "dir://forwarded"})); err != nil {
		t.Fatal(err)
	}
	// a reader's change is refused where it arrives, not forwarded with
	// the node credential
	_, err = tc.client(follower, as("reader")).patterns.DeletePattern(tc.ctx, req(&cepv1.DeletePatternRequest{Name: "login-fail-logout"}))
	wantCode(t, "reader deletes through a follower", err, connect.CodePermissionDenied)
	for i := range seen {
		for _, e := range seen[i].all() {
			if strings.HasPrefix(e, "/cep.v1.PatternService/DeletePattern ") {
				t.Errorf("node %s got a reader's delete forwarded", tc.cfgs[i].NodeID)
			}
		}
	}
	if _, err := c.patterns.DeletePattern(tc.ctx, req(&cepv1.DeletePatternRequest{Name: "login-fail-logout"})); err != nil {
		t.Fatal(err)
	}

	paths := map[string]int{}
	for i := range seen {
		for _, e := range seen[i].all() {
			path, auth, _ := strings.Cut(e, " ")
			paths[path]++
			if strings.Contains(auth, userToken) {
				t.Errorf("node %s got the user's token from a peer on %s", tc.cfgs[i].NodeID, path)
			} else if auth != nodeAuth && path != "/healthz" {
				t.Errorf("node %s got %q from a peer on %s, want the node credential", tc.cfgs[i].NodeID, auth, path)
			}
		}
	}
	// the peers did make the calls this checks
	for _, p := range []string{"/cep.v1.PatternService/DeployPattern", "/cep.v1.PatternService/DeletePattern",
		"/cep.v1.SavepointService/CreateSavepoint", "/cep.v1.ClusterService/ListShards", "/internal/v1/savepoint-part"} {
		if paths[p] == 0 {
			t.Errorf("no peer called %s (calls: %v)", p, paths)
		}
	}
	for _, secretText := range []string{userToken, s.Token(secret.Node), s.String()} {
		if strings.Contains(logs.String(), secretText) {
			t.Errorf("a log line holds a secret (%.6s…)", secretText)
		}
	}
	if !strings.Contains(logs.String(), "level=") {
		t.Error("no log line captured")
	}
}

// An attack that must fail (slowloris): a client sends its request
// headers a byte at a time, holding a connection and a goroutine of the
// node for as long as it likes. The node closes the connection once the
// headers took ReadHeaderTimeout.
func TestSecurityAccessSlowHeadersAreCutOff(t *testing.T) {
	tc := newSingle(t, time.Minute, cluster.Config{})
	conn, err := net.Dial("tcp", tc.nodes[0].APIAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	const limit = api.ReadHeaderTimeout + 10*time.Second
	sent := make(chan int, 1)
	go func() {
		// 200 ms a byte: the headers would take longer than limit
		n := 0
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		msg := "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("a", int(limit/(200*time.Millisecond))) + "\r\n\r\n"
		for ; n < len(msg); n++ {
			if _, err := conn.Write([]byte{msg[n]}); err != nil {
				break
			}
			<-tick.C
		}
		sent <- n
	}()
	conn.SetReadDeadline(time.Now().Add(limit))
	_, err = bufio.NewReader(conn).ReadByte()
	took := time.Since(start)
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("the node still read the headers after %v", took)
	case err == nil:
		t.Fatalf("the node answered headers that never ended")
	case took < api.ReadHeaderTimeout-time.Second:
		t.Fatalf("the connection ended after %v (%v), before ReadHeaderTimeout", took, err)
	}
	conn.Close()
	if n := <-sent; n == 0 {
		t.Fatal("nothing sent")
	}
}
