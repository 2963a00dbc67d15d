package integration

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/transport"
	"github.com/cepcluster/cep/internal/testcerts"
	"github.com/cepcluster/cep/internal/testutil"
)

// Three nodes with certificates of one CA form a cluster over mutual TLS
// (Raft) and HTTPS (API, the nodes' calls to each other included): a
// pattern deployed through a node that does not lead the metadata group is
// forwarded, and the output equals the offline engine's. The API refuses
// plain HTTP, and a client that does not trust the CA.
func TestThreeNodesOverTLS(t *testing.T) {
	tc := newPeers(t, 3, 90*time.Second)
	ctx, cfgs := tc.ctx, tc.cfgs
	ca, err := testcerts.NewAuthority(t.TempDir(), "cep")
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfgs {
		f, err := ca.Issue(cfgs[i].NodeID)
		if err != nil {
			t.Fatal(err)
		}
		if cfgs[i].TLS, err = transport.LoadTLS(f.Cert, f.Key, f.CA, nil); err != nil {
			t.Fatal(err)
		}
	}
	tc.startAll()
	tc.useHTTPS(ca.CA)
	var follower *cluster.Node
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		for _, n := range tc.nodes {
			if n.IsMetaLeader() {
				return nil
			}
		}
		return errors.New("no metadata leader")
	})
	for _, n := range tc.nodes {
		if !n.IsMetaLeader() {
			follower = n
		}
	}
	base2 := "https://" + follower.APIAddr()
	c := tc.clients(follower.APIAddr())
	tc.createBank(c)
	if _, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: string(lflSpec)})); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		res, err := c.cluster.ListShards(ctx, req(&cepv1.ListShardsRequest{}))
		if err != nil {
			return err
		}
		for _, sh := range res.Msg.Shards {
			if sh.LeaderNodeId == "" || sh.Patterns == 0 {
				return fmt.Errorf("shard %d: leader %q, %d patterns", sh.Id, sh.LeaderNodeId, sh.Patterns)
			}
		}
		return nil
	})

	tc.publishAndCompare(lflSpec, "cep.out.lfl", bankEvents(7, 400), 30*time.Second)

	// plain TCP to the Raft port, with a valid stream header for the
	// metadata group: dropped (a plain mux would hand it to Raft)
	conn, err := net.Dial("tcp", cfgs[0].RaftAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("CEPR\x01\x00"))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("plain TCP on the Raft port: %v, want the connection closed", err)
	}

	// plain HTTP to the API port, and HTTPS without trusting the CA
	plain := cepv1connect.NewClusterServiceClient(http.DefaultClient, "http://"+follower.APIAddr())
	if _, err := plain.GetStatus(ctx, req(&cepv1.GetStatusRequest{})); err == nil {
		t.Fatal("the API answered plain HTTP")
	}
	untrusting := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}
	t.Cleanup(untrusting.CloseIdleConnections)
	_, err = cepv1connect.NewClusterServiceClient(&http.Client{Transport: untrusting}, base2).GetStatus(ctx, req(&cepv1.GetStatusRequest{}))
	if err == nil || connect.CodeOf(err) != connect.CodeUnavailable || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client not trusting the CA: %v", err)
	}
}
