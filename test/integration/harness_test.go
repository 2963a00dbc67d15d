// Package integration runs real nodes (in process, real Raft on disk, real
// TCP on loopback, an embedded NATS JetStream server) and checks end-to-end
// behaviour against the offline engine. The tests drive their nodes through
// a testCluster (testcluster_test.go); this file holds the helpers that need
// no cluster: the offline engine, events, comparisons.
package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/multiset"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/shard"
)

// testRaft is Raft with short timeouts, so that elections take little time.
func testRaft() *raft.Config {
	c := shard.DefaultRaftConfig()
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 200 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	return c
}

// clients talk to a node's API (testCluster.clients makes them).
type clients struct {
	patterns   cepv1connect.PatternServiceClient
	sources    cepv1connect.SourceServiceClient
	cluster    cepv1connect.ClusterServiceClient
	matches    cepv1connect.MatchServiceClient
	savepoints cepv1connect.SavepointServiceClient
}

// clientsAt talks to the API at base URL through hc.
func clientsAt(hc *http.Client, base string, opts ...connect.ClientOption) clients {
	opts = append([]connect.ClientOption{connect.WithInterceptors(retryNotApplied())}, opts...)
	return clients{
		patterns:   cepv1connect.NewPatternServiceClient(hc, base, opts...),
		sources:    cepv1connect.NewSourceServiceClient(hc, base, opts...),
		cluster:    cepv1connect.NewClusterServiceClient(hc, base, opts...),
		matches:    cepv1connect.NewMatchServiceClient(hc, base, opts...),
		savepoints: cepv1connect.NewSavepointServiceClient(hc, base, opts...),
	}
}

// retryNotApplied asks again, for up to 30 s, when the answer is
// Unavailable and says the change was not applied (while the metadata
// group elects a leader), as cepctl does: on a loaded machine an election
// may follow WaitReady, and a test's first call then failed.
func retryNotApplied() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, r connect.AnyRequest) (connect.AnyResponse, error) {
			deadline := time.Now().Add(30 * time.Second)
			for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
				res, err := next(ctx, r)
				if connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "not applied") || time.Now().After(deadline) {
					return res, err
				}
				select {
				case <-ctx.Done():
					return res, err
				case <-time.After(wait):
				}
			}
		}
	}
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
	out, _ := offlineLines(t, r, lines)
	return r, out
}

// offlineLines runs lines through r and returns the records and the dead
// letters (as a cluster publishes them, without ids) of the run.
func offlineLines(t *testing.T, r *nfa.Runner, lines []string) (recs, dead []string) {
	t.Helper()
	for _, l := range lines {
		out, err := r.Line([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		for i := range out {
			b, _ := out[i].AppendJSON(nil)
			recs = append(recs, string(b))
		}
		for _, d := range r.DeadLetters() {
			b, _ := json.Marshal(d)
			dead = append(dead, string(b))
		}
	}
	return recs, dead
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
			NATSURL: natsURL, Peers: peers, Raft: testRaft(), Logger: testutil.EnvLogger(), Testing: &cluster.Testing{FastGossip: true},
		}
	}
	return out
}
