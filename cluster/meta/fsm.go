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
}

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
	c, err := Decode(l.Data)
	if err != nil {
		return Result{Err: fmt.Errorf("cluster: bad metadata entry: %w", err)}
	}
	f.mu.Lock()
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
	b, err := f.meta.Marshal()
	if err != nil {
		return nil, err
	}
	return fsmSnapshot(b), nil
}

func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
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
