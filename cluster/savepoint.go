package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
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

type savepointBackend struct{ s *Service }

func (b savepointBackend) client(u string) cepv1connect.SavepointServiceClient {
	return cepv1connect.NewSavepointServiceClient(b.s.client, u, b.s.clientOpts()...)
}

func (b savepointBackend) Create(ctx context.Context, r *cepv1.CreateSavepointRequest) (*cepv1.CreateSavepointResponse, error) {
	if res, done, err := forwarded(b.s, ctx, r, func(u string) func(context.Context, *connect.Request[cepv1.CreateSavepointRequest]) (*connect.Response[cepv1.CreateSavepointResponse], error) {
		return b.client(u).CreateSavepoint
	}); done {
		return res, err
	}
	n := b.s.n
	store, err := snapshot.OpenStore(ctx, r.Target, n.js)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", api.ErrInvalidArgument, err)
	}
	m := n.Meta()
	now := n.cfg.Now()
	id := fmt.Sprintf("sp-%d", now.UnixMilli())
	var pats []PatternM
	for _, name := range m.PatternNames() {
		pats = append(pats, *m.Patterns[name])
	}
	var srcs []SourceM
	for _, name := range m.SourceNames() {
		srcs = append(srcs, *m.Sources[name])
	}
	pj, _ := json.Marshal(pats)
	sj, _ := json.Marshal(srcs)
	positions := map[string]uint64{}
	seen := map[string]bool{}
	for _, info := range m.Shards {
		var sh *shard.Shard
		for _, local := range n.shards {
			if local.ID() == info.ID {
				sh = local
			}
		}
		if sh == nil {
			return nil, fmt.Errorf("%w: shard %d has no replica on this node; savepoints need every shard replicated on the metadata leader (clusters of up to 3 nodes)", api.ErrFailedPrecondition, info.ID)
		}
		if sh.IsLeader() {
			if err := sh.Barrier(10 * time.Second); err != nil {
				return nil, fmt.Errorf("%w: shard %d: %v", api.ErrUnavailable, info.ID, err)
			}
		}
		sink, err := store.Create(ctx, savepointFile(id, info.ID))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", api.ErrUnavailable, err)
		}
		var werr error
		sh.FSM().View(func(st *shard.State, index uint64) {
			h := snapshot.Header{ID: savepointFile(id, info.ID), Kind: snapshot.KindSavepoint, ClusterID: "cep",
				CreatedIndex: index, LoggedTimeMs: now.UnixMilli(), Shards: len(m.Shards),
				Metadata: map[string]string{metaPatterns: string(pj), metaSources: string(sj)}}
			werr = st.WriteSnapshot(sink, h)
			for src, p := range st.Positions() {
				if !seen[src] || p < positions[src] {
					positions[src] = p
				}
				seen[src] = true
			}
		})
		if werr != nil {
			sink.Abort()
			return nil, fmt.Errorf("%w: shard %d: %v", api.ErrUnavailable, info.ID, werr)
		}
		if err := sink.Close(); err != nil {
			return nil, fmt.Errorf("%w: shard %d: %v", api.ErrUnavailable, info.ID, err)
		}
	}
	res, err := n.Propose(ctx, &Command{Kind: CmdAddSavepoint, Savepoint: &SavepointM{ID: id, Location: r.Target, CreatedTime: now.UnixMilli(), Shards: len(m.Shards)}})
	if err != nil {
		return nil, mapErr(err)
	}
	sp := toSavepoint(res.(*SavepointM), m)
	for _, src := range sortedKeys(positions) {
		stream := ""
		if s := m.Sources[src]; s != nil {
			stream = s.Stream
		}
		sp.SourcePositions = append(sp.SourcePositions, &cepv1.SourcePosition{Source: src, Stream: stream, Sequence: positions[src]})
	}
	return &cepv1.CreateSavepointResponse{Savepoint: sp}, nil
}

func toSavepoint(s *SavepointM, m *Meta) *cepv1.Savepoint {
	sp := &cepv1.Savepoint{Id: s.ID, Location: s.Location + "#" + s.ID, CreatedIndex: s.CreatedIndex,
		CreatedTime: timestamppb.New(time.UnixMilli(s.CreatedTime)), ShardCount: uint32(s.Shards), KeyGroups: uint32(m.KeyGroups)}
	for _, name := range m.PatternNames() {
		sp.PatternVersions = append(sp.PatternVersions, &cepv1.PatternVersion{Name: name, Version: m.Patterns[name].Version})
	}
	return sp
}

func (b savepointBackend) List(ctx context.Context, r *cepv1.ListSavepointsRequest) (*cepv1.ListSavepointsResponse, error) {
	m := b.s.n.Meta()
	out := &cepv1.ListSavepointsResponse{}
	for i := len(m.Savepoints) - 1; i >= 0; i-- {
		out.Savepoints = append(out.Savepoints, toSavepoint(&m.Savepoints[i], m))
	}
	return out, nil
}

func (b savepointBackend) Restore(ctx context.Context, r *cepv1.RestoreSavepointRequest) (*cepv1.RestoreSavepointResponse, error) {
	if res, done, err := forwarded(b.s, ctx, r, func(u string) func(context.Context, *connect.Request[cepv1.RestoreSavepointRequest]) (*connect.Response[cepv1.RestoreSavepointResponse], error) {
		return b.client(u).RestoreSavepoint
	}); done {
		return res, err
	}
	n := b.s.n
	m := n.Meta()
	var loc, id string
	switch x := r.Savepoint.(type) {
	case *cepv1.RestoreSavepointRequest_Id:
		for _, sp := range m.Savepoints {
			if sp.ID == x.Id {
				loc, id = sp.Location, sp.ID
			}
		}
		if loc == "" {
			return nil, fmt.Errorf("%w: savepoint %q (restore from a location, STORE#ID, if this cluster did not write it)", api.ErrNotFound, x.Id)
		}
	case *cepv1.RestoreSavepointRequest_Location:
		loc, id = splitLocation(x.Location)
	default:
		return nil, fmt.Errorf("%w: name a savepoint by id or location", api.ErrInvalidArgument)
	}
	if r.ShardCount != 0 && int(r.ShardCount) != len(m.Shards) {
		return nil, fmt.Errorf("%w: this cluster has %d shards; to restore into %d, start a cluster with --shards %d and restore there (a savepoint restores into any layout)", api.ErrFailedPrecondition, len(m.Shards), r.ShardCount, r.ShardCount)
	}
	store, err := snapshot.OpenStore(ctx, loc, n.js)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", api.ErrInvalidArgument, err)
	}
	if id == "" {
		ids, err := store.List(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", api.ErrUnavailable, err)
		}
		sort.Strings(ids)
		for _, f := range ids {
			if before, _, ok := strings.Cut(f, "-shard-"); ok && strings.HasPrefix(f, "sp-") {
				id = before // the newest, as ids sort by time
			}
		}
	}
	readers, closeAll, err := openSavepoint(ctx, store, id)
	if err != nil {
		return nil, err
	}
	h := readers[0].Header()
	closeAll()
	var pats []PatternM
	var srcs []SourceM
	if err := json.Unmarshal([]byte(h.Metadata[metaPatterns]), &pats); err != nil {
		return nil, fmt.Errorf("%w: savepoint %q: bad pattern list: %v", api.ErrInvalidArgument, id, err)
	}
	if err := json.Unmarshal([]byte(h.Metadata[metaSources]), &srcs); err != nil {
		return nil, fmt.Errorf("%w: savepoint %q: bad source list: %v", api.ErrInvalidArgument, id, err)
	}
	if h.KeyGroups != m.KeyGroups {
		return nil, fmt.Errorf("%w: savepoint has %d key groups, this cluster %d", api.ErrFailedPrecondition, h.KeyGroups, m.KeyGroups)
	}
	for _, s := range srcs {
		if _, err := EnsureSourceStream(ctx, n.js, s.Name, m.KeyGroups); err != nil {
			return nil, fmt.Errorf("%w: source %s: %v", api.ErrUnavailable, s.Name, err)
		}
	}
	res, err := n.Propose(ctx, &Command{Kind: CmdRestore, Savepoint: &SavepointM{ID: id, Location: loc}, Patterns: pats, Sources: srcs})
	if err != nil {
		return nil, mapErr(err)
	}
	rm := res.(*RestoreM)
	// wait (bounded) until the shards this node leads have restored
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		done := true
		for _, sh := range n.shards {
			var have string
			sh.FSM().View(func(st *shard.State, _ uint64) { have = st.RestoreID() })
			if sh.IsLeader() && have != rm.ID {
				done = false
			}
		}
		if done {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	sp := &cepv1.Savepoint{Id: id, Location: loc + "#" + id, CreatedIndex: h.CreatedIndex, ShardCount: uint32(h.Shards), KeyGroups: uint32(h.KeyGroups),
		CreatedTime: timestamppb.New(time.UnixMilli(h.LoggedTimeMs))}
	for _, p := range pats {
		sp.PatternVersions = append(sp.PatternVersions, &cepv1.PatternVersion{Name: p.Name, Version: p.Version})
	}
	return &cepv1.RestoreSavepointResponse{Savepoint: sp, ShardCount: uint32(len(m.Shards))}, nil
}
