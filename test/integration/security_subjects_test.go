package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/keygroup"
)

// readyz is what node i's /readyz answers.
func (tc *testCluster) readyz(i int) (int, string) {
	tc.t.Helper()
	res, err := tc.hc.Get(tc.scheme + "://" + tc.nodes[i].APIAddr() + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, strings.TrimSpace(string(body))
}

// keepsNATS fails the test unless every node's NATS connection is open,
// answers, and the node is ready.
func (tc *testCluster) keepsNATS() {
	tc.t.Helper()
	for i, n := range tc.nodes {
		if n == nil {
			continue
		}
		if n.JetStream().Conn().IsClosed() {
			tc.t.Errorf("%s: its NATS connection is closed: %v", tc.cfgs[i].NodeID, n.JetStream().Conn().LastError())
		}
		if v := tc.metric(i, "cep_nats_reachable"); v != 1 {
			tc.t.Errorf("%s: cep_nats_reachable = %v", tc.cfgs[i].NodeID, v)
		}
		// (a shard may be between leaders for a moment, as leadership
		// moves to its preferred replica)
		testutil.EventuallyEvery(tc.t, 10*time.Second, poll, func() error {
			if code, body := tc.readyz(i); code != http.StatusOK {
				return fmt.Errorf("%s: /readyz %d %q", tc.cfgs[i].NodeID, code, body)
			}
			return nil
		})
	}
}

// One publisher event whose key is 5,000 characters, on a source of the
// publishers' own subjects read by a pattern keyed by a field (so re-keyed:
// the forwarding shard publishes each event on "<derived source>.<key
// token>"), once made a node publish a subject past NATS's max control
// line: the server closed the node's connection for good, the record
// stayed in the replicated outbox, and every replica that took the shard
// over lost NATS the same way. Now the event is dead-lettered naming the
// bound, the other events match as the offline engine says, and every
// node keeps NATS.
func TestLongKeyOnDerivedSourceIsDeadLettered(t *testing.T) {
	tc := newPeers(t, 3, 3*time.Minute)
	tc.startAll()
	c, ctx := tc.client(0), tc.ctx
	if _, err := c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "orders", Subjects: []string{"shop.orders.*"}})); err != nil {
		t.Fatal(err)
	}
	spec := []byte("name: by-customer\nsource: orders\nkey: e.customer\ntime: e.ts\nwithin: 50\nstages:\n  - name: a\n    where: e.type == \"A\"\n  - name: b\n    where: e.type == \"B\"\n    contiguity: followedBy\n")
	res, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: string(spec)}))
	if err != nil {
		t.Fatal(err)
	}
	if reads := res.Msg.Pattern.Reads; len(reads) != 1 || !strings.HasPrefix(reads[0], "orders.k") {
		t.Fatalf("the pattern reads %v, not a source re-keying orders", reads)
	}
	var lines []string
	for i := 0; i < 300; i++ {
		lines = append(lines, fmt.Sprintf(`{"customer":"c-%d","type":%q,"ts":%d}`, i%9, []string{"A", "B", "C"}[(i*7)%3], 1000+i*2))
	}
	for i := 0; i < 100; i++ { // later events for every shard's watermark
		lines = append(lines, fmt.Sprintf(`{"customer":"f-%d","type":"END","ts":%d}`, i, 100000+i))
	}
	longKey := strings.Repeat("k", 5000)
	attack := fmt.Sprintf(`{"customer":%q,"type":"A","ts":1100}`, longKey)
	js := tc.jetStream()
	for i, l := range lines {
		if i == 100 {
			if _, err := js.Publish(ctx, "shop.orders.x", []byte(attack)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := js.Publish(ctx, "shop.orders.x", []byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	tc.sameAsOffline("by-customer", spec, lines)
	dl := tc.waitOutputs(keygroup.DeadLetterRoot+"orders", 1, 30*time.Second)
	var rec struct {
		Source, Pattern, Reason string
		Data                    map[string]any
	}
	if len(dl) != 1 || json.Unmarshal([]byte(dl[0]), &rec) != nil {
		t.Fatalf("dead letters of orders: %v", dl)
	}
	if rec.Source != "orders" || rec.Pattern != "by-customer" || rec.Data["customer"] != longKey || !strings.Contains(rec.Reason, "MaxTokenBytes = 255") {
		t.Errorf("dead letter: source %q pattern %q reason %q (want the bound named)", rec.Source, rec.Pattern, rec.Reason)
	}
	tc.keepsNATS()
}

// Names and subjects in API requests that would put a subject past NATS's
// max control line are refused as InvalidArgument naming the field and
// the bound, before any NATS call: a dead-letter tail of a 5,000-character
// source once closed the node's NATS connection for good (the name went
// into the subject of the consumer-create request), and a 5,000-character
// output subject did so at the pattern's first record, after every
// restart too. A source may not take the node's own subjects either.
func TestLongNamesAndSubjectsRefusedAtTheAPI(t *testing.T) {
	tc := newSingle(t, 2*time.Minute, cluster.Config{})
	c := tc.deployOnBank(0, lflSpec)
	ctx := tc.ctx
	long := strings.Repeat("x", 5000)
	expect := func(what string, err error, field string) {
		t.Helper()
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: err = %v, want InvalidArgument naming %s", what, err, field)
			return
		}
		if len(err.Error()) > 400 {
			t.Errorf("%s: an error of %d bytes", what, len(err.Error()))
		}
	}

	tail, err := c.matches.Tail(ctx, req(&cepv1.TailRequest{DeadLetters: true, DeadLetterSource: long}))
	if err == nil {
		tail.Receive()
		err = tail.Err()
		tail.Close()
	}
	expect("tail of a 5,000-character dead_letter_source", err, "dead_letter_source")

	other := strings.Replace(string(lflSpec), "name: lfl", "name: other", 1)
	_, err = c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: other, OutputSubject: "cep.out." + long}))
	expect("deploy with a 5,000-character output subject", err, "output_subject")
	_, err = c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: other, OutputSubject: "cep.out." + strings.Repeat("t", keygroup.MaxTokenBytes+1)}))
	expect("deploy with an output subject token past the bound", err, "MaxTokenBytes")

	_, err = c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: long}))
	expect("a source of a 5,000-character name", err, "source name")
	_, err = c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "s", Subjects: []string{"web." + long}}))
	expect("a source of a 5,000-character subject", err, "subjects")
	for _, subj := range []string{"_CEP_NODE_INBOX.>", "_INBOX.*.*", "cep.clock.>", "$JS.API.>"} {
		_, err = c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "s", Subjects: []string{subj}}))
		expect("a source on "+subj, err, subj)
	}
	_, err = c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "_CEP_NODE_INBOX"}))
	expect("a source named _CEP_NODE_INBOX", err, "_CEP_NODE_INBOX")

	// the node kept NATS: it still answers and processes
	time.Sleep(time.Second) // a closed connection shows within a probe period
	tc.keepsNATS()
	lines := bankEvents(7, 200)
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
	tc.sameAsOffline("lfl", lflSpec, lines)
}

// A node whose NATS connection the server closes for good (here for a
// control line past max_control_line, sent on the node's own connection,
// as a subject too long once made it) is not ready — /readyz and gRPC
// health say so — until it has connected anew, then ready again, and its
// shards read and publish on the new connection.
func TestClosedNATSConnectionIsRedialed(t *testing.T) {
	tc := newSingle(t, 2*time.Minute, cluster.Config{Shards: 2})
	c := tc.deployOnBank(0, lflSpec)
	n := tc.nodes[0]
	keyOf := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	lines := bankEvents(11, 300)
	tc.publish("bank", keyOf, lines[:150])

	old := n.JetStream().Conn()
	if err := old.Publish(strings.Repeat("s", 5000), nil); err != nil {
		t.Fatal(err)
	}
	old.Flush() // sends it; the server answers by closing the connection
	closedAt := time.Now()
	testutil.EventuallyEvery(t, 5*time.Second, time.Millisecond, func() error {
		if !old.IsClosed() {
			return fmt.Errorf("the server has not closed the node's connection")
		}
		return nil
	})
	code, body := tc.readyz(0)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "NATS") {
		t.Fatalf("/readyz with the NATS connection closed: %d %q", code, body)
	}
	hc := grpchealth.NewClient(tc.hc, tc.scheme+"://"+n.APIAddr())
	if res, err := hc.Check(tc.ctx, &grpchealth.CheckRequest{}); err != nil || res.Status != grpchealth.StatusNotServing {
		t.Fatalf("gRPC health with the NATS connection closed: %v %v", res, err)
	}
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		if code, body := tc.readyz(0); code != http.StatusOK {
			return fmt.Errorf("/readyz %d %q", code, body)
		}
		return nil
	})
	t.Logf("ready again %v after the connection was closed", time.Since(closedAt).Round(time.Millisecond))
	if res, err := hc.Check(tc.ctx, &grpchealth.CheckRequest{}); err != nil || res.Status != grpchealth.StatusServing {
		t.Fatalf("gRPC health once NATS answers again: %v %v", res, err)
	}
	if n.JetStream().Conn() == old || n.JetStream().Conn().IsClosed() {
		t.Fatal("the node is ready on the closed connection")
	}
	// processing resumes: what was published before and after the close
	// matches as the offline engine says, tails work
	tc.publish("bank", keyOf, lines[150:])
	tc.sameAsOffline("lfl", lflSpec, lines)
	tail, err := c.matches.Tail(tc.ctx, req(&cepv1.TailRequest{Pattern: "lfl", Start: cepv1.TailStart_TAIL_START_ALL}))
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	if !tail.Receive() {
		t.Fatalf("tail on the new connection: %v", tail.Err())
	}
	tc.keepsNATS()
}

// A record JetStream refuses for good (here: larger than the output
// stream's max message size, which an operator may set) once stayed in the
// replicated outbox, retried forever: the outbox filled, the shard stopped
// reading, and so would every leader after. Now each such record is
// published as a dead-letter summary on cep.deadletter.output.<pattern>
// (acknowledged through the log like any record), counted in
// cep_outbox_refused_total, and the shard goes on: its outbox drains and
// the records JetStream takes are published.
func TestRecordsJetStreamRefusesAreDeadLettered(t *testing.T) {
	tc := newSingle(t, 2*time.Minute, cluster.Config{Shards: 2})
	tc.deployOnBank(0, lflSpec)
	ctx := tc.ctx
	// events padded so that every match is well over the max message size
	lines := bankEvents(13, 300)
	for i, l := range lines {
		lines[i] = strings.Replace(l, `{`, `{"pad":"`+strings.Repeat("p", 1500)+`",`, 1)
	}
	want := offline(t, lflSpec, lines)
	smallest := len(want[0])
	for _, r := range want {
		smallest = min(smallest, len(r))
	}
	// every match is refused, a summary (about 300 bytes) is not
	const maxMsg = 1000
	if smallest <= maxMsg {
		t.Fatalf("the offline engine's smallest record is %d bytes: not over the max message size %d", smallest, maxMsg)
	}
	js := tc.jetStream()
	st, err := js.Stream(ctx, cluster.OutputStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxMsgSize = maxMsg
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
	summaries := tc.waitOutputs(keygroup.DeadLetterRoot+"output.lfl", len(want), 30*time.Second)
	if len(summaries) != len(want) {
		t.Fatalf("%d summaries on %soutput.lfl, want one per match (%d)", len(summaries), keygroup.DeadLetterRoot, len(want))
	}
	for _, s := range summaries {
		var sum struct{ Subject, ID, Reason string }
		if err := json.Unmarshal([]byte(s), &sum); err != nil || sum.Subject != "cep.out.lfl" || sum.ID == "" || !strings.Contains(sum.Reason, "JetStream refused it") {
			t.Fatalf("summary %s", s)
		}
	}
	if n := tc.outputCount("cep.out.lfl"); n != 0 {
		t.Errorf("%d records on cep.out.lfl over the max message size", n)
	}
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		for _, sh := range []string{"1", "2"} {
			if v := tc.metric(0, "cep_outbox_records", "shard", sh); v != 0 {
				return fmt.Errorf("shard %s: %v records in the outbox", sh, v)
			}
		}
		return nil
	})
	if v := tc.metric(0, "cep_outbox_refused_total", "cause", "server"); v != float64(len(want)) {
		t.Errorf("cep_outbox_refused_total{cause=server} = %v, want %d", v, len(want))
	}
	// the shards go on: with the limit lifted, the matches of later events
	// are published as the offline engine finds them
	cfg.MaxMsgSize = -1
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	more := bankEvents(14, 300)
	for i, l := range more {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		e["ts"] = e["ts"].(float64) + 2_000_000 // after every event before
		b, _ := json.Marshal(e)
		more[i] = string(b)
	}
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, more)
	if d := tc.newRecordsDiffer("cep.out.lfl", 0, lflSpec, more); d != "" {
		t.Fatalf("after the limit is lifted: %s", d)
	}
	tc.keepsNATS()
}

// A savepoint whose pattern publishes on a subject past the bound (an
// edited one: the checksums are valid) is refused as a deploy of it is,
// naming the bound, and the cluster stays as it was; its restore would
// otherwise put a subject NATS closes the connection for into every
// shard's outbox.
func TestSavepointWithLongOutputSubjectRefused(t *testing.T) {
	tc := newCluster(t, 2*time.Minute)
	spDir := filepath.Join(tc.base, "sp")
	a := tc.addOne(cluster.Config{DataDir: filepath.Join(tc.base, "a"), Shards: 2, SavepointDir: spDir})
	c, ctx := tc.client(a), tc.ctx
	tc.createBank(c)
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(lflSpec)})
	sp, err := c.savepoints.CreateSavepoint(ctx, req(&cepv1.CreateSavepointRequest{Target: "dir://" + filepath.Join(spDir, "good")}))
	if err != nil {
		t.Fatal(err)
	}
	id := sp.Msg.Savepoint.Id
	parts, _ := filepath.Glob(filepath.Join(spDir, "good", id+"-shard-*.ceps"))
	if len(parts) != 2 {
		t.Fatalf("savepoint %s: parts %v", id, parts)
	}
	dir := copyParts(t, parts, filepath.Join(spDir, "edited"))
	long := "cep.out." + strings.Repeat("o", 5000)
	for _, part := range parts {
		editPatterns(t, filepath.Join(dir, filepath.Base(part)), func(p *meta.Pattern) { p.OutputSubject = long })
	}
	// the edited parts carry no seal: restored as unsealed (as another
	// cluster's savepoint is), the metadata's bounds still hold
	_, err = c.savepoints.RestoreSavepoint(ctx, req(&cepv1.RestoreSavepointRequest{Savepoint: &cepv1.RestoreSavepointRequest_Location{Location: "dir://" + dir + "#" + id}, Unsealed: true}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "MaxSubjectBytes") || len(err.Error()) > 600 {
		t.Fatalf("restore of a savepoint with a 5,000-byte output subject: %v", err)
	}
	res, err := c.patterns.GetPattern(ctx, req(&cepv1.GetPatternRequest{Name: "lfl"}))
	if err != nil || res.Msg.Pattern.OutputSubject != "cep.out.lfl" {
		t.Fatalf("after the refused restore: %v %v", res, err)
	}
	tc.keepsNATS()
}
