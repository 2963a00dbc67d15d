// Package integration runs real nodes (in process, real Raft on disk, real
// TCP on loopback, an embedded NATS JetStream server) and checks end-to-end
// behaviour against the offline engine.
package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/raft"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/multiset"
	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/shard"
)

func testRaft() *raft.Config {
	c := shard.DefaultRaftConfig()
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 200 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	return c
}

func logger(t testing.TB) *slog.Logger {
	if os.Getenv("CEP_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}

func checkFor(t testing.TB, total time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clients talk to a node's API over HTTP.
type clients struct {
	patterns   cepv1connect.PatternServiceClient
	sources    cepv1connect.SourceServiceClient
	cluster    cepv1connect.ClusterServiceClient
	matches    cepv1connect.MatchServiceClient
	savepoints cepv1connect.SavepointServiceClient
}

func newClients(addr string, opts ...connect.ClientOption) clients {
	return clientsAt(http.DefaultClient, "http://"+addr, opts...)
}

// clientsAt talks to the API at base URL through hc.
func clientsAt(hc *http.Client, base string, opts ...connect.ClientOption) clients {
	return clients{
		patterns:   cepv1connect.NewPatternServiceClient(hc, base, opts...),
		sources:    cepv1connect.NewSourceServiceClient(hc, base, opts...),
		cluster:    cepv1connect.NewClusterServiceClient(hc, base, opts...),
		matches:    cepv1connect.NewMatchServiceClient(hc, base, opts...),
		savepoints: cepv1connect.NewSavepointServiceClient(hc, base, opts...),
	}
}

// startSingle starts a one-node cluster with an embedded NATS server.
func startSingle(t *testing.T, dir string) *cluster.Node { return startNode(t, dir, "", 1) }

// startNode starts a one-node cluster with the given number of shards,
// using the NATS server at natsURL, or an embedded one for "".
func startNode(t *testing.T, dir, natsURL string, shards int) *cluster.Node {
	t.Helper()
	return startConfigured(t, cluster.Config{DataDir: dir, NATSURL: natsURL, Shards: shards})
}

// startConfigured starts a one-node cluster with cfg, its node id, data
// directory (default: a temporary one), addresses, embedded NATS port and
// Raft timeouts filled in, and its logger where cfg has none, and waits
// until it is ready. The caller closes it.
func startConfigured(t *testing.T, cfg cluster.Config) *cluster.Node {
	t.Helper()
	cfg.NodeID, cfg.RaftAddr, cfg.APIAddr, cfg.NATSPort, cfg.Raft = "n1", "127.0.0.1:0", "127.0.0.1:0", -1, testRaft()
	if cfg.Logger == nil {
		cfg.Logger = logger(t)
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	n, err := cluster.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		n.Close()
		t.Fatal(err)
	}
	return n
}

// deployOnBank creates the source "bank" on n and deploys spec on it.
func deployOnBank(t *testing.T, ctx context.Context, n *cluster.Node, spec []byte) clients {
	t.Helper()
	c := newClients(n.APIAddr())
	createBank(t, ctx, c)
	deploy(t, ctx, c, &cepv1.DeployPatternRequest{Spec: string(spec)})
	return c
}

// deploy deploys a pattern through c; the test fails unless every shard
// runs it when the call returns, so events published next are all its.
func deploy(t *testing.T, ctx context.Context, c clients, r *cepv1.DeployPatternRequest) {
	t.Helper()
	res, err := c.patterns.DeployPattern(ctx, req(r))
	if err != nil {
		t.Fatalf("deploy %s: %v\n%s", r.Name, err, r.Spec)
	}
	if p := res.Msg.PendingShards; len(p) > 0 {
		t.Fatalf("deploy %s returned with shards %v not running it", res.Msg.Pattern.GetName(), p)
	}
}

// jetStream connects to the NATS server at url until the test ends.
func jetStream(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// publish sends events to a source as a publisher would: subject
// "<source>.<key>", key from the event.
func publish(t *testing.T, natsURL, source string, keyOf func(map[string]any) string, lines []string) {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, source+"."+keyOf(ev), []byte(l)); err != nil {
			t.Fatal(err)
		}
	}
}

// publishRaw publishes payloads as they are to one subject.
func publishRaw(t *testing.T, natsURL, subject string, payloads ...string) {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for _, p := range payloads {
		if _, err := js.Publish(context.Background(), subject, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
}

// outputCount is the number of records on a subject of the output stream.
func outputCount(t *testing.T, natsURL, subject string) int {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, cluster.OutputStream)
	if err != nil {
		return 0
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return int(info.State.Subjects[subject])
}

// waitOutputs waits until a subject holds at least n records (and a
// moment longer, so that a duplicate would show), then reads them all.
func waitOutputs(t *testing.T, natsURL, subject string, n int, timeout time.Duration) []string {
	t.Helper()
	checkFor(t, timeout, func() error {
		if c := outputCount(t, natsURL, subject); c < n {
			return fmt.Errorf("%d records on %s so far, want %d", c, subject, n)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)
	return outputs(t, natsURL, subject)
}

// compareEachWithOffline checks that the records of each spec on NATS
// (subject cep.out.<prefix><i>) equal those the offline engine produces
// from lines, and returns how many specs produce any.
func compareEachWithOffline(t *testing.T, natsURL, prefix string, specs [][]byte, lines []string, context string) (producing int) {
	t.Helper()
	for i, spec := range specs {
		want := withoutIDs(offline(t, spec, lines))
		if len(want) > 0 {
			producing++
		}
		name := fmt.Sprintf("%s%d", prefix, i)
		got := withoutIDs(outputsOnceThere(t, natsURL, "cep.out."+name, len(want), 30*time.Second))
		t.Logf("%s: %d records on NATS, %d from the offline engine", name, len(got), len(want))
		if d := differsFromOffline(got, want, string(spec)); d != "" {
			t.Errorf("%s %s: %s", name, context, d)
		}
	}
	return producing
}

// outputsOnceThere reads the records on a subject once there are n of
// them or timeout has passed, and a moment later, so that records beyond
// the n expected show too; unlike waitOutputs it leaves judging the
// difference to the caller.
func outputsOnceThere(t *testing.T, natsURL, subject string, n int, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for outputCount(t, natsURL, subject) < n && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	return outputs(t, natsURL, subject)
}

// outputs reads every record on a subject of the output stream.
func outputs(t *testing.T, natsURL, subject string) []string {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, cluster.OutputStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	total := info.State.Subjects[subject]
	if total == 0 {
		return nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for uint64(len(out)) < total {
		b, err := cons.Fetch(int(total)-len(out), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			out = append(out, string(m.Data()))
		}
		if b.Error() != nil {
			t.Fatal(b.Error())
		}
	}
	return out
}

// waitApplied waits until each of the node's shard replicas (shards of
// them; the node at addr) has applied the deployments of the named
// patterns, which its metrics then list (after a deploy that returned
// naming shards that did not run it yet).
func waitApplied(t *testing.T, addr string, shards int, names ...string) {
	t.Helper()
	checkFor(t, 30*time.Second, func() error {
		res, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return err
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		for _, name := range names {
			re := regexp.MustCompile(`(?m)^cep_condition_errors_total\{[^}]*pattern="` + regexp.QuoteMeta(name) + `"[^}]*\} `)
			if n := len(re.FindAllIndex(b, -1)); n < shards {
				return fmt.Errorf("pattern %s applied by %d of %d shards", name, n, shards)
			}
		}
		return nil
	})
}

// offline runs the engine over the events as `cepctl run` does, without the
// final watermark, and returns the JSON of the records (no ids).
func offline(t *testing.T, spec []byte, lines []string) []string {
	t.Helper()
	p, err := nfa.CompileBytes(spec)
	if err != nil {
		t.Fatal(err)
	}
	return offlineRun(t, p, lines)
}

// offlineRun is offline for a compiled pattern or query.
func offlineRun(t *testing.T, p *nfa.Pattern, lines []string) []string {
	t.Helper()
	_, out := offlineRunner(t, p, lines)
	return out
}

// offlineRunner is offlineRun, also returning the runner (its matchers'
// statistics); configure, if given, sets up the matcher first (its bound,
// as a deployment's).
func offlineRunner(t *testing.T, p *nfa.Pattern, lines []string, configure ...func(*nfa.Matcher)) (*nfa.Runner, []string) {
	t.Helper()
	r := nfa.NewRunner(p)
	for _, f := range configure {
		f(r.Matchers()[0])
	}
	var out []string
	for _, l := range lines {
		recs, err := r.Line([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		for i := range recs {
			b, _ := recs[i].AppendJSON(nil)
			out = append(out, string(b))
		}
	}
	return r, out
}

// differsFromOffline reports, for a failure message, how records on NATS
// (got) differ from the offline engine's (want), ids aside and in any
// order, with the pattern or query: "" when they are the same.
func differsFromOffline(got, want []string, spec string) string {
	if strings.Join(got, "\n") == strings.Join(want, "\n") {
		return ""
	}
	onlyCluster, onlyOffline := multiset.Diff(got, want)
	return fmt.Sprintf("%d records on NATS, the offline engine %d\n%s\nonly on NATS (%d): %s\nonly offline (%d): %s",
		len(got), len(want), spec, len(onlyCluster), firstLines(onlyCluster, 5), len(onlyOffline), firstLines(onlyOffline, 5))
}

func firstLines(s []string, n int) string { return strings.Join(s[:min(n, len(s))], "\n     ") }

// publishAndCompare publishes the events of accounts to the source
// "bank" and waits until the pattern's subject holds what the offline
// engine produces from them, record for record (ids aside).
func publishAndCompare(t *testing.T, natsURL string, spec []byte, subject string, lines []string, timeout time.Duration) {
	t.Helper()
	publish(t, natsURL, "bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
	want := withoutIDs(offline(t, spec, lines))
	if len(want) == 0 {
		t.Fatal("the offline run produced nothing; the test would prove nothing")
	}
	got := withoutIDs(waitOutputs(t, natsURL, subject, len(want), timeout))
	if d := differsFromOffline(got, want, string(spec)); d != "" {
		t.Fatalf("cluster output differs from the offline engine: %s", d)
	}
}

// withoutIDs strips the "id" field the cluster adds, for comparison.
func withoutIDs(recs []string) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		if j := strings.Index(r, `,"id":"`); j >= 0 {
			k := strings.Index(r[j+7:], `"`)
			r = r[:j] + r[j+7+k+1:]
		}
		out[i] = r
	}
	sort.Strings(out)
	return out
}

func readLines(t *testing.T, path string) []string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			out = append(out, sc.Text())
		}
	}
	return out
}

func req[T any](m *T) *connect.Request[T] { return connect.NewRequest(m) }

var _ = fmt.Sprint

// lflSpec is login, failed logins, logout per account within 500 ms: the
// pattern the savepoint tests carry across a restore.
var lflSpec = []byte(`name: lfl
source: bank
key: e.account
time: e.ts
within: 500
stages:
  - name: login
    where: e.type == "LOGIN"
  - name: failed
    where: e.type == "FAIL"
    oneOrMore: true
  - name: logout
    where: e.type == "LOGOUT"
`)

// bankEvents draws n events of 40 accounts in time order, then 200 later
// filler events for as many accounts, so every shard's watermark passes the
// first n.
func bankEvents(seed uint64, n int) []string {
	rng := rand.New(rand.NewPCG(seed, seed))
	var lines []string
	ts := int64(1000)
	for i := 0; i < n; i++ {
		ts += int64(1 + rng.IntN(2))
		a := rng.IntN(40)
		lines = append(lines, fmt.Sprintf(`{"account":"acc-%d","region":"r%d","type":%q,"kind":%q,"v":%d,"ts":%d}`,
			a, a%4, []string{"LOGIN", "FAIL", "LOGOUT", "OK"}[rng.IntN(4)], string(rune('A'+rng.IntN(4))), rng.IntN(100), ts))
	}
	for i := 0; i < 200; i++ {
		lines = append(lines, fmt.Sprintf(`{"account":"filler-%d","region":"filler-%d","type":"NOISE","kind":"N","v":0,"ts":%d}`, i, i, ts+1_000_000))
	}
	return lines
}

// embeddedNATS starts a NATS server with JetStream storing under base/nats,
// shut down when the test ends.
func embeddedNATS(t *testing.T, base string) *server.Server {
	t.Helper()
	ns, err := cluster.StartEmbeddedNATS(filepath.Join(base, "nats"), "127.0.0.1", -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	return ns
}

// peerConfigs returns the configurations of n nodes in this process that
// list each other as peers (n1, n2, ...), with data under base and the NATS
// server at natsURL.
func peerConfigs(t *testing.T, base, natsURL string, n int) []cluster.Config {
	ports := freePorts(t, 3*n)
	var peers []cluster.Peer
	for i := 0; i < n; i++ {
		peers = append(peers, cluster.Peer{ID: fmt.Sprintf("n%d", i+1), RaftAddr: ports[3*i], APIAddr: ports[3*i+1], GossipAddr: ports[3*i+2]})
	}
	out := make([]cluster.Config, n)
	for i, p := range peers {
		out[i] = cluster.Config{
			NodeID: p.ID, DataDir: filepath.Join(base, p.ID), RaftAddr: p.RaftAddr, APIAddr: p.APIAddr, GossipAddr: p.GossipAddr,
			NATSURL: natsURL, Peers: peers, Raft: testRaft(), Logger: logger(t), FastGossip: true,
		}
	}
	return out
}

// startAll starts a node per configuration at once (peers wait for each
// other), waits until every one is ready and closes them when the test
// ends: those still in the returned slice then (a test may close one and
// put its restarted successor, or nil, in its place).
func startAll(t *testing.T, ctx context.Context, cfgs []cluster.Config) []*cluster.Node {
	t.Helper()
	nodes := make([]*cluster.Node, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i := range cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodes[i], errs[i] = cluster.Start(context.Background(), cfgs[i])
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, n := range nodes {
			if n != nil {
				n.Close()
			}
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start %s: %v", cfgs[i].NodeID, err)
		}
	}
	for _, n := range nodes {
		if err := n.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// createBank creates the source "bank" keyed by e.account through c,
// retrying while the API waits for the metadata group to elect a leader.
func createBank(t *testing.T, ctx context.Context, c clients) {
	t.Helper()
	checkFor(t, 30*time.Second, func() error {
		_, err := c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "bank", Key: "e.account"}))
		if err != nil && strings.Contains(err.Error(), "already") {
			return nil
		}
		return err
	})
}

// inProcessPeers prepares a test of n nodes in this process (skipped with
// -short): an embedded NATS server, the nodes' configurations (peerConfigs),
// the test's data directory and a context that ends after timeout.
func inProcessPeers(t *testing.T, n int, timeout time.Duration) (context.Context, *server.Server, string, []cluster.Config) {
	t.Helper()
	if testing.Short() {
		t.Skipf("starts %d nodes", n)
	}
	base := t.TempDir()
	ns := embeddedNATS(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx, ns, base, peerConfigs(t, base, ns.ClientURL(), n)
}
