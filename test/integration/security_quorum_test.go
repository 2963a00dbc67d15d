package integration

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/gossip"
	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/internal/clusterversion"
	"github.com/cepcluster/cep/internal/testutil"
)

// quorumGossipKey is the gossip key of the nodes here, which the fake
// member has too: the attack is by a process that got into the gossip.
var quorumGossipKey = []byte("0123456789abcdef")

// fakeMember joins a node's gossip as a member whose API answers health
// checks (which is all registering a node asks of it) and nothing else,
// and whose Raft address nothing listens on. It proves the cluster secret
// (without it, it would never be registered): a node that crashed half
// started, or a process that has the secret and runs no Raft.
type fakeMember struct {
	id  string
	api *httptest.Server
	g   *gossip.Gossip
}

func startFakeMember(t *testing.T, id, join string, s secret.Secret) *fakeMember {
	t.Helper()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			return // 200
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(api.Close)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := l.Addr().String()
	l.Close() // refused from now on
	g, err := gossip.Start(gossip.Config{NodeID: id, BindAddr: "127.0.0.1:0", RaftAddr: raftAddr, APIAddr: strings.TrimPrefix(api.URL, "http://"),
		Fast: true, SecretKey: quorumGossipKey, Fresh: true, Proto: 1 << 20, Version: int(clusterversion.Highest), // it claims this release
		Prove: func(c gossip.Claim) string { return hex.EncodeToString(s.MAC(secret.Member, c.Bytes())) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if _, err := g.Join([]string{join}); err != nil {
		t.Fatalf("fake member joining the gossip at %s: %v", join, err)
	}
	return &fakeMember{id: id, api: api, g: g}
}

// vanish stops the fake member without a word: its gossip and its API go
// silent.
func (f *fakeMember) vanish() {
	f.g.Close()
	f.api.Close()
}

// quorumWatch samples, every poll, the metadata group of some nodes: who
// votes and whether one of them leads; stop ends it and returns what it
// saw that breaks the group (a fake member voting, no leader).
type quorumWatch struct {
	once    sync.Once
	stopped chan struct{}
	done    sync.WaitGroup
	mu      sync.Mutex
	bad     []string
}

func watchQuorum(t *testing.T, nodes func() []*cluster.Node, fakes ...string) *quorumWatch {
	w := &quorumWatch{stopped: make(chan struct{})}
	t.Cleanup(func() { w.stop(t) }) // before the nodes close, when the test fails first
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		var leaderless time.Time // since when no node leads
		for {
			led := false
			for _, n := range nodes() {
				led = led || n.IsMetaLeader()
				voters, _, err := n.MetaServers()
				for _, f := range fakes {
					if err == nil && slices.Contains(voters, f) {
						w.report(fmt.Sprintf("fake member %s votes on %s: %v", f, n.Config().NodeID, voters))
					}
				}
			}
			switch {
			case led:
				leaderless = time.Time{}
			case leaderless.IsZero():
				leaderless = time.Now()
			case time.Since(leaderless) > 3*time.Second: // several election timeouts
				w.report("no metadata leader for 3 s")
			}
			select {
			case <-w.stopped:
				return
			case <-time.After(poll):
			}
		}
	}()
	return w
}

func (w *quorumWatch) report(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.Contains(w.bad, s) && len(w.bad) < 10 {
		w.bad = append(w.bad, s)
	}
}

func (w *quorumWatch) stop(t *testing.T) {
	t.Helper()
	w.once.Do(func() {
		close(w.stopped)
		w.done.Wait()
		for _, s := range w.bad {
			t.Error(s)
		}
	})
}

// waitNonvoter waits until node n has member id in its metadata group, as
// a non-voter.
func waitNonvoter(t *testing.T, n *cluster.Node, id string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		voters, nonvoters, err := n.MetaServers()
		if err != nil || !slices.Contains(nonvoters, id) {
			return fmt.Errorf("%s not a non-voter of the metadata group: voters %v, non-voters %v, %v", id, voters, nonvoters, err)
		}
		return nil
	})
}

// deployQuickly deploys a pattern named name through c, giving up after
// 10 s (a group without a leader refuses at once).
func deployQuickly(tc *testCluster, c clients, name string) error {
	ctx, cancel := context.WithTimeout(tc.ctx, 10*time.Second)
	defer cancel()
	spec := strings.Replace(string(lflSpec), "name: lfl", "name: "+name, 1)
	res, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: spec}))
	if err != nil {
		return fmt.Errorf("deploying %s: %w", name, err)
	}
	if p := res.Msg.PendingShards; len(p) > 0 {
		return fmt.Errorf("deploying %s: shards %v not running it", name, p)
	}
	return nil
}

// One node; a member appears in its gossip, answers health checks but
// runs no Raft, and vanishes. It never votes in the metadata group (the
// node promoted it at once: a second voter that never answers leaves the
// node without a majority, then and after a restart), and the node leads
// throughout, takes deploys after the dead-after time and again after a
// restart.
func TestQuorumSingleNodeOutlivesAFakeMember(t *testing.T) {
	const deadAfter = 2 * time.Second
	tc := newSingle(t, 3*time.Minute, cluster.Config{GossipKey: quorumGossipKey, DeadAfter: deadAfter, Testing: &cluster.Testing{FastGossip: true}})
	n := tc.nodes[0]
	c := tc.client(0)
	tc.createBank(c)
	w := watchQuorum(t, func() []*cluster.Node { return []*cluster.Node{n} }, "intruder")

	f := startFakeMember(t, "intruder", n.GossipAddr(), tc.secret)
	waitNonvoter(t, n, "intruder")
	f.vanish()
	waitNoServer(t, n, "intruder") // down once the dead-after time is over
	if err := deployQuickly(tc, c, "after"); err != nil {
		t.Error(err)
	}
	w.stop(t)

	n = tc.restart(0)
	w = watchQuorum(t, func() []*cluster.Node { return []*cluster.Node{n} }, "intruder")
	testutil.Eventually(t, 10*time.Second, func() error {
		if !n.IsMetaLeader() {
			return errors.New("the node restarted does not lead its metadata group")
		}
		return nil
	})
	if err := deployQuickly(tc, tc.client(0), "restarted"); err != nil {
		t.Error(err)
	}
	if voters, _, err := n.MetaServers(); err != nil || !slices.Equal(voters, []string{"n1"}) {
		t.Errorf("voters after the restart: %v, %v", voters, err)
	}
	w.stop(t)
}

// waitNoServer waits until node n's metadata group does not have member
// id: the leader removes a member down.
func waitNoServer(t *testing.T, n *cluster.Node, id string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		voters, nonvoters, err := n.MetaServers()
		if err != nil || slices.Contains(voters, id) || slices.Contains(nonvoters, id) {
			return fmt.Errorf("%s still in the metadata group: voters %v, non-voters %v, %v", id, voters, nonvoters, err)
		}
		return nil
	})
}

// Three nodes; a member appears in the gossip that answers health checks
// but runs no Raft, one real node (the metadata leader) is killed, and the
// member vanishes. The fake member never votes (the node promoted it as
// soon as the killed one was down, into a group of four of which two
// answered: no majority), the two nodes left keep a metadata leader and
// take deploys, and once the killed node is back, the three vote again.
func TestQuorumThreeNodesOutliveAFakeMemberAndADeadOne(t *testing.T) {
	tc := newPeers(t, 3, 3*time.Minute)
	for i := range tc.cfgs {
		tc.cfgs[i].DeadAfter = 2 * time.Second
		tc.cfgs[i].GossipKey = quorumGossipKey
	}
	tc.startAll()
	tc.createBank(tc.client(0))
	var killed int
	testutil.Eventually(t, 10*time.Second, func() error {
		for i, n := range tc.nodes {
			if n.IsMetaLeader() {
				killed = i
				return nil
			}
		}
		return errors.New("no metadata leader")
	})
	var left []*cluster.Node
	var leftAt []int
	for i, n := range tc.nodes {
		if i != killed {
			left, leftAt = append(left, n), append(leftAt, i)
		}
	}
	w := watchQuorum(t, func() []*cluster.Node { return left }, "intruder")

	f := startFakeMember(t, "intruder", left[0].GossipAddr(), tc.secret)
	waitNonvoter(t, left[0], "intruder")
	killedID := tc.cfgs[killed].NodeID
	tc.stop(killed)
	waitNoServer(t, left[0], killedID) // down once the dead-after time is over
	f.vanish()
	waitNoServer(t, left[0], "intruder")
	for _, i := range leftAt {
		if err := deployQuickly(tc, tc.client(i), fmt.Sprintf("through-%d", i)); err != nil {
			t.Error(err)
		}
	}
	w.stop(t)

	tc.start(killed)
	testutil.Eventually(t, time.Minute, func() error {
		voters, _, err := left[0].MetaServers()
		if slices.Sort(voters); err != nil || !slices.Equal(voters, []string{"n1", "n2", "n3"}) {
			return fmt.Errorf("voters once %s is back: %v, %v", killedID, voters, err)
		}
		return nil
	})
}
