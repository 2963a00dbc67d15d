package meta

// The adapter to raft.FSM is in this package, next to the encoding it
// decodes, rather than in cluster: it needs raft only for the interface's
// types (no transport, store or clock), so the purity lint exempts this one
// file from the raft import and checks everything else here.

import (
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// FSM is the raft.FSM of the metadata group. Apply, Snapshot and Restore
// are called from raft's FSM goroutine; View, Read and the change channel
// serve other goroutines.
type FSM struct {
	mu      sync.RWMutex
	meta    *Meta
	changed chan struct{} // closed and replaced on every change

	// corrupt is the first damaged entry met: nothing is applied after
	// it and no snapshot taken
	corrupt    error
	onCorrupt  func(index uint64, err error)
	restoreErr error // the first failed restore
}

// OnCorrupt sets what is told, on the state machine's goroutine, of the
// first damaged entry (set before raft starts).
func (f *FSM) OnCorrupt(fn func(index uint64, err error)) { f.onCorrupt = fn }

// Corrupt is why this replica stopped applying, nil while it has not.
func (f *FSM) Corrupt() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.corrupt
}

// RestoreErr is the first error of a restore (nil: none failed).
func (f *FSM) RestoreErr() error { return f.restoreErr }

// NewFSM returns the FSM of empty metadata.
func NewFSM() *FSM {
	return &FSM{meta: New(), changed: make(chan struct{})}
}

// Result is what Apply returns to the proposer (raft's ApplyFuture
// Response): the applied command's object, or why it was rejected.
type Result struct {
	Obj any
	Err error
}

func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	if err := f.Corrupt(); err != nil {
		return Result{Err: err}
	}
	c, sealed, corrupt, err := decodeEntry(l.Data)
	if corrupt {
		err = fmt.Errorf("cluster: damaged metadata entry %d: %w", l.Index, err)
		f.mu.Lock()
		f.corrupt = err
		f.mu.Unlock()
		if f.onCorrupt != nil {
			f.onCorrupt(l.Index, err)
		}
		return Result{Err: err}
	}
	if err != nil {
		return Result{Err: fmt.Errorf("cluster: bad metadata entry: %w", err)}
	}
	f.mu.Lock()
	switch {
	case sealed:
		f.meta.Sealed = true
	case f.meta.Sealed:
		// Every release that seals its entries wrote this log since
		// the first sealed one: an unsealed entry now was not written
		// by a member's metadata group but put in the log by hand
		// (the way a forged AppendEntries would). Refused alike on
		// every replica, since the rule reads only the log.
		f.mu.Unlock()
		return Result{Err: fmt.Errorf("cluster: metadata entry %d refused: %w", l.Index, ErrLegacyEntry)}
	}
	obj, err := f.meta.Apply(l.Index, c)
	ch := f.changed
	f.changed = make(chan struct{})
	f.mu.Unlock()
	close(ch)
	return Result{Obj: obj, Err: err}
}

func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.corrupt != nil {
		return nil, f.corrupt
	}
	b, err := f.meta.Marshal()
	if err != nil {
		return nil, err
	}
	return fsmSnapshot(b), nil
}

// Restore replaces the metadata with a snapshot's; one that does not
// decode (or panics the decoder) fails it, recorded for RestoreErr.
func (f *FSM) Restore(rc io.ReadCloser) (err error) {
	defer rc.Close()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("metadata snapshot does not decode: %v", r)
		}
		if err != nil && f.restoreErr == nil {
			f.restoreErr = err
		}
	}()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	m, err := Unmarshal(b)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.meta = m
	ch := f.changed
	f.changed = make(chan struct{})
	f.mu.Unlock()
	close(ch)
	return nil
}

// Read runs fn with the metadata under a read lock, without copying it (a
// lookup); fn must not keep references into it.
func (f *FSM) Read(fn func(m *Meta)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.meta)
}

// Watch runs fn with the metadata under a read lock, as Read does, and
// returns a channel closed at the next change: a loop that looks at little
// of the metadata need not copy it all.
func (f *FSM) Watch(fn func(m *Meta)) <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.meta)
	return f.changed
}

// View returns a copy of the metadata and a channel closed at the next change.
func (f *FSM) View() (*Meta, <-chan struct{}) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.meta.Clone(), f.changed
}

type fsmSnapshot []byte

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s fsmSnapshot) Release() {}
