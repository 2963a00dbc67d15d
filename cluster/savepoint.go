package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/snapshot"
)

// A savepoint is one file per shard in a snapshot store (a directory or a
// JetStream object-store bucket), named "<savepoint id>-shard-<shard id>",
// each in the snapshot format: the shard's key groups with their state and
// applied source positions. The header metadata of every file carries the
// cluster's patterns and sources, so a fresh cluster can be restored from
// the files alone. Its location is "<store>#<savepoint id>".

const (
	metaPatterns = "patterns"
	metaSources  = "sources"
)

func savepointFile(id string, shardID uint64) string { return fmt.Sprintf("%s-shard-%d", id, shardID) }

// splitLocation splits "<store>#<id>".
func splitLocation(loc string) (store, id string) {
	store, id, _ = strings.Cut(loc, "#")
	return store, id
}

// openSavepoint opens every file of a savepoint.
func openSavepoint(ctx context.Context, store snapshot.Store, id string) ([]*snapshot.Reader, func(), error) {
	ids, err := store.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	var objs []snapshot.Object
	closeAll := func() {
		for _, o := range objs {
			o.Close()
		}
	}
	var readers []*snapshot.Reader
	for _, f := range ids {
		if !strings.HasPrefix(f, id+"-shard-") {
			continue
		}
		o, err := store.Open(ctx, f)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		objs = append(objs, o)
		r, err := snapshot.NewReader(o, o.Size())
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("%s: %w", f, err)
		}
		readers = append(readers, r)
	}
	if len(readers) == 0 {
		closeAll()
		return nil, nil, fmt.Errorf("%w: savepoint %q has no files there", api.ErrNotFound, id)
	}
	return readers, closeAll, nil
}

// savepointPart asks for one shard's file of a savepoint.
type savepointPart struct {
	Shard        uint64 `json:"shard"`
	Target       string `json:"target"`
	File         string `json:"file"`
	Shards       int    `json:"shards"`
	LoggedTimeMs int64  `json:"loggedTimeMs"`
	Patterns     string `json:"patterns"`
	Sources      string `json:"sources"`
}

// savepointPartPath is the internal endpoint through which the metadata
// leader has a node holding a shard's replica write that shard's part.
const savepointPartPath = "/internal/v1/savepoint-part"

func (n *Node) localShard(id uint64) *shard.Shard {
	for _, sh := range n.Shards() {
		if sh.ID() == id {
			return sh
		}
	}
	return nil
}

// writeSavepointPart writes this node's replica of a shard into store (its
// leader's state once everything committed is applied; a follower's as far
// as it applied) and returns the shard's source positions.
func (n *Node) writeSavepointPart(ctx context.Context, store snapshot.Store, part savepointPart) (map[string]uint64, error) {
	sh := n.localShard(part.Shard)
	if sh == nil {
		return nil, fmt.Errorf("%w: shard %d has no replica on node %s", api.ErrFailedPrecondition, part.Shard, n.cfg.NodeID)
	}
	if sh.IsLeader() {
		if err := sh.Barrier(ctx, 10*time.Second); err != nil {
			return nil, fmt.Errorf("%w: shard %d: %v", api.ErrUnavailable, part.Shard, err)
		}
	}
	sink, err := store.Create(ctx, part.File)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
	var werr error
	var positions map[string]uint64
	sh.FSM().View(func(st *shard.State, index uint64) {
		h := snapshot.Header{ID: part.File, Kind: snapshot.KindSavepoint, ClusterID: "cep",
			CreatedIndex: index, LoggedTimeMs: part.LoggedTimeMs, Shards: part.Shards,
			Metadata: map[string]string{metaPatterns: part.Patterns, metaSources: part.Sources}}
		werr = st.WriteSnapshot(sink, h)
		positions = st.Positions()
	})
	if werr != nil {
		sink.Abort()
		return nil, fmt.Errorf("%w: shard %d: %v", api.ErrUnavailable, part.Shard, werr)
	}
	if err := sink.Close(); err != nil {
		return nil, fmt.Errorf("%w: shard %d: %v", api.ErrUnavailable, part.Shard, err)
	}
	return positions, nil
}

// remoteSavepointPart has a node holding a replica of the shard write the
// shard's part. A "dir:" target is a directory on that
// node's machine: a cluster spanning machines takes savepoints into a NATS
// object store.
func (n *Node) remoteSavepointPart(ctx context.Context, info meta.ShardInfo, part savepointPart) (map[string]uint64, error) {
	// the first replica is the shard's preferred leader (leadership is
	// handed to it), whose state is the most recent
	body, _ := json.Marshal(part)
	var errs []string
	for _, id := range info.Replicas {
		p, _ := n.peer(id)
		addr := p.APIAddr
		if addr == "" {
			continue
		}
		b, err := n.peerAt(addr).SavepointPart(ctx, body)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", id, err))
			continue
		}
		var positions map[string]uint64
		if err := json.Unmarshal(b, &positions); err != nil {
			return nil, fmt.Errorf("%w: shard %d: %s answered %v", api.ErrUnavailable, info.ID, id, err)
		}
		return positions, nil
	}
	return nil, fmt.Errorf("%w: shard %d: no replica wrote its part (%s)", api.ErrUnavailable, info.ID, strings.Join(errs, "; "))
}

// savepointPartHandler serves savepointPartPath, to the other nodes only
// (their node credential; partAccess), checked before the body is read.
func (n *Node) savepointPartHandler() http.Handler {
	return api.AuthorizeRole(n.auth, n.partAccess(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		var part savepointPart
		if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(&part); err != nil {
			http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
			return
		}
		store, err := snapshot.OpenStore(r.Context(), part.Target, n.js)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		positions, err := n.writeSavepointPart(r.Context(), store, part)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		json.NewEncoder(w).Encode(positions)
	}))
}
