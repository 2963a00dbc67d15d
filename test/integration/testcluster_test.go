package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/cluster/transport"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/snapshot"
)

// poll is how often the tests here check a condition (most checks ask a
// node over HTTP): every 20 ms, as they always have.
const poll = 20 * time.Millisecond

// testCluster is one test's nodes and the NATS server they use, as
// nats-server's tests have a cluster type: constructors for the shapes the
// tests use (newSingle, newCluster, newPeers), methods for what they do to
// it. Node i starts from cfgs[i]; nodes[i] is nil while it is stopped. The
// nodes still running when the test ends are closed, in order.
type testCluster struct {
	t     *testing.T
	ctx   context.Context // for the test's calls; ends after the constructor's timeout
	base  string          // the test's data directory (newCluster, newPeers)
	nats  *server.Server  // the server every node uses; nil: cfgs[0].NATSURL's, or node 0's own
	cfgs  []cluster.Config
	nodes []*cluster.Node
	procs []*proc // nodes run as cepnode processes (killLeaders), which the test starts and kills

	hc     *http.Client // how clients reach a node's API: plain HTTP until useHTTPS
	scheme string
	// natsAuth is who the test's own connections to NATS are (connect):
	// nobody for an open server.
	natsAuth []nats.Option

	// secret is the cluster secret every node is started with (unless its
	// Config is Insecure or names another): tests run with members
	// authenticating each other, as a cluster does by default
	secret secret.Secret

	// natsAt is the URL of a NATS server the test runs as a process (the
	// fault suite's), used before any other
	natsAt string
}

// withSecret is cfg with the test cluster's secret, unless it has one or
// is Insecure.
func (tc *testCluster) withSecret(cfg cluster.Config) cluster.Config {
	if tc.secret.IsZero() {
		tc.secret = secret.Generate()
	}
	if cfg.Secret.IsZero() && !cfg.Insecure {
		cfg.Secret = tc.secret
	}
	return cfg
}

// newCluster starts a NATS server for the nodes the test adds: the
// cluster's own embedded one (cluster.StartEmbeddedNATS, so its options
// are those a node runs with), storing under base/nats; ctx ends after
// timeout.
func newCluster(t *testing.T, timeout time.Duration) *testCluster {
	t.Helper()
	base := t.TempDir()
	ns, err := cluster.StartEmbeddedNATS(filepath.Join(base, "nats"), "127.0.0.1", -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	tc := &testCluster{t: t, base: base, nats: ns, hc: http.DefaultClient, scheme: "http"}
	tc.ctx = tc.context(timeout)
	t.Cleanup(tc.closeAll) // registered last, so the nodes close before the server
	return tc
}

// newPeers is newCluster with the configurations of n nodes in this
// process that list each other as peers (peerConfigs), not started: the
// test may change them, then calls startAll. Skipped with -short.
func newPeers(t *testing.T, n int, timeout time.Duration) *testCluster {
	t.Helper()
	if testing.Short() {
		t.Skipf("starts %d nodes", n)
	}
	tc := newCluster(t, timeout)
	tc.cfgs = peerConfigs(t, tc.base, tc.nats.ClientURL(), n)
	for i := range tc.cfgs {
		tc.cfgs[i].SavepointDir = tc.base // the tests' dir:// savepoints are under it
	}
	tc.nodes = make([]*cluster.Node, n)
	return tc
}

// newSingle starts a one-node cluster from cfg as oneNode fills it in (so
// with the node's own embedded NATS server unless cfg names one) and waits
// until it is ready; ctx, made then, ends after timeout.
func newSingle(t *testing.T, timeout time.Duration, cfg cluster.Config) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, hc: http.DefaultClient, scheme: "http"}
	t.Cleanup(tc.closeAll)
	tc.addOne(cfg)
	tc.ctx = tc.context(timeout)
	return tc
}

// nodeWithSource is newSingle with shards shards and the source tx keyed
// by e.account.
func nodeWithSource(t *testing.T, shards int, timeout time.Duration) (*testCluster, clients) {
	t.Helper()
	tc := newSingle(t, timeout, cluster.Config{Shards: shards})
	c := tc.client(0)
	if _, err := c.sources.CreateSource(tc.ctx, req(&cepv1.CreateSourceRequest{Name: "tx", Key: "e.account"})); err != nil {
		t.Fatal(err)
	}
	return tc, c
}

func (tc *testCluster) context(timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	tc.t.Cleanup(cancel)
	return ctx
}

func (tc *testCluster) closeAll() {
	for _, n := range tc.nodes {
		if n != nil {
			n.Close()
		}
	}
}

// natsURL is the URL of the NATS server the nodes use.
func (tc *testCluster) natsURL() string {
	switch {
	case tc.natsAt != "":
		return tc.natsAt
	case tc.nats != nil:
		return tc.nats.ClientURL()
	case tc.cfgs[0].NATSURL != "":
		return tc.cfgs[0].NATSURL
	default:
		return tc.nodes[0].NATSURL() // its own embedded server
	}
}

// oneNode fills in cfg as a one-node cluster's: node id n1, loopback
// addresses on free ports, an embedded NATS server on a free port (when
// it runs one), the test's Raft timeouts, the cluster's NATS server, a
// data directory (a temporary one) and a logger where cfg has none.
func (tc *testCluster) oneNode(cfg cluster.Config) cluster.Config {
	cfg.NodeID, cfg.RaftAddr, cfg.APIAddr, cfg.NATSPort, cfg.Raft = "n1", "127.0.0.1:0", "127.0.0.1:0", -1, testRaft()
	if cfg.NATSURL == "" && tc.nats != nil {
		cfg.NATSURL = tc.nats.ClientURL()
	}
	if cfg.Logger == nil {
		cfg.Logger = testutil.EnvLogger()
	}
	if cfg.DataDir == "" {
		cfg.DataDir = tc.t.TempDir()
	}
	if cfg.SavepointDir == "" && tc.base != "" {
		cfg.SavepointDir = tc.base // the tests' dir:// savepoints are under it
	}
	return cfg
}

// addOne adds a one-node cluster's node (oneNode), starts it and waits
// until it is ready; it returns its index.
func (tc *testCluster) addOne(cfg cluster.Config) int {
	tc.t.Helper()
	tc.cfgs = append(tc.cfgs, tc.oneNode(cfg))
	tc.nodes = append(tc.nodes, nil)
	tc.startReady(len(tc.cfgs) - 1)
	return len(tc.cfgs) - 1
}

// add adds a node of configuration cfg as it is and starts it, not
// waiting for it; it returns its index.
func (tc *testCluster) add(cfg cluster.Config) int {
	tc.t.Helper()
	tc.cfgs = append(tc.cfgs, cfg)
	tc.nodes = append(tc.nodes, nil)
	tc.start(len(tc.cfgs) - 1)
	return len(tc.cfgs) - 1
}

// start starts node i from cfgs[i], not waiting until it is ready (a peer
// restarted catches up while the test goes on).
func (tc *testCluster) start(i int) *cluster.Node {
	tc.t.Helper()
	tc.cfgs[i] = tc.withSecret(tc.cfgs[i])
	n, err := cluster.Start(context.Background(), tc.cfgs[i])
	if err != nil {
		tc.t.Fatalf("start %s: %v", tc.cfgs[i].NodeID, err)
	}
	tc.nodes[i] = n
	return n
}

// startReady starts node i and waits up to 20 s until it is ready.
func (tc *testCluster) startReady(i int) *cluster.Node {
	tc.t.Helper()
	tc.cfgs[i] = tc.withSecret(tc.cfgs[i])
	n, err := cluster.Start(context.Background(), tc.cfgs[i])
	if err != nil {
		tc.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		n.Close()
		tc.t.Fatal(err)
	}
	tc.nodes[i] = n
	return n
}

// startAll starts every node at once (peers wait for each other) and
// waits until each is ready.
func (tc *testCluster) startAll() {
	tc.t.Helper()
	errs := make([]error, len(tc.cfgs))
	var wg sync.WaitGroup
	for i := range tc.cfgs {
		tc.cfgs[i] = tc.withSecret(tc.cfgs[i])
		wg.Add(1)
		go func() {
			defer wg.Done()
			tc.nodes[i], errs[i] = cluster.Start(context.Background(), tc.cfgs[i])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			tc.t.Fatalf("start %s: %v", tc.cfgs[i].NodeID, err)
		}
	}
	for _, n := range tc.nodes {
		if err := n.WaitReady(tc.ctx); err != nil {
			tc.t.Fatal(err)
		}
	}
}

// stop closes node i.
func (tc *testCluster) stop(i int) error {
	err := tc.nodes[i].Close()
	tc.nodes[i] = nil
	return err
}

// restart stops node i and starts it again from cfgs[i], waiting until it
// is ready, as a one-node cluster is started.
func (tc *testCluster) restart(i int) *cluster.Node {
	tc.t.Helper()
	tc.stop(i)
	return tc.startReady(i)
}

// useHTTPS makes the cluster's clients call the API over HTTPS, trusting
// the CA in caFile.
func (tc *testCluster) useHTTPS(caFile string) {
	tc.t.Helper()
	pool, err := transport.LoadCAs(caFile)
	if err != nil {
		tc.t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}
	tc.t.Cleanup(tr.CloseIdleConnections)
	tc.hc, tc.scheme = &http.Client{Transport: tr}, "https"
}

// clients talk to the API at addr.
func (tc *testCluster) clients(addr string, opts ...connect.ClientOption) clients {
	return clientsAt(tc.hc, tc.scheme+"://"+addr, opts...)
}

// client talks to node i's API.
func (tc *testCluster) client(i int, opts ...connect.ClientOption) clients {
	return tc.clients(tc.nodes[i].APIAddr(), opts...)
}

// createBank creates the source "bank" keyed by e.account through c,
// retrying while the API waits for the metadata group to elect a leader.
func (tc *testCluster) createBank(c clients) {
	tc.t.Helper()
	testutil.EventuallyEvery(tc.t, 30*time.Second, poll, func() error {
		_, err := c.sources.CreateSource(tc.ctx, req(&cepv1.CreateSourceRequest{Name: "bank", Key: "e.account"}))
		if err != nil && strings.Contains(err.Error(), "already") {
			return nil
		}
		return err
	})
}

// deploy deploys a pattern through c; the test fails unless every shard
// runs it when the call returns, so events published next are all its.
func (tc *testCluster) deploy(c clients, r *cepv1.DeployPatternRequest) {
	tc.t.Helper()
	res, err := c.patterns.DeployPattern(tc.ctx, req(r))
	if err != nil {
		tc.t.Fatalf("deploy %s: %v\n%s", r.Name, err, r.Spec)
	}
	if p := res.Msg.PendingShards; len(p) > 0 {
		tc.t.Fatalf("deploy %s returned with shards %v not running it", res.Msg.Pattern.GetName(), p)
	}
}

// deployOnBank creates the source "bank" through node i and deploys spec
// on it.
func (tc *testCluster) deployOnBank(i int, spec []byte) clients {
	tc.t.Helper()
	c := tc.client(i)
	tc.createBank(c)
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(spec)})
	return c
}

// jetStream connects to the NATS server until the test ends.
func (tc *testCluster) jetStream() jetstream.JetStream {
	tc.t.Helper()
	nc, js := tc.connect()
	tc.t.Cleanup(nc.Close)
	return js
}

// connect opens a connection to the cluster's NATS, for the caller to close.
func (tc *testCluster) connect() (*nats.Conn, jetstream.JetStream) {
	tc.t.Helper()
	opts := tc.natsAuth
	if opts == nil && len(tc.cfgs) > 0 && !tc.cfgs[0].Secret.IsZero() {
		// a node's embedded NATS admits its members only (an external
		// test server takes anyone)
		opts = []nats.Option{nats.UserInfo(cluster.NATSNodeUser, tc.cfgs[0].Secret.Token(secret.NATSNode))}
	}
	nc, err := nats.Connect(tc.natsURL(), opts...)
	if err != nil {
		tc.t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		tc.t.Fatal(err)
	}
	return nc, js
}

// publish sends events to a source as a publisher would: subject
// "<source>.<key>", key from the event.
func (tc *testCluster) publish(source string, keyOf func(map[string]any) string, lines []string) {
	tc.t.Helper()
	nc, js := tc.connect()
	defer nc.Close()
	ctx := context.Background()
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			tc.t.Fatal(err)
		}
		if _, err := js.Publish(ctx, source+"."+keyOf(ev), []byte(l)); err != nil {
			tc.t.Fatal(err)
		}
	}
}

// publishSlowly publishes lines to the source "bank" in ten parts spread
// over about d.
func (tc *testCluster) publishSlowly(keyOf func(map[string]any) string, lines []string, d time.Duration) {
	tc.t.Helper()
	for i := 0; i < 10; i++ {
		tc.publish("bank", keyOf, lines[i*len(lines)/10:(i+1)*len(lines)/10])
		time.Sleep(d / 10)
	}
}

// publishRaw publishes payloads as they are to one subject.
func (tc *testCluster) publishRaw(subject string, payloads ...string) {
	tc.t.Helper()
	nc, js := tc.connect()
	defer nc.Close()
	for _, p := range payloads {
		if _, err := js.Publish(context.Background(), subject, []byte(p)); err != nil {
			tc.t.Fatal(err)
		}
	}
}

// outputCount is the number of records on a subject of the output stream.
func (tc *testCluster) outputCount(subject string) int {
	tc.t.Helper()
	nc, js := tc.connect()
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, cluster.OutputStream)
	if err != nil {
		return 0
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		tc.t.Fatal(err)
	}
	return int(info.State.Subjects[subject])
}

// waitOutputs waits until a subject holds at least n records (and a
// moment longer, so that a duplicate would show), then reads them all.
func (tc *testCluster) waitOutputs(subject string, n int, timeout time.Duration) []string {
	tc.t.Helper()
	testutil.EventuallyEvery(tc.t, timeout, poll, func() error {
		if c := tc.outputCount(subject); c < n {
			return fmt.Errorf("%d records on %s so far, want %d", c, subject, n)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)
	return tc.outputs(subject)
}

// outputsOnceThere reads the records on a subject once there are n of
// them or timeout has passed, and a moment later, so that records beyond
// the n expected show too; unlike waitOutputs it leaves judging the
// difference to the caller.
func (tc *testCluster) outputsOnceThere(subject string, n int, timeout time.Duration) []string {
	tc.t.Helper()
	deadline := time.Now().Add(timeout)
	for tc.outputCount(subject) < n && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	return tc.outputs(subject)
}

// outputs reads every record on a subject of the output stream.
func (tc *testCluster) outputs(subject string) []string {
	tc.t.Helper()
	t := tc.t
	nc, js := tc.connect()
	defer nc.Close()
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
	// gone soon after the read: a test reading again and again (the soak
	// does, every round) must not pile consumers up
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, InactiveThreshold: 5 * time.Second})
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

// publishAndCompare publishes the events of accounts to the source
// "bank" and waits until the pattern's subject holds what the offline
// engine produces from them, record for record (ids aside).
func (tc *testCluster) publishAndCompare(spec []byte, subject string, lines []string, timeout time.Duration) {
	tc.t.Helper()
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
	want := withoutIDs(offline(tc.t, spec, lines))
	if len(want) == 0 {
		tc.t.Fatal("the offline run produced nothing; the test would prove nothing")
	}
	got := withoutIDs(tc.waitOutputs(subject, len(want), timeout))
	if d := differsFromOffline(got, want, string(spec)); d != "" {
		tc.t.Fatalf("cluster output differs from the offline engine: %s", d)
	}
}

// compareEachWithOffline checks that the records of each spec on NATS
// (subject cep.out.<prefix><i>) equal those the offline engine produces
// from lines, and returns how many specs produce any.
func (tc *testCluster) compareEachWithOffline(prefix string, specs [][]byte, lines []string, context string) (producing int) {
	tc.t.Helper()
	for i, spec := range specs {
		want := withoutIDs(offline(tc.t, spec, lines))
		if len(want) > 0 {
			producing++
		}
		name := fmt.Sprintf("%s%d", prefix, i)
		got := withoutIDs(tc.outputsOnceThere("cep.out."+name, len(want), 30*time.Second))
		tc.t.Logf("%s: %d records on NATS, %d from the offline engine", name, len(got), len(want))
		if d := differsFromOffline(got, want, string(spec)); d != "" {
			tc.t.Errorf("%s %s: %s", name, context, d)
		}
	}
	return producing
}

// newRecordsDiffer waits until subject holds, after the before records it
// had, as many as the offline engine makes of spec over lines, and reports
// how those differ from the offline engine's (differsFromOffline).
func (tc *testCluster) newRecordsDiffer(subject string, before int, spec []byte, lines []string) string {
	tc.t.Helper()
	want := withoutIDs(offline(tc.t, spec, lines))
	got := withoutIDs(tc.waitOutputs(subject, before+len(want), time.Minute)[before:])
	return differsFromOffline(got, want, string(spec))
}

// sameAsOffline waits for the pattern's records on NATS and compares them,
// as a set, with the offline engine's on lines.
func (tc *testCluster) sameAsOffline(pattern string, spec []byte, lines []string) {
	tc.t.Helper()
	want := withoutIDs(offline(tc.t, spec, lines))
	if len(want) == 0 {
		tc.t.Fatalf("%s: the offline engine finds nothing", pattern)
	}
	got := withoutIDs(tc.waitOutputs("cep.out."+pattern, len(want), 30*time.Second))
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		tc.t.Fatalf("%s:\n got %d records %s\nwant %d records %s", pattern, len(got), strings.Join(got, "\n     "), len(want), strings.Join(want, "\n     "))
	}
}

// metrics reads node i's /metrics (what it could of them).
func (tc *testCluster) metrics(i int) ([]byte, error) {
	res, err := http.Get("http://" + tc.nodes[i].APIAddr() + "/metrics")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return b, nil
}

// metric reads the first sample of node i's /metrics named name whose
// labels contain each of labels (such as `reason="outbox"`).
func (tc *testCluster) metric(i int, name string, labels ...string) float64 {
	tc.t.Helper()
	v, ok := tc.metricValue(i, name, labels...)
	if !ok {
		tc.t.Fatalf("no %s%v in /metrics", name, labels)
	}
	return v
}

// metricValue is metric, reporting whether there is such a sample.
func (tc *testCluster) metricValue(i int, name string, labels ...string) (float64, bool) {
	tc.t.Helper()
	b, err := tc.metrics(i)
	if err != nil {
		tc.t.Fatal(err)
	}
	var m []string
	for _, s := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+`(\{[^}]*\})? (\S+)$`).FindAllStringSubmatch(string(b), -1) {
		all := true
		for _, l := range labels {
			all = all && strings.Contains(s[1], l)
		}
		if all {
			m = s
			break
		}
	}
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[2], 64)
	if err != nil {
		tc.t.Fatal(err)
	}
	return v, true
}

// waitApplied waits until each of node i's shard replicas (shards of
// them) has applied the deployments of the named patterns, which its
// metrics then list (after a deploy that returned naming shards that did
// not run it yet).
func (tc *testCluster) waitApplied(i, shards int, names ...string) {
	tc.t.Helper()
	testutil.EventuallyEvery(tc.t, 30*time.Second, poll, func() error {
		b, err := tc.metrics(i)
		if err != nil {
			return err
		}
		for _, name := range names {
			re := regexp.MustCompile(`(?m)^cep_pattern_keys\{[^}]*pattern="` + regexp.QuoteMeta(name) + `"[^}]*\} `)
			if n := len(re.FindAllIndex(b, -1)); n < shards {
				return fmt.Errorf("pattern %s applied by %d of %d shards", name, n, shards)
			}
		}
		return nil
	})
}

// shardVoters returns, for each shard, its replicas as the nodes on (by
// index) report them from their shards' leaders: the voters and
// non-voters of each configuration.
func (tc *testCluster) shardVoters(on []int) map[uint32][]string {
	out := map[uint32][]string{}
	for _, i := range on {
		res, err := tc.client(i).cluster.ListShards(tc.ctx, req(&cepv1.ListShardsRequest{}))
		if err != nil {
			continue
		}
		for _, sh := range res.Msg.Shards {
			var voters []string
			for _, r := range sh.Replicas {
				if r.Suffrage == cepv1.Suffrage_SUFFRAGE_VOTER {
					voters = append(voters, r.NodeId)
				} else {
					voters = append(voters, r.NodeId+"(non-voter)")
				}
			}
			if sh.LeaderNodeId != "" && len(sh.Replicas) > 0 {
				out[sh.Id] = voters
			}
		}
	}
	return out
}

// waitPlaced waits until each of the shards has exactly the voters ok
// returns true for, as many as n, as their leaders among the nodes on
// report them.
func (tc *testCluster) waitPlaced(on []int, shards, n int, ok func(node string) bool, timeout time.Duration) map[uint32][]string {
	tc.t.Helper()
	var got map[uint32][]string
	testutil.EventuallyEvery(tc.t, timeout, poll, func() error {
		got = tc.shardVoters(on)
		if len(got) != shards {
			return fmt.Errorf("%d of %d shards report a leader: %v", len(got), shards, got)
		}
		for id, voters := range got {
			if len(voters) != n {
				return fmt.Errorf("shard %d has replicas %v, want %d voters", id, voters, n)
			}
			for _, v := range voters {
				if strings.HasSuffix(v, "(non-voter)") || !ok(v) {
					return fmt.Errorf("shard %d has replicas %v", id, voters)
				}
			}
		}
		return nil
	})
	return got
}

// waitMembers waits until the cluster's members are ids (sorted, joined by
// commas) as c's node reports them.
func (tc *testCluster) waitMembers(c clients, ids string) {
	tc.t.Helper()
	testutil.EventuallyEvery(tc.t, 30*time.Second, poll, func() error {
		st, err := c.cluster.GetStatus(tc.ctx, req(&cepv1.GetStatusRequest{}))
		if err != nil {
			return err
		}
		var got []string
		for _, nd := range st.Msg.Nodes {
			got = append(got, nd.Id)
		}
		if strings.Join(got, ",") != ids {
			return fmt.Errorf("members %v, want %s", got, ids)
		}
		return nil
	})
}

// checkReplicasIdentical waits until the replicas of each shard on the
// nodes on (by index; none: every running node) have applied the same log
// index and fails unless their states then encode to the same bytes:
// replicas added later, by a snapshot or by replaying the log, hold what
// the others hold.
func (tc *testCluster) checkReplicasIdentical(on ...int) {
	tc.t.Helper()
	if len(on) == 0 {
		for i := range tc.nodes {
			on = append(on, i)
		}
	}
	testutil.EventuallyEvery(tc.t, 30*time.Second, poll, func() error {
		type replicaState struct {
			node  string
			index uint64
			state []byte
		}
		byShard := map[uint64][]replicaState{}
		for _, i := range on {
			n := tc.nodes[i]
			if n == nil {
				continue
			}
			for _, sh := range n.Shards() {
				var rs replicaState
				rs.node = n.Config().NodeID
				var err error
				sh.FSM().View(func(s *shard.State, index uint64) {
					var buf bytes.Buffer
					err = s.WriteSnapshot(&buf, snapshot.Header{ID: "compare", Kind: snapshot.KindRaftSnapshot})
					rs.index, rs.state = index, buf.Bytes()
				})
				if err != nil {
					return err
				}
				byShard[sh.ID()] = append(byShard[sh.ID()], rs)
			}
		}
		for id, rs := range byShard {
			for _, r := range rs[1:] {
				if r.index != rs[0].index {
					return fmt.Errorf("shard %d: %s applied index %d, %s %d", id, rs[0].node, rs[0].index, r.node, r.index)
				}
				if !bytes.Equal(r.state, rs[0].state) {
					tc.t.Fatalf("shard %d at index %d: %s's state differs from %s's", id, r.index, r.node, rs[0].node)
				}
			}
		}
		return nil
	})
}

// shardLeader finds the process leading shard 1: one that reports itself
// as the leader, with every running process holding a replica agreeing.
func (tc *testCluster) shardLeader() *proc {
	tc.t.Helper()
	var leader *proc
	testutil.EventuallyEvery(tc.t, 30*time.Second, poll, func() error {
		views := map[string]int{}
		running := 0 // running nodes holding a replica of shard 1
		for _, p := range tc.procs {
			if p.cmd == nil {
				continue
			}
			res, err := tc.clients(p.api, api.WithClientToken("s3cret")).cluster.ListShards(tc.ctx, req(&cepv1.ListShardsRequest{}))
			if err != nil {
				return err
			}
			for _, s := range res.Msg.Shards {
				if s.Id == 1 {
					views[s.LeaderNodeId]++
					running++
				}
			}
		}
		for id, n := range views {
			if id == "" || n != running {
				continue
			}
			for _, q := range tc.procs {
				if q.id == id && q.cmd != nil {
					leader = q
					return nil
				}
			}
		}
		return fmt.Errorf("no agreed leader for shard 1: %v", views)
	})
	return leader
}

// removeNode removes process id from the cluster through another one and
// waits until it is gone from the members and no shard has it.
func (tc *testCluster) removeNode(id string) {
	tc.t.Helper()
	var other *proc
	for _, p := range tc.procs {
		if p.id != id && p.cmd != nil {
			other = p
		}
	}
	c := tc.clients(other.api, api.WithClientToken("s3cret"))
	testutil.EventuallyEvery(tc.t, 30*time.Second, poll, func() error {
		_, err := c.cluster.RemoveNode(tc.ctx, req(&cepv1.RemoveNodeRequest{NodeId: id}))
		return err
	})
	testutil.EventuallyEvery(tc.t, 90*time.Second, poll, func() error {
		st, err := c.cluster.GetStatus(tc.ctx, req(&cepv1.GetStatusRequest{}))
		if err != nil {
			return err
		}
		if st.Msg.Summary.KeyGroups == 0 || len(st.Msg.Nodes) == 0 {
			return fmt.Errorf("%s's copy of the metadata is catching up", other.id) // restarted a moment ago
		}
		for _, nd := range st.Msg.Nodes {
			if nd.Id == id {
				return fmt.Errorf("%s still a member, with %d replicas", id, nd.Replicas)
			}
		}
		return nil
	})
	all, err := c.cluster.ListShards(tc.ctx, req(&cepv1.ListShardsRequest{ClusterWide: true}))
	if err != nil {
		tc.t.Fatal(err)
	}
	tc.t.Logf("%s removed from the cluster; %d shards", id, len(all.Msg.Shards))
}
