package shard

import (
	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/internal/integrity"
	"github.com/cepcluster/cep/internal/raftlog"
)

// batchEnvelope opens a shard's log entries: sealed ones, and those
// written before entries were sealed, which begin with a batch version.
var batchEnvelope = integrity.Envelope{Legacy: func(b byte) bool { return b >= 3 && b <= batchVersion }}

// openBatch returns the batch of a command entry's data. A sealed entry
// whose checksum matches but which does not decode is as the proposer
// wrote it (skipped alike on every replica, as before); damage, or a
// legacy entry that does not decode, is a *raftlog.CorruptError's cause
// (corrupt true).
func openBatch(data []byte) (b *Batch, corrupt bool, err error) {
	d, sealed, err := batchEnvelope.Open(data)
	if err != nil {
		return nil, true, err
	}
	b, err = DecodeBatch(d)
	return b, err != nil && !sealed, err
}

// CheckShardEntry checks one entry of a shard's log as the start-up scan
// does: a sealed entry by its checksum alone (it is decoded when
// applied), a legacy one by decoding it.
func CheckShardEntry(l *raft.Log) error {
	if l.Type != raft.LogCommand {
		return raftlog.CheckRaftEntry(l)
	}
	d, sealed, err := batchEnvelope.Open(l.Data)
	if err != nil || sealed {
		return err
	}
	_, err = DecodeBatch(d)
	return err
}
