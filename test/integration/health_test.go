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
