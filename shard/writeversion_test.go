package shard

import (
	"context"
	"testing"

	"github.com/hashicorp/raft"
)

// A replica writes the batch version it is given, read back from its log;
// a version this release cannot write is refused and changes nothing.
func TestSetBatchVersion(t *testing.T) {
	rs := newReplicaSet(t, 1)
	l := rs.leader()
	for _, v := range []byte{0, 2, BatchVersion - 1, BatchVersion + 1, 255} {
		if err := l.SetBatchVersion(v); err == nil {
			t.Errorf("batch version %d accepted; this release writes %d only", v, BatchVersion)
		}
	}
	if err := l.SetBatchVersion(BatchVersion); err != nil {
		t.Fatal(err)
	}
	rs.propose(context.Background(), &Batch{Ops: []Op{TickOp{}}})
	var e raft.Log
	if err := l.store.GetLog(l.Raft().LastIndex(), &e); err != nil {
		t.Fatal(err)
	}
	data, sealed, err := batchEnvelope.Open(e.Data)
	if err != nil || !sealed || len(data) == 0 {
		t.Fatalf("last entry %x: sealed %v, %v", e.Data, sealed, err)
	}
	if data[0] != BatchVersion {
		t.Errorf("entry written in batch version %d, want %d", data[0], BatchVersion)
	}
	if _, err := DecodeBatch(data); err != nil {
		t.Error(err)
	}
}
