package raftlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

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

// RemoveUnfinishedSnapshots deletes the snapshot directories raft left
// unfinished (named *.tmp): a snapshot or an install interrupted by a crash,
// or one whose creation failed (a full disk), which raft never removes and
// warns about at every snapshot after. Before raft starts none is in
// progress.
func RemoveUnfinishedSnapshots(dir string, log *slog.Logger) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return // none yet
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			log.Warn("cannot remove an unfinished snapshot", "dir", e.Name(), "err", err)
			continue
		}
		log.Info("removed an unfinished snapshot", "dir", e.Name())
	}
}

// Wait is f.Error(), or ctx's error once ctx ends first. When Raft shuts
// down it drops the entries already handed to the state machine without
// resolving their futures (hashicorp/raft's runFSM returns on shutdown), so
// waiting on such a future directly could last forever: a node closing
// while a new leader still applied its backlog hung in Close. Every wait a
// shutdown can interrupt goes through here; the cost is a goroutine per
// wait, left behind only for a future that never resolves.
func Wait(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
