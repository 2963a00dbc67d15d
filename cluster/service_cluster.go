package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/cluster/gossip"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/peer"
	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/internal/version"
	"github.com/cepcluster/cep/shard"
)

type clusterBackend struct{ s *Service }

func (b clusterBackend) Status(ctx context.Context, r *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error) {
	n := b.s.n
	m := n.Meta()
	leader := n.MetaLeader()
	out := &cepv1.GetStatusResponse{}
	peers := n.peers()
	// liveness: the gossip's and the member's /healthz, which answers at
	// once where the gossip takes seconds to notice a crash. Both say so:
	// alive, or dead; they disagree (a crash not yet noticed, a gossip
	// port blocked): suspect; only /healthz to go by (a member the gossip
	// has not seen): what it says.
	states := make([]cepv1.NodeState, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		st, seen := n.gossipState(p.ID)
		if p.ID == n.cfg.NodeID {
			states[i] = st
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			states[i] = nodeState(n.peerAt(p.APIAddr).Probe(ctx))
			if seen && states[i] != st {
				states[i] = cepv1.NodeState_NODE_STATE_SUSPECT
			}
		}()
	}
	wg.Wait()
	held := map[string]uint32{}
	for _, info := range m.Shards {
		for _, id := range info.Replicas {
			held[id]++
		}
	}
	sum := &cepv1.ClusterSummary{Nodes: uint32(len(peers))}
	for i, p := range peers {
		switch states[i] {
		case cepv1.NodeState_NODE_STATE_ALIVE:
			sum.Alive++
		case cepv1.NodeState_NODE_STATE_SUSPECT:
			sum.Suspect++
		default:
			sum.Dead++
		}
		nd := &cepv1.Node{Id: p.ID, Address: p.RaftAddr, ApiAddress: p.APIAddr, GossipAddress: p.GossipAddr, State: states[i],
			IsMetaLeader: p.ID == leader, Replicas: held[p.ID]}
		if x := m.Node(p.ID); x != nil {
			nd.Removing = x.Removing
		}
		nd.Version = n.releaseOf(p.ID)
		nd.HighestVersion = n.highestVersionOf(p.ID)
		out.Nodes = append(out.Nodes, nd)
	}
	commit, _ := strconv.ParseUint(n.meta.raft.Stats()["commit_index"], 10, 64)
	noLeader := 0
	for _, sh := range n.Shards() {
		if _, id := sh.Raft().LeaderWithID(); id == "" {
			noLeader++
		}
	}
	sum.MetaLeaderId, sum.MetaCommitIndex = leader, commit
	sum.KeyGroups, sum.Shards, sum.ShardsWithoutLeader = uint32(m.KeyGroups), uint32(len(m.Shards)), uint32(noLeader)
	sum.Patterns, sum.Sources, sum.NatsUrl = uint32(len(m.PatternNames())), uint32(len(m.Sources)), n.NATSURL()
	sum.Insecure = n.cfg.Insecure
	sum.ClusterVersion = uint32(m.ActiveVersion())
	out.Summary = sum
	return out, nil
}

// gossipState is member id's state as this node's gossip sees it; ok is
// false for a member it has not seen.
// releaseOf is the build node id runs: this node's own, another's as its
// gossiped metadata says ("" when it says none).
func (n *Node) releaseOf(id string) string {
	if id == n.cfg.NodeID {
		return version.Get().Version
	}
	if n.gossip == nil {
		return ""
	}
	mb, _ := n.gossip.Member(id)
	return mb.Release
}

func (n *Node) gossipState(id string) (cepv1.NodeState, bool) {
	if id == n.cfg.NodeID {
		return cepv1.NodeState_NODE_STATE_ALIVE, true
	}
	if n.gossip == nil {
		return 0, false
	}
	mb, ok := n.gossip.Member(id)
	if !ok {
		return 0, false
	}
	switch mb.State {
	case gossip.Alive:
		return cepv1.NodeState_NODE_STATE_ALIVE, true
	case gossip.Suspect:
		return cepv1.NodeState_NODE_STATE_SUSPECT, true
	}
	return cepv1.NodeState_NODE_STATE_DEAD, true
}

// nodeState is a health probe's answer as the API states it.
func nodeState(s peer.State) cepv1.NodeState {
	switch s {
	case peer.Alive:
		return cepv1.NodeState_NODE_STATE_ALIVE
	case peer.Suspect:
		return cepv1.NodeState_NODE_STATE_SUSPECT
	}
	return cepv1.NodeState_NODE_STATE_DEAD
}

func (b clusterBackend) RemoveNode(ctx context.Context, r *cepv1.RemoveNodeRequest) (*cepv1.RemoveNodeResponse, error) {
	if res, done, err := forwarded(b.s.n, ctx, r, peer.Client.Cluster, cepv1connect.ClusterServiceClient.RemoveNode); done {
		return res, err
	}
	if r.NodeId == "" {
		return nil, fmt.Errorf("%w: node_id is required", api.ErrInvalidArgument)
	}
	res, err := b.s.n.Propose(ctx, meta.RemoveNode{Name: r.NodeId, Force: r.AllowFewerReplicas})
	if err != nil {
		return nil, mapErr(err)
	}
	nd := res.(*meta.Node)
	st, _ := b.s.n.gossipState(nd.ID)
	var held uint32
	for _, info := range b.s.n.Meta().Shards {
		if slices.Contains(info.Replicas, nd.ID) {
			held++
		}
	}
	return &cepv1.RemoveNodeResponse{Node: &cepv1.Node{Id: nd.ID, Address: nd.RaftAddr, ApiAddress: nd.APIAddr, GossipAddress: nd.GossipAddr,
		State: st, Removing: nd.Removing, IsMetaLeader: nd.ID == b.s.n.MetaLeader(), Replicas: held}}, nil
}

func (b clusterBackend) Shards(ctx context.Context, r *cepv1.ListShardsRequest) (*cepv1.ListShardsResponse, error) {
	if r.ClusterWide {
		return b.s.n.clusterShards(ctx)
	}
	return &cepv1.ListShardsResponse{Shards: b.s.n.localShards()}, nil
}

// localShards reports this node's shard replicas as ListShards does.
func (n *Node) localShards() []*cepv1.Shard {
	var out []*cepv1.Shard
	natsDown := n.natsLink.unreachableFor(time.Now())
	for _, sh := range n.Shards() {
		first, last := sh.Range()
		_, leader := sh.Raft().LeaderWithID()
		stats := sh.Raft().Stats()
		commit, _ := strconv.ParseUint(stats["commit_index"], 10, 64)
		s := &cepv1.Shard{Id: uint32(sh.ID()), KeyGroups: &cepv1.KeyGroupRange{First: uint32(first), Last: uint32(last)},
			LeaderNodeId: string(leader), CommitIndex: commit, LastAppliedIndex: sh.FSM().Index(), SnapshotIndex: sh.SnapshotIndex(),
			NatsUnreachableMs: uint64(natsDown.Milliseconds())}
		if natsDown > 0 && s.NatsUnreachableMs == 0 {
			s.NatsUnreachableMs = 1 // unanswered, if for less than a millisecond
		}
		if f := sh.Raft().GetConfiguration(); f.Error() == nil {
			for _, srv := range f.Configuration().Servers {
				rep := &cepv1.Replica{NodeId: string(srv.ID), Suffrage: cepv1.Suffrage_SUFFRAGE_VOTER}
				if srv.Suffrage != raft.Voter {
					rep.Suffrage = cepv1.Suffrage_SUFFRAGE_NONVOTER
				}
				if string(srv.ID) == n.cfg.NodeID {
					rep.AppliedIndex, rep.NatsUnreachable = s.LastAppliedIndex, natsDown > 0
				} else {
					rep.AppliedUnknown = true // only its own node knows
				}
				s.Replicas = append(s.Replicas, rep)
			}
		}
		sh.FSM().View(func(st *shard.State, _ uint64) {
			for _, p := range st.Patterns() {
				s.Running = append(s.Running, &cepv1.PatternVersion{Name: p.Name, Version: p.Version})
				s.Patterns++
				s.PartialMatches += uint64(p.PartialMatches)
				s.BufferedEvents += uint64(p.BufferedEvents)
			}
			s.OutboxRecords = uint64(len(st.Outbox()))
			s.RestoreId = st.RestoreID()
			s.Clocks = sourceClocks(st.Watermarks())
		})
		s.UnreadStreams = n.unread.list(sh.ID())
		if led, ok := n.ClockStatus(sh.ID()); ok {
			for _, c := range s.Clocks {
				for _, l := range led {
					if l.Pattern == c.Pattern && l.Source == c.Source {
						c.Idle, c.IdleKnown = l.Idle, true
					}
				}
			}
		}
		out = append(out, s)
	}
	return append(out, n.quarantine.listShards()...)
}

// clusterShards lists every shard of the cluster as its leader reports it,
// asking every member (this one included) for its replicas in parallel; a
// shard without a leader any member knows of is listed from the shard map,
// with a replica that answered for it when there is one.
func (n *Node) clusterShards(ctx context.Context) (*cepv1.ListShardsResponse, error) {
	peers := n.peers()
	answers := make([][]*cepv1.Shard, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p.ID == n.cfg.NodeID {
				answers[i] = n.localShards()
				return
			}
			answers[i], _ = n.peerAt(p.APIAddr).Shards(ctx) // unreachable: nothing
		}()
	}
	wg.Wait()
	best := map[uint32]*cepv1.Shard{}
	// own: each node's report of its own replica of a shard; natsDown:
	// the nodes whose NATS does not answer
	own := map[string]map[uint32]uint64{}
	natsDown := map[string]bool{}
	// quarantined: the replicas their nodes report quarantined
	quarantined := map[uint32]map[string]string{}
	for i, p := range peers {
		for _, s := range answers[i] {
			if s.Quarantined != "" {
				if quarantined[s.Id] == nil {
					quarantined[s.Id] = map[string]string{}
				}
				quarantined[s.Id][p.ID] = s.Quarantined
				continue
			}
			if s.LeaderNodeId == p.ID || best[s.Id] == nil {
				best[s.Id] = s // the leader's own report wins
			}
			if own[p.ID] == nil {
				own[p.ID] = map[uint32]uint64{}
			}
			own[p.ID][s.Id] = s.LastAppliedIndex
			natsDown[p.ID] = natsDown[p.ID] || s.NatsUnreachableMs > 0
		}
	}
	for _, s := range best {
		for _, rep := range s.Replicas {
			applied, ok := own[rep.NodeId][s.Id]
			rep.AppliedIndex, rep.AppliedUnknown, rep.NatsUnreachable = applied, !ok, natsDown[rep.NodeId]
		}
	}
	m := n.Meta()
	out := &cepv1.ListShardsResponse{}
	infos := slices.Clone(m.Shards)
	sort.Slice(infos, func(i, j int) bool { return infos[i].First < infos[j].First })
	for _, info := range infos {
		s := best[uint32(info.ID)]
		if s == nil {
			s = &cepv1.Shard{Id: uint32(info.ID), KeyGroups: &cepv1.KeyGroupRange{First: uint32(info.First), Last: uint32(info.Last)}}
			for _, id := range info.Replicas {
				applied, ok := own[id][s.Id]
				s.Replicas = append(s.Replicas, &cepv1.Replica{NodeId: id, Suffrage: cepv1.Suffrage_SUFFRAGE_UNSPECIFIED,
					AppliedIndex: applied, AppliedUnknown: !ok, NatsUnreachable: natsDown[id]})
			}
		}
		for _, rep := range s.Replicas {
			rep.Quarantined = quarantined[s.Id][rep.NodeId]
		}
		if s.LeaderNodeId == "" {
			// stopped: say why, when a replica is quarantined
			for _, id := range slices.Sorted(maps.Keys(quarantined[s.Id])) {
				s.Quarantined = fmt.Sprintf("%s: %s", id, quarantined[s.Id][id])
				break
			}
		}
		out.Shards = append(out.Shards, s)
	}
	return out, nil
}

func (b clusterBackend) SplitShard(ctx context.Context, r *cepv1.SplitShardRequest) (*cepv1.SplitShardResponse, error) {
	if res, done, err := forwarded(b.s.n, ctx, r, peer.Client.Cluster, cepv1connect.ClusterServiceClient.SplitShard); done {
		return res, err
	}
	n := b.s.n
	if err := n.canSplit(n.Meta()); err != nil {
		return nil, err
	}
	res, err := n.Propose(ctx, meta.SplitShard{ShardID: uint64(r.ShardId), At: int(r.AtKeyGroup)})
	if err != nil {
		return nil, mapErr(err)
	}
	s := res.(*meta.ShardInfo)
	out := &cepv1.SplitShardResponse{ShardId: uint32(s.ID), KeyGroups: &cepv1.KeyGroupRange{First: uint32(s.First), Last: uint32(s.SplitAt - 1)},
		NewShardId: uint32(s.SplitInto), NewKeyGroups: &cepv1.KeyGroupRange{First: uint32(s.SplitAt), Last: uint32(s.Last)}}
	wctx, cancel := context.WithTimeout(ctx, 3*n.cfg.DeployWait)
	defer cancel()
	out.Pending = !n.waitSplit(wctx, s.ID)
	return out, nil
}

// PublishAccess hands producers (cepctl publish) the publisher user of the
// cluster's embedded NATS server. The node can give it whenever it reaches
// NATS as the node user of that server (it has the cluster secret and no
// credentials file of its own); with a credentials file NATS is an
// external server whose users are its operator's business.
func (b clusterBackend) PublishAccess(ctx context.Context, r *cepv1.GetPublishAccessRequest) (*cepv1.GetPublishAccessResponse, error) {
	n := b.s.n
	out := &cepv1.GetPublishAccessResponse{}
	for _, u := range strings.Split(n.NATSURL(), ",") {
		if u = strings.TrimSpace(u); u != "" {
			out.NatsUrls = append(out.NatsUrls, u)
		}
	}
	switch {
	case n.cfg.NATSCreds != "":
		return nil, fmt.Errorf("%w: the cluster uses an external NATS server with credentials of its own: publish with credentials its operator gives you (cepctl publish --nats-creds or --nats-user)", api.ErrFailedPrecondition)
	case n.cfg.Secret.IsZero():
		return out, nil // an open server: no user
	}
	out.User, out.Password = NATSPublisherUser, n.cfg.Secret.Token(secret.NATSPublic)
	return out, nil
}

// SubscribeAccess hands consumers of the output (the nats CLI, a service
// of their own) the subscriber user of the cluster's embedded NATS
// server, under the conditions PublishAccess has.
func (b clusterBackend) SubscribeAccess(ctx context.Context, r *cepv1.GetSubscribeAccessRequest) (*cepv1.GetSubscribeAccessResponse, error) {
	n := b.s.n
	out := &cepv1.GetSubscribeAccessResponse{Subjects: slices.Clone(SubscriberSubjects)}
	for _, u := range strings.Split(n.NATSURL(), ",") {
		if u = strings.TrimSpace(u); u != "" {
			out.NatsUrls = append(out.NatsUrls, u)
		}
	}
	switch {
	case n.cfg.NATSCreds != "":
		return nil, fmt.Errorf("%w: the cluster uses an external NATS server with credentials of its own: ask its operator for a user that may subscribe to %s", api.ErrFailedPrecondition, strings.Join(SubscriberSubjects, " "))
	case n.cfg.Secret.IsZero():
		return out, nil // an open server: no user
	}
	out.User, out.Password = NATSSubscriberUser, n.cfg.Secret.Token(secret.NATSReader)
	return out, nil
}

// the optional procedures the API serves only for a backend that has them
var (
	_ api.PublishAccessBackend   = clusterBackend{}
	_ api.SubscribeAccessBackend = clusterBackend{}
	_ api.SourceSampleBackend    = sourceBackend{}
)
