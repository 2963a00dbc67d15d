package shard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/cepcluster/cep/internal/integrity"
)

// batchEnvelope opens a shard's log entries: sealed ones, and those
// written before entries were sealed, which begin with a batch version.
var batchEnvelope = integrity.Envelope{Legacy: func(b byte) bool { return b >= 3 && b <= batchVersion }}

// CorruptError says that a replica's files hold something it cannot
// trust: a damaged or unreadable log entry, an unreadable log or snapshot.
// The replica does not apply it; it is to be rebuilt from a healthy peer.
type CorruptError struct {
	Shard uint64 // 0: the metadata group
	File  string // the file that is damaged
	Index uint64 // the log entry, 0 when not one entry's
	Err   error
}

// Error names the shard (the metadata group's callers say it is
// theirs), the file and the entry.
func (e *CorruptError) Error() string {
	where := e.File
	if e.Index != 0 {
		where = fmt.Sprintf("%s: log entry %d", e.File, e.Index)
	}
	if e.Shard == 0 {
		return fmt.Sprintf("%s: %v", where, e.Err)
	}
	return fmt.Sprintf("shard %d: %s: %v", e.Shard, where, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// IsCorrupt reports whether err is, or wraps, a CorruptError.
func IsCorrupt(err error) bool {
	var ce *CorruptError
	return errors.As(err, &ce)
}

// openBatch returns the batch of a command entry's data. A sealed entry
// whose checksum matches but which does not decode is as the proposer
// wrote it (skipped alike on every replica, as before); damage, or a
// legacy entry that does not decode, is a *CorruptError's cause
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
		return CheckRaftEntry(l)
	}
	d, sealed, err := batchEnvelope.Open(l.Data)
	if err != nil || sealed {
		return err
	}
	_, err = DecodeBatch(d)
	return err
}

// CheckRaftEntry checks an entry raft itself encodes: a configuration
// must decode (raft panics on one that does not) and the type must be
// one raft knows.
func CheckRaftEntry(l *raft.Log) (err error) {
	switch l.Type {
	case raft.LogConfiguration:
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("configuration entry does not decode: %v", r)
			}
		}()
		raft.DecodeConfiguration(l.Data)
		return nil
	case raft.LogNoop, raft.LogBarrier, raft.LogCommand:
		return nil
	case raft.LogAddPeerDeprecated, raft.LogRemovePeerDeprecated:
		return nil
	}
	return fmt.Errorf("unknown entry type %d", l.Type)
}

// VerifyLog reads every entry of store from its first index to its last
// and checks each with check: the scan a replica makes when it opens its
// log, before raft reads it (raft panics on an entry that does not
// decode). It returns the first bad entry's index with the error; a log
// the store cannot read at all fails with index 0. Panics of the store
// (a damaged bolt page) and memory faults reading its mapped file are
// turned into errors.
func VerifyLog(store raft.LogStore, check func(*raft.Log) error) (index uint64, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading the log: %v", r)
		}
	}()
	first, err := store.FirstIndex()
	if err != nil {
		return 0, err
	}
	last, err := store.LastIndex()
	if err != nil {
		return 0, err
	}
	if first == 0 || last == 0 {
		return 0, nil // empty
	}
	var l raft.Log
	for i := first; i <= last; i++ {
		index = i
		l = raft.Log{}
		if err := store.GetLog(i, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				// not damage: a follower that installed a snapshot keeps
				// the trailing entries it had before it, then the entries
				// after the snapshot, with a gap between (raft reads past
				// it from the snapshot)
				continue
			}
			return i, err
		}
		if l.Index != i {
			return i, fmt.Errorf("entry stored at index %d says index %d", i, l.Index)
		}
		if err := check(&l); err != nil {
			return i, err
		}
	}
	return 0, nil
}

// VerifySnapshots checks the snapshots raft will restore from dir (a
// replica's directory, snapshots under dir/snapshots): every finished
// one's metadata must read (raft skips one that does not, going back to
// an older state), and the latest one's file must match its checksum
// (raft would fall back to an older one). The state inside is checked by
// restoring it (FSM.Restore).
func VerifySnapshots(dir string, snaps *raft.FileSnapshotStore) *CorruptError {
	root := filepath.Join(dir, "snapshots")
	ents, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return &CorruptError{File: root, Err: err}
	}
	for _, e := range ents {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		file := filepath.Join(root, e.Name(), "meta.json")
		b, err := os.ReadFile(file)
		var m raft.SnapshotMeta
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err == nil && m.ID != e.Name() {
			err = fmt.Errorf("names snapshot %q", m.ID)
		}
		if err != nil {
			return &CorruptError{File: file, Err: err}
		}
	}
	list, err := snaps.List()
	if err != nil {
		return &CorruptError{File: root, Err: err}
	}
	if len(list) == 0 {
		return nil
	}
	_, rc, err := snaps.Open(list[0].ID) // reads the file through, checking its CRC
	if err != nil {
		return &CorruptError{File: filepath.Join(root, list[0].ID, "state.bin"), Err: err}
	}
	rc.Close()
	return nil
}

// NewRaft is raft.NewRaft with its panics (an entry of the log that does
// not decode) turned into a *CorruptError, and memory faults reading the
// log's mapped file with them. A panic comes before raft starts its
// goroutines.
func NewRaft(c *raft.Config, fsm raft.FSM, store *raftboltdb.BoltStore, snaps raft.SnapshotStore, trans raft.Transport) (r *raft.Raft, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, &CorruptError{Err: fmt.Errorf("raft could not read its log: %v", p)}
		}
	}()
	return raft.NewRaft(c, fsm, store, store, snaps, trans)
}
