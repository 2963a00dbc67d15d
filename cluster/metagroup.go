package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/cepcluster/cep/shard"

	"github.com/cepcluster/cep/internal/hclogslog"
)

// metaFSM is the raft.FSM of the metadata group. Apply, Snapshot and
// Restore are called from raft's FSM goroutine; View and the change channel
// serve other goroutines.
type metaFSM struct {
	mu      sync.RWMutex
	meta    *Meta
	changed chan struct{} // closed and replaced on every change
}

func newMetaFSM() *metaFSM {
	return &metaFSM{meta: NewMeta(), changed: make(chan struct{})}
}

type metaResult struct {
	obj any
	err error
}

func (f *metaFSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	var c Command
	if err := json.Unmarshal(l.Data, &c); err != nil {
		return metaResult{err: fmt.Errorf("cluster: bad metadata entry: %w", err)}
	}
	f.mu.Lock()
	obj, err := f.meta.Apply(l.Index, &c)
	ch := f.changed
	f.changed = make(chan struct{})
	f.mu.Unlock()
	close(ch)
	return metaResult{obj: obj, err: err}
}

func (f *metaFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, err := f.meta.Marshal()
	if err != nil {
		return nil, err
	}
	return metaSnapshot(b), nil
}

func (f *metaFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	m, err := UnmarshalMeta(b)
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
func (f *metaFSM) Read(fn func(m *Meta)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.meta)
}

// View returns a copy of the metadata and a channel closed at the next change.
func (f *metaFSM) View() (*Meta, <-chan struct{}) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.meta.Clone(), f.changed
}

type metaSnapshot []byte

func (s metaSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s metaSnapshot) Release() {}

// metaGroup is this node's replica of the metadata Raft group.
type metaGroup struct {
	fsm   *metaFSM
	raft  *raft.Raft
	store *raftboltdb.BoltStore
	fresh bool // it had no state when opened: this node is new
}

func openMetaGroup(dir, localID string, trans raft.Transport, bootstrap []raft.Server, rc *raft.Config, logger *slog.Logger) (*metaGroup, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := *rc
	c.LocalID = raft.ServerID(localID)
	c.Logger = hclogslog.New(logger.With("group", "meta"))
	store, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		return nil, fmt.Errorf("metadata log: %w", err)
	}
	shard.RemoveUnfinishedSnapshots(filepath.Join(dir, "snapshots"), logger.With("group", "meta"))
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, c.Logger)
	if err != nil {
		store.Close()
		return nil, err
	}
	existing, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		store.Close()
		return nil, err
	}
	if !existing && len(bootstrap) > 0 {
		if err := raft.BootstrapCluster(&c, store, store, snaps, trans, raft.Configuration{Servers: bootstrap}); err != nil {
			store.Close()
			return nil, err
		}
	}
	fsm := newMetaFSM()
	r, err := raft.NewRaft(&c, fsm, store, store, snaps, trans)
	if err != nil {
		store.Close()
		return nil, err
	}
	return &metaGroup{fsm: fsm, raft: r, store: store, fresh: !existing}, nil
}

// errNotMetaLeader is returned when a change reaches a node that does not
// lead the metadata group.
var errNotMetaLeader = errors.New("cluster: not the metadata leader")

func (g *metaGroup) propose(ctx context.Context, c *Command) (any, error) {
	if g.raft.State() != raft.Leader {
		return nil, errNotMetaLeader
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	f := g.raft.Apply(b, timeout)
	if err := shard.Wait(ctx, f); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return nil, errNotMetaLeader
		}
		return nil, err
	}
	res, _ := f.Response().(metaResult)
	return res.obj, res.err
}

func (g *metaGroup) close() error {
	err := g.raft.Shutdown().Error()
	if cerr := g.store.Close(); err == nil {
		err = cerr
	}
	return err
}
