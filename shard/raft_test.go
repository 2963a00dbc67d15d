package shard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/internal/testutil"
)

// testRaftConfig shortens raft's timeouts for tests, as the integration
// tests do: with a 50ms lease a leader on a loaded machine (CI with other
// test binaries) lost its leadership while committing.
func testRaftConfig() *raft.Config {
	c := DefaultRaftConfig()
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 200 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 2 * time.Millisecond
	return c
}

type replicaSet struct {
	t      *testing.T
	dirs   []string
	trans  []*raft.InmemTransport
	shards []*Shard
}

func newReplicaSet(t *testing.T, n int) *replicaSet {
	rs := &replicaSet{t: t}
	var servers []raft.Server
	for i := 0; i < n; i++ {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("n%d", i)))
		rs.trans = append(rs.trans, tr)
		rs.dirs = append(rs.dirs, t.TempDir())
		servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i)), Address: addr})
	}
	for i := range rs.trans {
		for j := range rs.trans {
			if i != j {
				rs.trans[i].Connect(rs.trans[j].LocalAddr(), rs.trans[j])
			}
		}
	}
	for i := 0; i < n; i++ {
		rs.open(i, servers)
	}
	t.Cleanup(func() {
		for _, s := range rs.shards {
			if s != nil {
				s.Close()
			}
		}
	})
	return rs
}

func (rs *replicaSet) open(i int, servers []raft.Server) {
	s, err := Open(Config{ID: 1, First: 0, Last: 15, Groups: 16, ClusterID: "c", Dir: rs.dirs[i], LocalID: fmt.Sprintf("n%d", i),
		Transport: rs.trans[i], Bootstrap: servers, Raft: testRaftConfig()})
	if err != nil {
		rs.t.Fatal(err)
	}
	if i < len(rs.shards) {
		rs.shards[i] = s
	} else {
		rs.shards = append(rs.shards, s)
	}
}

func (rs *replicaSet) leader() *Shard {
	var l *Shard
	testutil.Eventually(rs.t, 5*time.Second, func() error {
		for _, s := range rs.shards {
			if s != nil && s.IsLeader() {
				l = s
				return nil
			}
		}
		return fmt.Errorf("no leader")
	})
	return l
}

// propose proposes b through the leader, through the next one when
// leadership moves meanwhile (a loaded machine misses heartbeats), as a
// client does: an entry whose commit was not seen may be applied twice,
// which replicas do alike.
func (rs *replicaSet) propose(ctx context.Context, b *Batch) {
	rs.t.Helper()
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if err = rs.leader().Propose(ctx, b); !errors.Is(err, ErrNotLeader) {
			break
		}
	}
	if err != nil {
		rs.t.Fatal(err)
	}
}

// After a new leader's barrier the state machine's applied index is the
// last index of the log on every replica: the status shows it level with
// the commit index, not behind it by the entries Raft keeps from the state
// machine (the bootstrap configuration, the new leader's no-op).
func TestBarrierBringsAppliedIndexToTheLogEnd(t *testing.T) {
	rs := newReplicaSet(t, 3)
	l := rs.leader()
	if err := l.Barrier(context.Background(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	last := l.Raft().LastIndex()
	if last < 3 {
		t.Fatalf("last index %d: want the configuration, the no-op and the barrier", last)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		for i, s := range rs.shards {
			if got := s.FSM().Index(); got != last {
				return fmt.Errorf("replica n%d applied up to %d, the log ends at %d", i, got, last)
			}
		}
		return nil
	})
}

// Replicas of a shard that applied the same log hold byte-identical state,
// and a restarted replica recovers its state from disk.
func TestRaftReplicasAndRestart(t *testing.T) {
	rs := newReplicaSet(t, 3)
	l := rs.leader()
	ctx := context.Background()
	for _, b := range randomLog(3, 40) {
		rs.propose(ctx, b)
	}
	l = rs.leader()
	snapOf := func(s *Shard) []byte {
		var out []byte
		s.FSM().View(func(st *State, _ uint64) { out = snap(t, st, "s") })
		return out
	}
	var want []byte
	testutil.Eventually(t, 5*time.Second, func() error {
		want = snapOf(l)
		for i, s := range rs.shards {
			if got := snapOf(s); !bytes.Equal(got, want) {
				return fmt.Errorf("replica n%d differs from the leader", i)
			}
		}
		return nil
	})
	var outbox int
	l.FSM().View(func(st *State, _ uint64) { outbox = len(st.Outbox()) })
	if outbox == 0 {
		t.Fatal("nothing produced")
	}
	// snapshot one follower, restart it, and check it recovers
	var f int
	for i, s := range rs.shards {
		if s != l {
			f = i
			break
		}
	}
	if err := rs.shards[f].Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	rs.shards[f].Close()
	rs.shards[f] = nil
	rs.open(f, nil)
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := snapOf(rs.shards[f]); !bytes.Equal(got, want) {
			return fmt.Errorf("restarted replica has not recovered")
		}
		return nil
	})
	if err := rs.shards[f].Propose(ctx, &Batch{Ops: []Op{AckOp{Seq: 1}}}); err == nil || !strings.Contains(err.Error(), "not leader") {
		if !rs.shards[f].IsLeader() {
			t.Fatalf("propose on a follower: %v", err)
		}
	}
}

// A snapshot directory raft left unfinished (a crash, a full disk) is
// removed when the replica opens; finished snapshots stay, and the replica
// recovers from them.
func TestOpenRemovesUnfinishedSnapshots(t *testing.T) {
	rs := newReplicaSet(t, 1)
	l := rs.leader()
	ctx := context.Background()
	for _, b := range randomLog(5, 20) {
		if err := l.Propose(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	rs.shards[0] = nil
	snaps := filepath.Join(rs.dirs[0], "snapshots")
	left := filepath.Join(snaps, "2-9-1796008112642.tmp")
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(left, "state.bin"), []byte("partial"), 0o644)
	rs.open(0, nil)
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("the unfinished snapshot is still there: %v", err)
	}
	ents, _ := os.ReadDir(snaps)
	if len(ents) == 0 {
		t.Fatal("the finished snapshot was removed too")
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if !rs.shards[0].IsLeader() {
			return fmt.Errorf("no leader after reopening")
		}
		return nil
	})
}
