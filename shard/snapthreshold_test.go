package shard

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/internal/testutil"
)

func TestSnapshotThreshold(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		encode, busy time.Duration
		entries, min uint64
		want         uint64
	}{
		{encode: ms, busy: 256 * ms, entries: 256, min: 256, want: 256},       // cheap snapshots: the configured floor
		{encode: 100 * ms, busy: 256 * ms, entries: 256, min: 256, want: 500}, // 5 × 100 ms of applying at 1 ms an entry
		{encode: 2 * time.Second, busy: 512 * ms, entries: 256, min: 256, want: 5000},
		{encode: time.Hour, busy: ms, entries: 256, min: 256, want: maxSnapshotThreshold},
		{encode: time.Second, busy: 0, entries: 0, min: 64, want: 64}, // nothing applied since the last one
		{encode: time.Hour, busy: ms, entries: 1, min: 1 << 20, want: 1 << 20},
	} {
		if got := snapshotThreshold(c.encode, c.busy, c.entries, c.min); got != c.want {
			t.Errorf("snapshotThreshold(encode %v, busy %v, %d entries, min %d) = %d, want %d", c.encode, c.busy, c.entries, c.min, got, c.want)
		}
	}
}

// A shard whose snapshots take long (a large state) lets more entries
// accumulate before the next one, so that encoding snapshots stays a
// bounded share of the state machine's time; a cheap snapshot brings the
// configured threshold back.
func TestSlowSnapshotsRaiseTheThreshold(t *testing.T) {
	addr, tr := raft.NewInmemTransport("n0")
	cfg := Config{ID: 1, First: 0, Last: 15, Groups: 16, ClusterID: "c", Dir: t.TempDir(), LocalID: "n0",
		Transport: tr, Bootstrap: []raft.Server{{ID: "n0", Address: addr}}, Raft: testRaftConfig(),
		Testing: &Testing{ApplyDelay: 2 * time.Millisecond, SnapshotDelay: 200 * time.Millisecond}}
	cfg.Raft.SnapshotThreshold = 16
	cfg.Raft.SnapshotInterval = time.Hour // only the snapshots the test takes
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	testutil.Eventually(t, 5*time.Second, func() error {
		if !s.IsLeader() {
			return fmt.Errorf("not leader yet")
		}
		return nil
	})
	ctx := context.Background()
	apply := func(n int) {
		for i := range n {
			if err := s.Propose(ctx, &Batch{Ops: []Op{AckOp{Seq: uint64(i + 1)}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	threshold := func() uint64 { return s.Raft().ReloadableConfig().SnapshotThreshold }
	apply(20)
	if err := s.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	// ~2 ms an entry, 200 ms an encoding: 5 × 200 / 2 = ~500 entries
	// (fewer when applying takes longer than its injected delay)
	if got := threshold(); got < 200 || got > 500 {
		t.Fatalf("after a 200 ms snapshot at ~2 ms an entry the threshold is %d, want 200-500", got)
	}
	if got := s.FSM().LastSnapshotEncode(); got < 200*time.Millisecond {
		t.Fatalf("the last snapshot's encoding is reported as %v, want at least the injected 200 ms", got)
	}
	s.fsm.mu.Lock()
	s.fsm.snapDelay = 0 // the next snapshot is cheap
	s.fsm.mu.Unlock()
	apply(20)
	if err := s.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if got := threshold(); got != 16 {
		t.Fatalf("after a cheap snapshot the threshold is %d, want the configured 16", got)
	}
}
