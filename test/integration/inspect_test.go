package integration

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/nfa"
)

// inspectSpec is lfl with a window longer than the events span (their
// fillers included), so the partial matches stay to be inspected.
var inspectSpec = []byte(`name: lfl
source: bank
key: e.account
time: e.ts
within: 1h
stages:
  - name: login
    where: e.type == "LOGIN"
  - name: failed
    where: e.type == "FAIL"
    oneOrMore: true
  - name: logout
    where: e.type == "LOGOUT"
`)

// inspectedText is an answer's partial matches and buffered events as
// text, for comparing with the offline engine's (source positions
// aside: the offline run numbers lines, the cluster stream messages).
func inspectedText(res *cepv1.InspectKeyResponse) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d partial matches, %d buffered\n", res.PartialMatchCount, res.BufferedEventCount)
	for _, pm := range res.PartialMatches {
		fmt.Fprintf(&b, "%s (%s) start %d deadline %d/%v:", pm.State, pm.Stage, pm.StartMs, pm.DeadlineMs, pm.HasDeadline)
		for _, e := range pm.Events {
			fmt.Fprintf(&b, " %s@%d=%s", e.Stage, e.TimeMs, e.Json)
		}
		b.WriteString("\n")
	}
	for _, e := range res.BufferedEvents {
		fmt.Fprintf(&b, "buffered @%d=%s\n", e.TimeMs, e.Json)
	}
	return b.String()
}

// offlineText is the same of the offline engine's matcher.
func offlineText(v nfa.KeyView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d partial matches, %d buffered\n", v.PartialCount, v.BufferedCount)
	for _, pm := range v.Partial {
		fmt.Fprintf(&b, "%s (%s) start %d deadline %d/%v:", pm.State, pm.Stage, pm.Start, pm.Deadline, pm.HasDeadline)
		for _, e := range pm.Events {
			fmt.Fprintf(&b, " %s@%d=%s", e.Stage, e.Time, e.Raw)
		}
		b.WriteString("\n")
	}
	for _, e := range v.Buffered {
		fmt.Fprintf(&b, "buffered @%d=%s\n", e.Time, e.Raw)
	}
	return b.String()
}

// offlineInspected runs inspectSpec offline over lines and returns its
// matcher, the accounts it holds partial matches for and one with more
// than two; the test fails when they are too few to check much.
func offlineInspected(t *testing.T, lines []string) (m *nfa.Matcher, keys []string, many string) {
	t.Helper()
	p, err := nfa.CompileBytes(inspectSpec)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := offlineRunner(t, p, lines)
	m = r.Matchers()[0]
	for a := range 40 {
		k := fmt.Sprintf("acc-%d", a)
		if pm, _ := m.KeyState(k); pm > 0 {
			keys = append(keys, k)
			if pm > 2 && many == "" {
				many = k
			}
		}
	}
	if len(keys) < 10 || many == "" {
		t.Fatalf("the offline engine holds partial matches for %d accounts (one with more than 2: %q): the test checks too little", len(keys), many)
	}
	return m, keys, many
}

// inspectSameAsOffline waits until InspectKey through c shows each key as
// the offline matcher m holds it, and notes in leaders the node that
// answered for each.
func inspectSameAsOffline(t *testing.T, tc *testCluster, c clients, m *nfa.Matcher, keys []string, when string, leaders map[string]string) {
	t.Helper()
	for _, k := range keys {
		want := offlineText(m.InspectKey(k, 0))
		testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
			res, err := c.patterns.InspectKey(tc.ctx, req(&cepv1.InspectKeyRequest{Name: "lfl", Key: k, Limit: 1000}))
			if err != nil {
				return err
			}
			if got := inspectedText(res.Msg); got != want {
				return fmt.Errorf("%s: key %s on shard %d (leader %s):\n%s\nthe offline engine holds\n%s", when, k, res.Msg.ShardId,
					res.Msg.LeaderNodeId, got, want)
			}
			leaders[k] = res.Msg.LeaderNodeId
			return nil
		})
	}
}

// On three nodes, what InspectKey shows of every account, asked of one
// node (which asks each key's shard leader), is what the offline engine
// holds for it after the same events: partial matches with their states,
// starts, deadlines and events by stage. So it stays after the leader of
// a shard is stopped and another takes the shard over. A limit lists the
// first partial matches and counts them all.
func TestInspectKeyEqualsOffline(t *testing.T) {
	tc := newPeers(t, 3, 3*time.Minute)
	tc.startAll()
	c := tc.deployOnBank(0, inspectSpec)
	lines := bankEvents(41, 300)
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)

	m, keys, many := offlineInspected(t, lines)
	leaders := map[string]string{} // key -> node that answered
	same := func(c clients, when string) {
		t.Helper()
		inspectSameAsOffline(t, tc, c, m, keys, when, leaders)
	}
	same(c, "after the events")
	// the node asked is one that does not lead some account's shard (the
	// elections may have made node 1 lead every shard): it asks the leader
	asker, askerID := 0, "n1"
	if !slices.ContainsFunc(slices.Collect(maps.Values(leaders)), func(l string) bool { return l != "n1" }) {
		asker, askerID = 1, "n2"
		c = tc.client(asker)
		same(c, "asking node 2")
	}
	others := map[string]bool{}
	for _, l := range leaders {
		if l != askerID {
			others[l] = true
		}
	}
	if len(others) == 0 {
		t.Fatalf("node %s leads every account's shard (%v): nothing was forwarded", askerID, leaders)
	}
	t.Logf("%d accounts hold partial matches (%s %d), asked of %s, answered by %v", len(keys), many, func() int { n, _ := m.KeyState(many); return n }(), askerID, leaders)
	// asked to answer as the leader, a node that does not lead refuses
	for k, l := range leaders {
		if l != askerID {
			_, err := c.patterns.InspectKey(tc.ctx, req(&cepv1.InspectKeyRequest{Name: "lfl", Key: k, LeaderOnly: true}))
			wantCode(t, "leader_only of a node that does not lead "+k, err, connect.CodeUnavailable)
			break
		}
	}

	// the first two of many, and how many there are
	res, err := c.patterns.InspectKey(tc.ctx, req(&cepv1.InspectKeyRequest{Name: "lfl", Key: many, Limit: 2}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := inspectedText(res.Msg), offlineText(m.InspectKey(many, 2)); got != want {
		t.Fatalf("%s, limit 2:\n%s\nwant\n%s", many, got, want)
	}
	if len(res.Msg.PartialMatches) != 2 || res.Msg.PartialMatchCount <= 2 {
		t.Fatalf("%s, limit 2: %d partial matches listed of %d", many, len(res.Msg.PartialMatches), res.Msg.PartialMatchCount)
	}

	// a shard's leader other than the node asked goes; another takes the
	// shard over
	var gone string
	for l := range others {
		gone = l
		break
	}
	var stopped int
	fmt.Sscanf(gone, "n%d", &stopped)
	if err := tc.stop(stopped - 1); err != nil {
		t.Fatal(err)
	}
	same(c, fmt.Sprintf("node %s stopped", gone))
	t.Logf("node %s stopped: answered by %v", gone, leaders)
	for k, l := range leaders {
		if l == gone {
			t.Errorf("key %s: answered by %s, which was stopped", k, l)
		}
	}

	// an unknown pattern, a key without state, a limit too high
	_, err = c.patterns.InspectKey(tc.ctx, req(&cepv1.InspectKeyRequest{Name: "nope", Key: "acc-1"}))
	wantCode(t, "unknown pattern", err, connect.CodeNotFound)
	if res, err := c.patterns.InspectKey(tc.ctx, req(&cepv1.InspectKeyRequest{Name: "lfl", Key: "nobody"})); err != nil ||
		res.Msg.PartialMatchCount+res.Msg.BufferedEventCount != 0 {
		t.Errorf("a key without state: %v %v", res, err)
	}
	_, err = c.patterns.InspectKey(tc.ctx, req(&cepv1.InspectKeyRequest{Name: "lfl", Key: "acc-1", Limit: 10_001}))
	wantCode(t, "limit over 10,000", err, connect.CodeInvalidArgument)
}

// A reader may inspect a key; a call without a token or with one the
// node does not know is refused. The node credential may ask a shard's
// leader (what a member that does not lead the shard asks).
func TestInspectKeyRoles(t *testing.T) {
	s := secret.Generate()
	tc := newSingle(t, 90*time.Second, cluster.Config{Tokens: accessTokens(t), Secret: s, Shards: 1})
	ctx := tc.ctx
	operator, reader := tc.client(0, as("operator")), tc.client(0, as("reader"))
	spec, err := os.ReadFile("../../examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tc.createBank(operator)
	tc.deploy(operator, &cepv1.DeployPatternRequest{Spec: string(spec)})
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) },
		[]string{`{"account":"acc-3","type":"LOGIN","ts":5000}`, `{"account":"acc-4","type":"LOGIN","ts":9000}`})

	inspect := &cepv1.InspectKeyRequest{Name: "login-fail-logout", Key: "acc-3"}
	testutil.EventuallyEvery(t, 20*time.Second, poll, func() error {
		res, err := reader.patterns.InspectKey(ctx, req(inspect))
		if err != nil {
			return err
		}
		if res.Msg.BufferedEventCount+res.Msg.PartialMatchCount != 1 {
			return fmt.Errorf("reader inspects acc-3: %s", inspectedText(res.Msg))
		}
		return nil
	})
	_, err = tc.client(0).patterns.InspectKey(ctx, req(inspect))
	wantCode(t, "inspect without a token", err, connect.CodeUnauthenticated)
	_, err = tc.client(0, api.WithClientToken("reader-0123456789abcdeF")).patterns.InspectKey(ctx, req(inspect))
	wantCode(t, "inspect with a wrong token", err, connect.CodeUnauthenticated)
	node := tc.client(0, api.WithClientToken(s.Token(secret.Node)))
	if _, err := node.patterns.InspectKey(ctx, req(&cepv1.InspectKeyRequest{Name: "login-fail-logout", Key: "acc-3", LeaderOnly: true})); err != nil {
		t.Errorf("the node credential asks the leader: %v", err)
	}
}

// After an update under the drain policy, the older version still holds
// its partial matches: InspectKey lists them under draining, as the
// offline engine holds them after the events (the old version's), and
// the new version, which has had no event of the key, holds none.
func TestInspectKeyShowsDrainingVersion(t *testing.T) {
	tc := newSingle(t, 90*time.Second, cluster.Config{Shards: 1})
	c := tc.deployOnBank(0, inspectSpec)
	lines := bankEvents(43, 120)
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
	p, err := nfa.CompileBytes(inspectSpec)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := offlineRunner(t, p, lines)
	m := r.Matchers()[0]
	key := ""
	for a := range 40 {
		if pm, _ := m.KeyState(fmt.Sprintf("acc-%d", a)); pm > 1 {
			key = fmt.Sprintf("acc-%d", a)
			break
		}
	}
	if key == "" {
		t.Fatal("the offline engine holds no account with two partial matches: the test checks nothing")
	}
	want := offlineText(m.InspectKey(key, 0))
	ask := func() (*cepv1.InspectKeyResponse, error) {
		res, err := c.patterns.InspectKey(tc.ctx, req(&cepv1.InspectKeyRequest{Name: "lfl", Key: key}))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		res, err := ask()
		if err != nil {
			return err
		}
		if got := inspectedText(res); got != want {
			return fmt.Errorf("before the update, %s:\n%s\nwant\n%s", key, got, want)
		}
		return nil
	})

	updated := strings.Replace(string(inspectSpec), "within: 1h", "within: 2h", 1)
	if _, err := c.patterns.UpdatePattern(tc.ctx, req(&cepv1.UpdatePatternRequest{Spec: updated, Policy: cepv1.UpdatePolicy_UPDATE_POLICY_DRAIN})); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		res, err := ask()
		if err != nil {
			return err
		}
		if res.Version != 2 || res.PartialMatchCount != 0 || len(res.Draining) != 1 || res.Draining[0].Version != 1 {
			return fmt.Errorf("after the update, %s: version %d with %d partial matches, %d draining versions", key, res.Version, res.PartialMatchCount, len(res.Draining))
		}
		d := res.Draining[0]
		got := inspectedText(&cepv1.InspectKeyResponse{PartialMatches: d.PartialMatches, PartialMatchCount: d.PartialMatchCount,
			BufferedEvents: d.BufferedEvents, BufferedEventCount: d.BufferedEventCount})
		if got != want {
			return fmt.Errorf("version 1, draining, %s:\n%s\nwant\n%s", key, got, want)
		}
		return nil
	})
}

// Three node processes: what InspectKey shows of every account equals the
// offline engine's state after the same events, before and after the
// leader of an account's shard is killed with SIGKILL (the shard's new
// leader answers from its own replica, rebuilt from the log and
// snapshots).
func TestInspectKeyAfterLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and kills them")
	}
	tc := newCluster(t, 3*time.Minute)
	ports := freePorts(t, 9)
	var peers []string
	for i := range 3 {
		p := &proc{id: fmt.Sprintf("n%d", i+1), dir: filepath.Join(tc.base, fmt.Sprintf("n%d", i+1)), raft: ports[3*i], api: ports[3*i+1], gossip: ports[3*i+2]}
		tc.procs = append(tc.procs, p)
		peers = append(peers, p.id+"="+p.raft+"="+p.api+"="+p.gossip)
	}
	secretFile := filepath.Join(tc.base, "cluster-secret")
	tc.secret = secret.Generate()
	if err := os.WriteFile(secretFile, []byte(tc.secret.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range tc.procs {
		p.args = []string{"--id", p.id, "--data", p.dir, "--raft-addr", p.raft, "--api-addr", p.api, "--gossip-addr", p.gossip,
			"--nats", tc.natsURL(), "--peers", strings.Join(peers, ","), "--log-level", "warn", "--token", "s3cret", "--dead-after", "10s",
			"--cluster-secret-file", secretFile}
		p.start(t)
	}
	defer func() {
		for _, p := range tc.procs {
			p.kill()
		}
	}()
	c := tc.clients(tc.procs[0].api, api.WithClientToken("s3cret"))
	tc.createBank(c)
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		_, err := c.patterns.DeployPattern(tc.ctx, req(&cepv1.DeployPatternRequest{Spec: string(inspectSpec)}))
		if err != nil && strings.Contains(err.Error(), "already") {
			return nil
		}
		return err
	})
	lines := bankEvents(47, 300)
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
	m, keys, _ := offlineInspected(t, lines)
	leaders := map[string]string{}
	inspectSameAsOffline(t, tc, c, m, keys, "after the events", leaders)

	// kill the leader of some account's shard other than the node asked
	// (or, when node 1 leads them all, node 1, and ask node 2)
	victim := ""
	for _, l := range leaders {
		if l != "n1" {
			victim = l
			break
		}
	}
	if victim == "" {
		victim, c = "n1", tc.clients(tc.procs[1].api, api.WithClientToken("s3cret"))
	}
	for _, p := range tc.procs {
		if p.id == victim {
			p.kill()
		}
	}
	inspectSameAsOffline(t, tc, c, m, keys, "node "+victim+" killed", leaders)
	for k, l := range leaders {
		if l == victim {
			t.Errorf("key %s: answered by %s, which was killed", k, l)
		}
	}
	t.Logf("%s killed: %d accounts answered by %v", victim, len(keys), leaders)
}
