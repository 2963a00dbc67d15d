package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/peer"
	"github.com/cepcluster/cep/snapshot"
)

type savepointBackend struct{ s *Service }

// removeSavepointParts deletes, as far as it can, the parts a savepoint
// that failed wrote before it failed: a client asks again, under a new
// id, and the store would keep the old parts for nobody.
func (n *Node) removeSavepointParts(store snapshot.Store, id string) {
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	defer cancel()
	files, err := store.List(ctx)
	if err != nil {
		n.log.Warn("a failed savepoint's parts stay", "savepoint", id, "err", err)
		return
	}
	for _, f := range files {
		if strings.HasPrefix(f, id+"-shard-") {
			if err := store.Delete(ctx, f); err != nil {
				n.log.Warn("a failed savepoint's part stays", "savepoint", id, "file", f, "err", err)
			}
		}
	}
}

// savepointID names a savepoint by its time, UTC to the millisecond, so
// that a person reads when it was taken and the ids sort by it
// (sp-20261202-110026.123; releases before wrote the Unix milliseconds,
// sp-1764673226123, which every command still takes).
func savepointID(t time.Time) string {
	return "sp-" + t.UTC().Format("20060102-150405.000")
}

func (b savepointBackend) Create(ctx context.Context, r *cepv1.CreateSavepointRequest) (*cepv1.CreateSavepointResponse, error) {
	if res, done, err := forwarded(b.s.n, ctx, r, peer.Client.Savepoints, cepv1connect.SavepointServiceClient.CreateSavepoint); done {
		return res, err
	}
	n := b.s.n
	if err := splitting(n.Meta()); err != nil {
		return nil, err
	}
	if err := checkRequestID(r.RequestId); err != nil {
		return nil, err
	}
	if res, done, err := n.requestDone(r.RequestId); done {
		// a retry: answered with the savepoint written the first time
		if err != nil {
			return nil, err
		}
		return &cepv1.CreateSavepointResponse{Savepoint: toSavepoint(res.(*meta.Savepoint), n.Meta())}, nil
	}
	store, err := n.openStore(ctx, r.Target)
	if err != nil {
		return nil, err
	}
	m := n.Meta()
	now := n.cfg.Now()
	id := savepointID(now)
	var pats []meta.Pattern
	for _, name := range m.PatternNames() {
		pats = append(pats, *m.Patterns[name])
	}
	var srcs []meta.Source
	for _, name := range m.SourceNames() {
		srcs = append(srcs, *m.Sources[name])
	}
	pj, _ := json.Marshal(pats)
	sj, _ := json.Marshal(srcs)
	streams := savepointStreams(ctx, n.JetStream(), m)
	positions := map[string]uint64{}
	seen := map[string]bool{}
	for _, info := range m.Shards {
		part := savepointPart{Shard: info.ID, Target: r.Target, File: savepointFile(id, info.ID), Shards: len(m.Shards),
			LoggedTimeMs: now.UnixMilli(), Patterns: string(pj), Sources: string(sj), Streams: streams}
		got, err := n.savepointPartOf(ctx, store, info, part)
		if err != nil {
			n.removeSavepointParts(store, id)
			return nil, err
		}
		for src, p := range got {
			if !seen[src] || p < positions[src] {
				positions[src] = p
			}
			seen[src] = true
		}
	}
	res, err := n.proposeRequest(ctx, r.RequestId, meta.AddSavepoint{Savepoint: &meta.Savepoint{ID: id, Location: r.Target, CreatedTime: now.UnixMilli(), Shards: len(m.Shards)}})
	if err != nil {
		return nil, mapErr(err)
	}
	if first := res.(*meta.Savepoint); first.ID != id {
		// the request was applied first by an earlier try, which the
		// metadata recorded while this one wrote its files
		n.removeSavepointParts(store, id)
		return &cepv1.CreateSavepointResponse{Savepoint: toSavepoint(first, n.Meta())}, nil
	}
	sp := toSavepoint(res.(*meta.Savepoint), m)
	for _, src := range slices.Sorted(maps.Keys(positions)) {
		stream, created := "", int64(0)
		if i := slices.IndexFunc(streams, func(s snapshot.Source) bool { return s.Name == src }); i >= 0 {
			stream, created = streams[i].Stream, streams[i].StreamCreated
		}
		sp.SourcePositions = append(sp.SourcePositions, &cepv1.SourcePosition{Source: src, Stream: stream, Sequence: positions[src], StreamCreated: timestamp(created)})
	}
	return &cepv1.CreateSavepointResponse{Savepoint: sp}, nil
}

func toSavepoint(s *meta.Savepoint, m *meta.Meta) *cepv1.Savepoint {
	sp := &cepv1.Savepoint{Id: s.ID, Location: s.Location + "#" + s.ID, CreatedIndex: s.CreatedIndex,
		CreatedTime: timestamppb.New(time.UnixMilli(s.CreatedTime)), ShardCount: uint32(s.Shards), KeyGroups: uint32(m.KeyGroups)}
	for _, name := range m.PatternNames() {
		sp.PatternVersions = append(sp.PatternVersions, &cepv1.PatternVersion{Name: name, Version: m.Patterns[name].Version})
	}
	return sp
}

func (b savepointBackend) Delete(ctx context.Context, r *cepv1.DeleteSavepointRequest) (*cepv1.DeleteSavepointResponse, error) {
	if res, done, err := forwarded(b.s.n, ctx, r, peer.Client.Savepoints, cepv1connect.SavepointServiceClient.DeleteSavepoint); done {
		return res, err
	}
	n := b.s.n
	m := n.Meta()
	// forgotten first: the list never names a savepoint with files missing
	res, err := n.proposeRequest(ctx, r.RequestId, meta.DeleteSavepoint{Name: r.Id})
	if err != nil {
		return nil, mapErr(err)
	}
	sp := res.(*meta.Savepoint)
	out := &cepv1.DeleteSavepointResponse{Savepoint: toSavepoint(sp, m)}
	if r.KeepFiles {
		return out, nil
	}
	store, err := n.openStore(ctx, sp.Location)
	if err != nil {
		return nil, fmt.Errorf("%w: savepoint %q is deleted, its files at %s are not: %v", api.ErrUnavailable, r.Id, sp.Location, err)
	}
	files, err := store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: savepoint %q is deleted, its files at %s are not: %v", api.ErrUnavailable, r.Id, sp.Location, err)
	}
	for _, f := range files {
		if !strings.HasPrefix(f, sp.ID+"-shard-") {
			continue
		}
		if err := store.Delete(ctx, f); err != nil {
			return nil, fmt.Errorf("%w: savepoint %q is deleted, its file %s is not: %v", api.ErrUnavailable, r.Id, f, err)
		}
		out.DeletedFiles = append(out.DeletedFiles, f)
	}
	slices.Sort(out.DeletedFiles)
	return out, nil
}

func (b savepointBackend) List(ctx context.Context, r *cepv1.ListSavepointsRequest) (*cepv1.ListSavepointsResponse, error) {
	if res, done, err := forwarded(b.s.n, ctx, r, peer.Client.Savepoints, cepv1connect.SavepointServiceClient.ListSavepoints); done {
		return res, err
	}
	m, err := b.s.n.readMeta(ctx)
	if err != nil {
		return nil, err
	}
	out := &cepv1.ListSavepointsResponse{}
	for i := len(m.Savepoints) - 1; i >= 0; i-- {
		out.Savepoints = append(out.Savepoints, toSavepoint(&m.Savepoints[i], m))
	}
	return out, nil
}

func (b savepointBackend) Restore(ctx context.Context, r *cepv1.RestoreSavepointRequest) (*cepv1.RestoreSavepointResponse, error) {
	if res, done, err := forwarded(b.s.n, ctx, r, peer.Client.Savepoints, cepv1connect.SavepointServiceClient.RestoreSavepoint); done {
		return res, err
	}
	n := b.s.n
	m := n.Meta()
	if err := splitting(m); err != nil {
		return nil, err
	}
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
	mode, err := positionModeOf(r)
	if err != nil {
		return nil, err
	}
	if r.ShardCount != 0 && int(r.ShardCount) != len(m.Shards) {
		return nil, fmt.Errorf("%w: this cluster has %d shards; to restore into %d, start a cluster with --shards %d and restore there (a savepoint restores into any layout)", api.ErrFailedPrecondition, len(m.Shards), r.ShardCount, r.ShardCount)
	}
	store, err := n.openStore(ctx, loc)
	if err != nil {
		return nil, err
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
	if !snapshot.ValidID(id) {
		return nil, fmt.Errorf("%w: savepoint id %q (none found at %s, or not 1-128 of [A-Za-z0-9._-])", api.ErrInvalidArgument, id, loc)
	}
	// every part, read whole, and every pattern and source it carries, are
	// checked before anything is proposed: a savepoint a shard could not
	// restore, or metadata a deploy would refuse, leaves the cluster as it is
	key := n.cfg.savepointKey()
	if r.Unsealed {
		key = nil
	}
	h, pats, srcs, saved, err := verifySavepoint(ctx, store, id, m, key)
	if err != nil {
		return nil, err
	}
	for _, s := range srcs {
		var err error
		switch {
		case s.Unpartitioned && s.Managed:
			_, err = n.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: s.Stream, Subjects: s.Subjects, Storage: jetstream.FileStorage})
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				err = nil
			}
		case s.Unpartitioned:
			_, err = n.JetStream().Stream(ctx, s.Stream) // an existing stream: it must be there
		default:
			_, err = EnsureSourceStream(ctx, n.JetStream(), s.Name, m.KeyGroups)
		}
		if err == nil && s.Managed {
			err = setStreamLimits(ctx, n.JetStream(), s.Stream, s.Limits) // the stream may be new
		}
		if err != nil {
			return nil, fmt.Errorf("%w: source %s (stream %s): %v", api.ErrUnavailable, s.Name, s.Stream, err)
		}
	}
	// the positions of a source whose stream is not the one they count in
	// mean nothing there: refused, or mapped as asked, the mapping logged
	// with the restore so that every shard applies the same
	plan, err := planPositions(ctx, n.JetStream(), m, srcs, h.Sources, mode)
	if err != nil {
		return nil, err
	}
	cmd := meta.RestoreSavepoint{Savepoint: &meta.Savepoint{ID: id, Location: loc}, Patterns: pats, Sources: srcs, Unsealed: key == nil}
	plan.apply(&cmd)
	for _, note := range plan.notes {
		n.log.Info("savepoint restore: positions mapped", "savepoint", id, "mapping", note)
	}
	res, err := n.proposeRequest(ctx, r.RequestId, cmd)
	if err != nil {
		return nil, mapErr(err)
	}
	rm := res.(*meta.Restore)
	// every shard reads its part of the files (up to a minute each)
	pending := n.waitShards(ctx, max(n.cfg.DeployWait, restoreWait), restored(rm.ID))
	sp := &cepv1.Savepoint{Id: id, Location: loc + "#" + id, CreatedIndex: h.CreatedIndex, ShardCount: uint32(h.Shards), KeyGroups: uint32(h.KeyGroups),
		CreatedTime: timestamppb.New(time.UnixMilli(h.LoggedTimeMs))}
	for _, p := range pats {
		sp.PatternVersions = append(sp.PatternVersions, &cepv1.PatternVersion{Name: p.Name, Version: p.Version})
	}
	// the restore's id is "<savepoint>@<metadata index>"
	_, at, _ := strings.Cut(rm.ID, "@")
	index, _ := strconv.ParseUint(at, 10, 64)
	return &cepv1.RestoreSavepointResponse{Savepoint: sp, ShardCount: uint32(len(m.Shards)), PendingShards: pending,
		RestoredIndex: index, SourcePositions: plan.sourcePositions(saved)}, nil
}

// restoreWait is the least RestoreSavepoint waits for the shards to have
// restored their parts.
const restoreWait = 30 * time.Second
