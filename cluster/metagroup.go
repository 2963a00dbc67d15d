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

	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/shard"

	"github.com/cepcluster/cep/internal/hclogslog"
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
	store, err := shard.OpenLog(filepath.Join(dir, "raft.db"))
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
	fsm := meta.NewFSM()
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

func (g *metaGroup) propose(ctx context.Context, c meta.Command) (any, error) {
	if g.raft.State() != raft.Leader {
		return nil, errNotMetaLeader
	}
	b, err := meta.Encode(c)
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
