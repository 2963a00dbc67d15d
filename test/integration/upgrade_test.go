package integration

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/internal/clusterversion"
	"github.com/cepcluster/cep/internal/testutil"
)

// A cluster whose every member runs this release moves its version from
// Base up to this release's Highest by itself, and status says so for
// every node; a version above what the release reads (as a later release
// would log it) stops every node with one line saying so, and a node
// started again on that metadata does not run.
func TestClusterVersionMovesAndStopsOlderNodes(t *testing.T) {
	tc := newPeers(t, 3, 3*time.Minute)
	tc.startAll()
	c := tc.client(0)
	testutil.EventuallyEvery(t, time.Minute, poll, func() error {
		res, err := c.cluster.GetStatus(tc.ctx, req(&cepv1.GetStatusRequest{}))
		if err != nil {
			return err
		}
		if v := res.Msg.GetSummary().GetClusterVersion(); v != uint32(clusterversion.Highest) {
			return fmt.Errorf("cluster version v%d", v)
		}
		for _, nd := range res.Msg.GetNodes() {
			if nd.GetHighestVersion() != uint32(clusterversion.Highest) || nd.GetVersion() == "" {
				return fmt.Errorf("node %s: release %q, writes v%d", nd.GetId(), nd.GetVersion(), nd.GetHighestVersion())
			}
		}
		return nil
	})
	for _, n := range tc.nodes {
		testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
			if v := n.Meta().ActiveVersion(); v != clusterversion.Highest {
				return fmt.Errorf("a replica of the metadata at %v", v)
			}
			return nil
		})
	}

	later := clusterversion.Highest + 1
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		for _, n := range tc.nodes {
			if n.IsMetaLeader() {
				_, err := n.Propose(tc.ctx, meta.SetClusterVersion{Version: uint32(later), Expect: uint32(clusterversion.Highest)})
				return err
			}
		}
		return errors.New("no metadata leader")
	})
	for i, n := range tc.nodes {
		select {
		case err := <-n.Failed():
			checkVersionLine(t, tc.cfgs[i].NodeID, err, later)
		case <-time.After(30 * time.Second):
			t.Fatalf("node %s runs on under cluster version %v", tc.cfgs[i].NodeID, later)
		}
	}

	// started again: refused at start when its snapshot holds the
	// version, else as soon as its log replays it
	tc.stop(0)
	n, err := cluster.Start(tc.ctx, tc.cfgs[0])
	if err != nil {
		checkVersionLine(t, tc.cfgs[0].NodeID+" at start", err, later)
		return
	}
	tc.nodes[0] = n
	select {
	case err := <-n.Failed():
		checkVersionLine(t, tc.cfgs[0].NodeID+" started again", err, later)
	case <-time.After(30 * time.Second):
		t.Fatalf("node %s started again runs under cluster version %v", tc.cfgs[0].NodeID, later)
	}
}

// checkVersionLine checks that err is the one line a node stops with under
// an active version its release cannot read.
func checkVersionLine(t *testing.T, who string, err error, active clusterversion.Version) {
	t.Helper()
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "active version is "+active.String()) ||
		!strings.Contains(err.Error(), "up to "+clusterversion.Highest.String()) {
		t.Errorf("%s: %v", who, err)
	}
}
