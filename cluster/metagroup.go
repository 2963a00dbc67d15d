package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/internal/hclogslog"
	"github.com/cepcluster/cep/internal/integrity"
	"github.com/cepcluster/cep/internal/raftlog"
)

// peerOf is a member's addresses.
func peerOf(nd *meta.Node) Peer {
	return Peer{ID: nd.ID, RaftAddr: nd.RaftAddr, APIAddr: nd.APIAddr, GossipAddr: nd.GossipAddr}
}

// metaGroup is this node's replica of the metadata Raft group.
type metaGroup struct {
	fsm   *meta.FSM
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
	logFile := filepath.Join(dir, "raft.db")
	store, err := raftlog.OpenLog(logFile)
	if err != nil {
		if raftlog.IsLocked(err) {
			return nil, fmt.Errorf("metadata log: %w", err)
		}
		return nil, &raftlog.CorruptError{File: logFile, Err: err}
	}
	if i, err := raftlog.VerifyLog(store, checkMetaEntry); err != nil {
		store.Close()
		return nil, &raftlog.CorruptError{File: logFile, Index: i, Err: err}
	}
	raftlog.RemoveUnfinishedSnapshots(filepath.Join(dir, "snapshots"), logger.With("group", "meta"))
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, c.Logger)
	if err != nil {
		store.Close()
		return nil, err
	}
	if ce := raftlog.VerifySnapshots(dir, snaps); ce != nil {
		store.Close()
		return nil, ce
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
	fsm := meta.NewFSM()
	fsm.OnCorrupt(func(index uint64, err error) {
		// the replica stops applying; a restart finds the entry and
		// rebuilds the replica from its peers
		logger.Error("metadata replica stopped at a damaged log entry: restart the node to rebuild it from its peers", "file", logFile, "index", index, "err", err)
	})
	r, err := raftlog.NewRaft(&c, fsm, store, snaps, trans)
	if err == nil && fsm.RestoreErr() != nil {
		err = &raftlog.CorruptError{File: filepath.Join(dir, "snapshots"), Err: fsm.RestoreErr()}
		r.Shutdown().Error()
	}
	if err != nil {
		store.Close()
		if ce := (*raftlog.CorruptError)(nil); errors.As(err, &ce) && ce.File == "" {
			ce.File = logFile
		}
		return nil, err
	}
	return &metaGroup{fsm: fsm, raft: r, store: store, fresh: !existing}, nil
}

// checkMetaEntry checks one entry of the metadata log as the start-up
// scan does.
func checkMetaEntry(l *raft.Log) error {
	if l.Type != raft.LogCommand {
		return raftlog.CheckRaftEntry(l)
	}
	return meta.CheckEntry(l.Data)
}

// errNotMetaLeader is returned when a change reaches a node that does not
// lead the metadata group.
var errNotMetaLeader = errors.New("cluster: not the metadata leader")

func (g *metaGroup) propose(ctx context.Context, c meta.Command) (any, error) {
	if g.raft.State() != raft.Leader {
		return nil, errNotMetaLeader
	}
	b, err := meta.Encode(c)
	if err != nil {
		return nil, err
	}
	b = integrity.Seal(b)
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	f := g.raft.Apply(b, timeout)
	if err := raftlog.Wait(ctx, f); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return nil, errNotMetaLeader // (not appended: not applied)
		}
		if errors.Is(err, raft.ErrLeadershipLost) {
			// appended, perhaps committed by the next leader: a client
			// must not take it for a change not applied
			return nil, fmt.Errorf("%w: the metadata leader changed while the change was committed; it may have been applied: check before you retry", api.ErrUnavailable)
		}
		return nil, err
	}
	res, _ := f.Response().(meta.Result)
	return res.Obj, res.Err
}

func (g *metaGroup) close() error {
	err := g.raft.Shutdown().Error()
	if cerr := g.store.Close(); err == nil {
		err = cerr
	}
	return err
}
