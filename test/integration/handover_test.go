package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/shard"
)

// A shard's leadership goes back to its preferred replica after that
// replica restarts, but only once the replica has applied the log: taking
// over while still applying a backlog, it would read and publish nothing
// until it had caught up. The restarted node applies every log entry
// slowly (an injected fault), so it lags for seconds; it must become leader
// of its preferred shard again, within a few entries of the log's end, and
// the output must stay the offline engine's.
func TestHandOverWaitsForCatchUp(t *testing.T) {
	lr := startLflRun(t, 7)

	// the shard n1 is preferred for: once leadership has settled (the same
	// shards led by the same nodes a second apart), each node leads the
	// one it is preferred for
	led := func() string {
		var b strings.Builder
		for _, n := range lr.nodes {
			for _, sh := range n.Shards() {
				if sh.Raft().State() == raft.Leader {
					fmt.Fprintf(&b, "%s:%d ", n.Config().NodeID, sh.ID())
				}
			}
		}
		return b.String()
	}
	var id uint64
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		before := led()
		time.Sleep(time.Second)
		after := led()
		if after != before || strings.Count(after, ":") != 3 {
			return fmt.Errorf("leadership not settled: %q then %q", before, after)
		}
		if !strings.HasPrefix(after, "n1:") || strings.Count(after, "n1:") != 1 {
			return fmt.Errorf("n1 does not lead exactly one shard: %q", after)
		}
		for _, sh := range lr.nodes[0].Shards() {
			if sh.Raft().State() == raft.Leader {
				id = sh.ID()
			}
		}
		return nil
	})

	// n1 comes back, applying each entry 20 ms late
	n1 := lr.restartBehind(20 * time.Millisecond)
	var sh *shard.Shard
	for _, s := range n1.Shards() {
		if s.ID() == id {
			sh = s
		}
	}
	behind := func() (commit, applied uint64) {
		commit, _ = strconv.ParseUint(sh.Raft().Stats()["commit_index"], 10, 64)
		return commit, sh.FSM().Index()
	}
	maxBehind := uint64(0)
	deadline := time.Now().Add(90 * time.Second)
	for sh.Raft().State() != raft.Leader {
		if time.Now().After(deadline) {
			commit, applied := behind()
			t.Fatalf("n1 did not lead shard %d again (commit %d, applied %d)", id, commit, applied)
		}
		if commit, applied := behind(); commit > applied {
			maxBehind = max(maxBehind, commit-applied)
		}
		time.Sleep(2 * time.Millisecond)
	}
	commit, applied := behind()
	t.Logf("n1 leads shard %d again: commit %d, applied %d; it was up to %d entries behind", id, commit, applied, maxBehind)
	if maxBehind < 50 {
		t.Fatalf("n1 was at most %d entries behind after its restart: the test needs a backlog", maxBehind)
	}
	// the transfer waited for n1 to catch up: it leads with at most a few
	// entries (a hand-over's margin, the proposals in flight) to apply
	if commit > applied+16 {
		t.Fatalf("n1 became leader of shard %d with %d entries still to apply", id, commit-applied)
	}
	lr.checkOutput()

	// A node closed while it leads a shard it is still catching up on
	// closes. n1 restarts once more, slower, and is made leader by hand at
	// once; its session waits for the state machine (the barrier), and
	// Close shuts Raft down meanwhile, which drops the barrier's future
	// unresolved: Close used to wait for that session for ever. It returns
	// once Raft's state machine goroutine has finished the batch it was
	// applying. (Whether Raft drops the barrier depends on a race inside it
	// — its state machine goroutine may take the barrier's batch before it
	// sees the shutdown — so this catches a regression only some of the
	// time; shard's TestWaitEndsWithItsContext checks the mechanism.)
	lr.stop(0)
	n1 = lr.startSlow(50 * time.Millisecond)
	for _, s := range n1.Shards() {
		if s.ID() == id {
			sh = s
		}
	}
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		for _, n := range lr.nodes[1:] {
			for _, s := range n.Shards() {
				if s.ID() == id && s.Raft().State() == raft.Leader {
					addr := raft.ServerAddress(lr.cfgs[0].RaftAddr)
					if err := s.Raft().LeadershipTransferToServer("n1", addr).Error(); err != nil {
						return err
					}
				}
			}
		}
		if sh.Raft().State() != raft.Leader {
			return fmt.Errorf("n1 does not lead shard %d", id)
		}
		return nil
	})
	if commit, applied := behind(); commit < applied+50 {
		t.Fatalf("n1 leads shard %d %d entries behind: the test needs it catching up", id, commit-applied)
	}
	closed := make(chan error, 1)
	go func() { closed <- n1.Close() }()
	select {
	case err := <-closed:
		lr.nodes[0] = nil
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		commit, applied := behind()
		t.Fatalf("Close of the catching-up leader has not returned after 30 s (commit %d, applied %d)", commit, applied)
	}
}

// A node that is closed (a planned stop, a rolling restart) hands the
// leadership of its shards to another replica first: followers notice a
// silent leader only after a heartbeat timeout (1 s here, so that an
// election cannot pass for a transfer), but a transfer has a new leader in
// place by the time Close returns.
func TestCloseHandsLeadershipOver(t *testing.T) {
	tc := newPeers(t, 3, 2*time.Minute)
	for i := range tc.cfgs {
		tc.cfgs[i].Raft = shard.DefaultRaftConfig()
		tc.cfgs[i].Raft.HeartbeatTimeout = time.Second
		tc.cfgs[i].Raft.LeaderLeaseTimeout = time.Second
	}
	tc.startAll()
	var led []uint64 // shards n2 leads
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		led = led[:0]
		for _, sh := range tc.nodes[1].Shards() {
			if sh.Raft().State() == raft.Leader {
				led = append(led, sh.ID())
			}
		}
		if len(led) == 0 {
			return fmt.Errorf("n2 leads no shard yet")
		}
		return nil
	})
	if err := tc.stop(1); err != nil {
		t.Fatal(err)
	}
	closed := time.Now()
	for _, id := range led {
		for {
			leader := ""
			for _, n := range []*cluster.Node{tc.nodes[0], tc.nodes[2]} {
				for _, sh := range n.Shards() {
					if sh.ID() == id && sh.Raft().State() == raft.Leader {
						leader = n.Config().NodeID
					}
				}
			}
			if leader != "" {
				break
			}
			if since := time.Since(closed); since > 500*time.Millisecond {
				t.Fatalf("shard %d has no leader %v after n2 closed (an election after the leader's silence takes 1 s at least)", id, since.Round(time.Millisecond))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// A replica that becomes leader while it still has much of the log to
// apply (restarted a moment ago, replaying) hands leadership to a replica
// that has applied more, instead of leading without reading or publishing
// until it has caught up. n1 restarts applying every entry 50 ms late and
// is made leader of a shard by hand; leadership must leave it while it is
// still far behind, and the output must stay the offline engine's.
func TestLaggingLeaderHandsOff(t *testing.T) {
	lr := startLflRun(t, 11)
	n1 := lr.restartBehind(50 * time.Millisecond)

	// n1's replica of shard 1 is made leader by hand, as soon as it holds
	// the log (a transfer needs that), while it is far from applying it
	var sh *shard.Shard
	for _, s := range n1.Shards() {
		if s.ID() == 1 {
			sh = s
		}
	}
	behind := func() uint64 {
		commit, _ := strconv.ParseUint(sh.Raft().Stats()["commit_index"], 10, 64)
		return commit - min(commit, sh.FSM().Index())
	}
	led := false
	deadline := time.Now().Add(30 * time.Second)
	for !led {
		if time.Now().After(deadline) {
			t.Fatalf("n1 never led shard 1 (%d entries behind)", behind())
		}
		for _, n := range lr.nodes[1:] {
			for _, s := range n.Shards() {
				if s.ID() == 1 && s.Raft().State() == raft.Leader {
					_ = s.Raft().LeadershipTransferToServer("n1", raft.ServerAddress(lr.cfgs[0].RaftAddr)).Error()
				}
			}
		}
		for range 100 {
			if sh.Raft().State() == raft.Leader {
				led = true
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	lag := behind()
	t.Logf("n1 leads shard 1 with %d entries to apply", lag)
	if lag < 2*64 {
		t.Fatalf("n1 leads shard 1 only %d entries behind: the test needs a backlog", lag)
	}
	// it hands leadership on within a few seconds, long before it could
	// have applied its backlog (50 ms an entry)
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		if sh.Raft().State() == raft.Leader {
			return fmt.Errorf("n1 still leads shard 1, %d entries behind", behind())
		}
		return nil
	})
	if left := behind(); left < 32 {
		t.Fatalf("n1 gave up shard 1 only %d entries behind: not because it lagged", left)
	}
	lr.checkOutput()
}

// lflRun is three nodes in process running lflSpec over the bank source,
// with log entries of ten events at most (so that a replica can be made
// to lag by hundreds of them), and the 3,000 events they are fed.
type lflRun struct {
	*testCluster
	lines []string
}

// startLflRun starts the nodes, deploys the pattern and publishes the
// first 100 events.
func startLflRun(t *testing.T, seed uint64) *lflRun {
	tc := newPeers(t, 3, 3*time.Minute)
	for i := range tc.cfgs {
		tc.cfgs[i].IngestBatch, tc.cfgs[i].HandOverAfter, tc.cfgs[i].APIToken = 10, 200*time.Millisecond, "s3cret"
	}
	tc.startAll()
	lr := &lflRun{testCluster: tc, lines: bankEvents(seed, 3000)}
	c := lr.client(1, api.WithClientToken("s3cret"))
	lr.createBank(c)
	if _, err := c.patterns.DeployPattern(lr.ctx, req(&cepv1.DeployPatternRequest{Spec: string(lflSpec)})); err != nil {
		t.Fatal(err)
	}
	lr.publishBank(lr.lines[:100])
	return lr
}

func (lr *lflRun) publishBank(lines []string) {
	lr.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
}

// startSlow starts n1 again with every log entry applied d late.
func (lr *lflRun) startSlow(d time.Duration) *cluster.Node {
	knobs := *lr.cfgs[0].Testing // the other nodes' knobs stay as they are
	knobs.ApplyDelay = d
	lr.cfgs[0].Testing = &knobs
	return lr.start(0)
}

// restartBehind stops n1 while the others work through most of the
// events, starts it again applying every entry d late (hundreds of entries
// to go), and publishes the rest of the events.
func (lr *lflRun) restartBehind(d time.Duration) *cluster.Node {
	lr.stop(0)
	lr.publishBank(lr.lines[100:2500])
	// (the last records of a prefix wait for a watermark the prefix does
	// not reach)
	lr.waitOutputs("cep.out.lfl", len(offline(lr.t, lflSpec, lr.lines[:2500]))*9/10, 60*time.Second)
	n1 := lr.startSlow(d)
	lr.publishBank(lr.lines[2500:])
	return n1
}

// checkOutput waits for the whole output and compares it with the offline
// engine's.
func (lr *lflRun) checkOutput() {
	want := withoutIDs(offline(lr.t, lflSpec, lr.lines))
	got := withoutIDs(lr.waitOutputs("cep.out.lfl", len(want), 90*time.Second))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		lr.t.Fatalf("output (%d records) differs from the offline engine (%d)", len(got), len(want))
	}
}
