package integration

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/grpchealth"

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
