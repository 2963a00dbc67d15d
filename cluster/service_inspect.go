package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/watermark"
)

// inspectLimit is InspectKey's default limit, inspectMaxLimit its bound:
// a key can hold 100,000 partial matches (more without a bound), and the
// answer is read under the shard's apply lock.
const (
	inspectLimit    = 100
	inspectMaxLimit = 10_000
)

// Inspect shows what a pattern holds for one key, read from the state of
// the leader of the key's shard: this node's replica when it leads,
// else the leader's node is asked (leader_only, so a call is forwarded
// once at most). A follower's state lags the leader's; the leader's is
// what the shard's output comes from.
func (b patternBackend) Inspect(ctx context.Context, r *cepv1.InspectKeyRequest) (*cepv1.InspectKeyResponse, error) {
	if r.Limit > inspectMaxLimit {
		return nil, fmt.Errorf("%w: limit %d is over %d", api.ErrInvalidArgument, r.Limit, inspectMaxLimit)
	}
	n := b.s.n
	m := n.Meta()
	pm := m.Patterns[r.Name]
	if pm == nil || pm.Deleted {
		return nil, fmt.Errorf("%w: pattern %q", api.ErrNotFound, r.Name)
	}
	if m.KeyGroups == 0 {
		return nil, fmt.Errorf("%w: the cluster is not initialised yet", api.ErrUnavailable)
	}
	kg := keygroup.OfKey(r.Key, m.KeyGroups)
	info, ok := shardOf(m, kg)
	if !ok {
		return nil, fmt.Errorf("%w: no shard holds key group %d of key %q", api.ErrUnavailable, kg, r.Key)
	}
	if sh := n.replicas.shard(info.ID); sh != nil {
		if sh.IsLeader() {
			return inspectReplica(n.cfg.NodeID, sh, r, kg)
		}
		if r.LeaderOnly {
			return nil, fmt.Errorf("%w: node %s does not lead shard %d (any more): retry", api.ErrUnavailable, n.cfg.NodeID, info.ID)
		}
	} else if r.LeaderOnly {
		return nil, fmt.Errorf("%w: node %s holds no replica of shard %d: retry", api.ErrUnavailable, n.cfg.NodeID, info.ID)
	}
	leader := n.shardLeader(ctx, info)
	if leader == "" || leader == n.cfg.NodeID {
		return nil, fmt.Errorf("%w: shard %d (key group %d of key %q) has no leader now: retry", api.ErrUnavailable, info.ID, kg, r.Key)
	}
	p, ok := n.peer(leader)
	if !ok || p.APIAddr == "" {
		return nil, fmt.Errorf("%w: the API address of node %s, leader of shard %d, is not known: retry", api.ErrUnavailable, leader, info.ID)
	}
	fw := &cepv1.InspectKeyRequest{Name: r.Name, Key: r.Key, Limit: r.Limit, LeaderOnly: true}
	res, err := n.peerAt(p.APIAddr).Patterns().InspectKey(ctx, connect.NewRequest(fw))
	if err != nil {
		var ce *connect.Error
		if errors.As(err, &ce) {
			return nil, err // the leader's answer, code and message as they are
		}
		return nil, fmt.Errorf("%w: asking node %s, leader of shard %d: %v", api.ErrUnavailable, leader, info.ID, err)
	}
	return res.Msg, nil
}

// shardOf returns the shard owning key group kg (a shard being split
// off owns none until the split is done).
func shardOf(m *meta.Meta, kg int) (meta.ShardInfo, bool) {
	for _, info := range m.Shards {
		if !info.Splitting && kg >= info.First && kg <= info.Last {
			return info, true
		}
	}
	return meta.ShardInfo{}, false
}

// shardLeader returns the leader of the shard as this node's replica
// knows it, else as the first of its replicas' nodes that knows says;
// empty when none does.
func (n *Node) shardLeader(ctx context.Context, info meta.ShardInfo) string {
	if sh := n.replicas.shard(info.ID); sh != nil {
		if _, id := sh.Raft().LeaderWithID(); id != "" {
			return string(id)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, id := range info.Replicas {
		if id == n.cfg.NodeID {
			continue
		}
		p, ok := n.peer(id)
		if !ok || p.APIAddr == "" {
			continue
		}
		shards, err := n.peerAt(p.APIAddr).Shards(ctx)
		if err != nil {
			continue
		}
		for _, s := range shards {
			if uint64(s.Id) == info.ID && s.LeaderNodeId != "" {
				return s.LeaderNodeId
			}
		}
	}
	return ""
}

// inspectReplica reads the key from the replica's state.
func inspectReplica(nodeID string, sh *shard.Shard, r *cepv1.InspectKeyRequest, kg int) (*cepv1.InspectKeyResponse, error) {
	limit := int(r.Limit)
	if limit == 0 {
		limit = inspectLimit
	}
	in, err := sh.FSM().InspectKey(r.Name, r.Key, limit)
	if err != nil {
		if np := (*shard.ErrNoPattern)(nil); errors.As(err, &np) {
			return nil, fmt.Errorf("%w: shard %d does not run pattern %q yet (its deployment is not applied there): retry", api.ErrUnavailable, sh.ID(), r.Name)
		}
		return nil, fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
	v := in.View
	out := &cepv1.InspectKeyResponse{Name: in.Pattern, Version: in.Version, Key: r.Key, ShardId: uint32(sh.ID()), KeyGroup: uint32(kg),
		LeaderNodeId: nodeID, AppliedIndex: in.Index, PartialMatchCount: uint64(v.PartialCount), BufferedEventCount: uint64(v.BufferedCount),
		Clocks: sourceClocks(in.Clocks)}
	if v.Watermark != watermark.MinTime {
		out.WatermarkMs, out.HasWatermark = v.Watermark, true
	}
	out.PartialMatches, out.BufferedEvents = partialMatches(v)
	for _, d := range in.Draining {
		dv := &cepv1.DrainingVersion{Version: d.Version, PartialMatchCount: uint64(d.View.PartialCount), BufferedEventCount: uint64(d.View.BufferedCount)}
		dv.PartialMatches, dv.BufferedEvents = partialMatches(d.View)
		out.Draining = append(out.Draining, dv)
	}
	return out, nil
}

// partialMatches are the view's partial matches and buffered events as
// the API has them.
func partialMatches(v nfa.KeyView) (pms []*cepv1.PartialMatch, buffered []*cepv1.InspectedEvent) {
	for _, pv := range v.Partial {
		pm := &cepv1.PartialMatch{State: pv.State, Stage: pv.Stage, StartMs: pv.Start, DeadlineMs: pv.Deadline, HasDeadline: pv.HasDeadline}
		for _, e := range pv.Events {
			pm.Events = append(pm.Events, &cepv1.InspectedEvent{Stage: e.Stage, TimeMs: e.Time, Sequence: e.Pos, Json: e.Raw})
		}
		pms = append(pms, pm)
	}
	for _, e := range v.Buffered {
		buffered = append(buffered, &cepv1.InspectedEvent{TimeMs: e.Time, Sequence: e.Pos, Json: e.Raw})
	}
	return pms, buffered
}
