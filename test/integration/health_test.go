package integration

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/grpchealth"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
)

// TestGRPCHealthFollowsReadyz checks that a node's gRPC health answers
// what its /readyz answers: SERVING in a running three-node cluster, and
// NOT_SERVING once the other two are gone and its shards have no leader
// (probes must not send traffic to a node that cannot serve it).
func TestGRPCHealthFollowsReadyz(t *testing.T) {
	tc := newPeers(t, 3, 2*time.Minute)
	tc.startAll()
	addr := tc.nodes[0].APIAddr()
	readyz := func() (int, string) {
		res, err := tc.hc.Get(tc.scheme + "://" + addr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	hc := grpchealth.NewClient(tc.hc, tc.scheme+"://"+addr)
	health := func(service string) grpchealth.Status {
		res, err := hc.Check(tc.ctx, &grpchealth.CheckRequest{Service: service})
		if err != nil {
			t.Fatalf("Check(%q): %v", service, err)
		}
		return res.Status
	}
	services := []string{"", cepv1connect.PatternServiceName, cepv1connect.ClusterServiceName}

	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz of a started cluster: %d %q", code, body)
	}
	for _, s := range services {
		if st := health(s); st != grpchealth.StatusServing {
			t.Fatalf("Check(%q) while /readyz is 200: %v", s, st)
		}
	}

	for _, i := range []int{1, 2} {
		if err := tc.stop(i); err != nil {
			t.Fatal(err)
		}
	}
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		if code, body := readyz(); code != http.StatusServiceUnavailable {
			return fmt.Errorf("/readyz without quorum: %d %q", code, body)
		}
		return nil
	})
	for _, s := range services {
		if st := health(s); st != grpchealth.StatusNotServing {
			t.Errorf("Check(%q) while /readyz is 503: %v", s, st)
		}
	}
	// still not ready after the checks, so they saw the same state
	if code, body := readyz(); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz after the checks: %d %q", code, body)
	}
}

// TestIngestLagPerShard checks that cep_ingest_lag_messages counts a
// shard's own messages only: after events for keys of one shard are
// applied, every shard's gauge reads 0, the idle ones included (counted
// against the whole stream, theirs never drained).
func TestIngestLagPerShard(t *testing.T) {
	tc, c := nodeWithSource(t, 3, 60*time.Second)
	spec := "name: pair\nsource: tx\nkey: e.account\ntime: e.ts\nstages:\n  - name: a\n    where: e.type == \"A\"\n  - name: b\n    where: e.type == \"B\"\n"
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: spec})
	var lines []string
	for i := range 5 {
		lines = append(lines, fmt.Sprintf(`{"account":"acc-0","type":"C","ts":%d}`, 1000+i))
	}
	tc.publish("tx", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		total := 0.0
		for s := 1; s <= 3; s++ {
			total += tc.metric(0, "cep_events_total", fmt.Sprintf(`shard="%d"`, s))
		}
		if total != float64(len(lines)) {
			return fmt.Errorf("%v events applied, want %d", total, len(lines))
		}
		return nil
	})
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		for s := 1; s <= 3; s++ {
			if lag := tc.metric(0, "cep_ingest_lag_messages", fmt.Sprintf(`shard="%d"`, s), `source="tx"`); lag != 0 {
				return fmt.Errorf("shard %d: lag %v once everything is applied", s, lag)
			}
		}
		return nil
	})
}

// TestIngestLagWhilePaused checks that, while one shard's leader does not
// read (its outbox at the limit, the output stream gone), its gauge shows
// its own unread events and the other shards' show none.
func TestIngestLagWhilePaused(t *testing.T) {
	const limit = 20
	tc := newSingle(t, 90*time.Second, cluster.Config{Shards: 3, IngestBatch: 5, OutboxLimit: limit})
	c := tc.client(0)
	if _, err := c.sources.CreateSource(tc.ctx, req(&cepv1.CreateSourceRequest{Name: "tx", Key: "e.account"})); err != nil {
		t.Fatal(err)
	}
	// every login is a match, so the outbox fills
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: "name: logins\nsource: tx\nkey: e.account\ntime: e.ts\nstages:\n  - name: login\n    where: e.type == \"LOGIN\"\n"})
	js := tc.jetStream()
	if err := js.DeleteStream(tc.ctx, cluster.OutputStream); err != nil {
		t.Fatal(err)
	}
	const published = 600
	var lines []string
	for i := range published {
		lines = append(lines, fmt.Sprintf(`{"account":"acc-0","type":"LOGIN","ts":%d}`, 1000+i))
	}
	keyOf := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	// the matches come as the source's clock passes the logins, a moment
	// after they were read: the first half fills the outbox past its
	// limit, the second is then not read
	tc.publish("tx", keyOf, lines[:published/2])
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		for s := 1; s <= 3; s++ {
			if n := tc.metric(0, "cep_outbox_records", fmt.Sprintf(`shard="%d"`, s)); n >= limit {
				return nil
			}
		}
		return fmt.Errorf("no outbox at its limit (%d) yet", limit)
	})
	tc.publish("tx", keyOf, lines[published/2:])

	// the shard of acc-0 is the one that applied events
	own := ""
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		for s := 1; s <= 3; s++ {
			l := fmt.Sprintf(`shard="%d"`, s)
			if p, _ := tc.metricValue(0, "cep_read_paused", l, `reason="outbox"`); p == 1 {
				own = l
				return nil
			}
		}
		return fmt.Errorf("no shard paused on its outbox")
	})
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		before := tc.metric(0, "cep_events_total", own)
		lag := tc.metric(0, "cep_ingest_lag_messages", own, `source="tx"`)
		after := tc.metric(0, "cep_events_total", own)
		if before != after {
			return fmt.Errorf("still applying: %v then %v events", before, after)
		}
		if after >= published || lag != published-after {
			return fmt.Errorf("%s: lag %v with %v of %d events applied", own, lag, after, published)
		}
		return nil
	})
	for s := 1; s <= 3; s++ {
		if l := fmt.Sprintf(`shard="%d"`, s); l != own {
			if lag := tc.metric(0, "cep_ingest_lag_messages", l, `source="tx"`); lag != 0 {
				t.Errorf("%s, with none of the events: lag %v", l, lag)
			}
		}
	}

	// with the stream back, the shard reads the rest and its gauge drains
	if err := cluster.EnsureOutputStream(tc.ctx, js, cluster.OutputLimits{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		if lag := tc.metric(0, "cep_ingest_lag_messages", own, `source="tx"`); lag != 0 {
			return fmt.Errorf("%s: lag %v after resuming", own, lag)
		}
		return nil
	})
}
