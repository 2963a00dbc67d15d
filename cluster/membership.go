package cluster

import (
	"context"
	"crypto/hmac"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/cluster/gossip"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/peer"
	"github.com/cepcluster/cep/cluster/plan"
	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/internal/clusterversion"
	"github.com/cepcluster/cep/internal/raftlog"
	"github.com/cepcluster/cep/internal/version"
)

// Membership. The gossip (memberlist) says which nodes exist and which are
// alive; the metadata group records the members and the shard map; each
// shard's Raft configuration follows its entry in the map. The metadata
// leader registers the nodes that join, keeps its own group's voters, and
// changes the shard map (placement) when nodes join, are removed or stay
// unreachable for DeadAfter; each shard's leader then adds the new
// replicas as non-voters, promotes them once they have caught up, and only
// then removes the replicas the map dropped; each node opens the replicas
// the map gives it and deletes those the shard's configuration no longer
// has. Nothing of this is in a state machine: the logs only record the
// decisions (meta.PutNode, meta.SetReplicas, configuration changes).

// membership runs this node's part of membership: it joins the gossip and
// keeps it joined, and, while this node leads the metadata group, steers
// the members, the metadata group's configuration and the shard map (run).
// It owns what only those loops use.
type membership struct {
	n *Node
	// unreachable: since when each member has been unreachable, as run
	// (checkReachable) found while this node leads the metadata group
	unreachable map[string]time.Time
	// unprovenWarned: the gossip claims without a proof of the secret
	// already warned of
	unprovenWarned map[string]bool
	// behindWarned: the members below the cluster version already warned of
	behindWarned map[string]bool
	// removed: this node has left the cluster (noticeRemoved), read by
	// Ready
	removed atomic.Bool
}

// joinGossip starts this node's gossip and joins the cluster's: the
// configured seeds, the initial members, then every member the metadata
// knows that the gossip does not see.
func (ms *membership) joinGossip() error {
	n := ms.n
	// encrypted and authenticated with a key of the cluster secret, unless
	// one is given; without either (Insecure) in clear, open to anyone
	key := n.cfg.GossipKey
	if len(key) == 0 && !n.cfg.Secret.IsZero() {
		key = n.cfg.Secret.Derive(secret.Gossip, 32)
	}
	var prove func(gossip.Claim) string
	if !n.cfg.Secret.IsZero() {
		prove = n.cfg.memberProof
	}
	g, err := gossip.Start(gossip.Config{
		NodeID: n.cfg.NodeID, BindAddr: n.cfg.GossipAddr, Advertise: n.advertised.GossipAddr,
		RaftAddr: n.mux.Addr().String(), APIAddr: n.advertised.APIAddr,
		Logger: n.log.With("component", "gossip"), Fast: n.cfg.knobs().FastGossip, SecretKey: key, Fresh: n.meta.fresh, Proto: protoCurrent,
		Prove: prove, Release: version.Get().Version, Version: int(clusterversion.Highest),
	})
	if err != nil {
		return err // says "gossip: ..." itself
	}
	if n.cfg.TLS != nil && len(key) == 0 {
		n.log.Warn("the membership gossip is not encrypted while the cluster uses TLS: give every node the same --gossip-key", "gossip", g.Addr())
	}
	n.gossip = g
	n.spawn(ms.keepJoined)
	return nil
}

// memberProof is a member's proof of its claim (its id, addresses and
// start), gossiped in its metadata: an HMAC under a key of the cluster
// secret, which the gossip key does not give. A process that has only the
// gossip key (--gossip-key) gossips, but is never registered as a member,
// cannot move a member's id to its own addresses, and so is never handed
// replicas, a seat in the metadata group, or the node credential.
func (c *Config) memberProof(cl gossip.Claim) string {
	return hex.EncodeToString(c.Secret.MAC(secret.Member, cl.Bytes()))
}

// proven reports whether mb proves its claim with the cluster secret
// (always, in an insecure cluster, which has none).
func (c *Config) proven(mb gossip.Member) bool {
	if c.Secret.IsZero() {
		return true
	}
	p, err := hex.DecodeString(mb.Proof)
	return err == nil && hmac.Equal(p, c.Secret.MAC(secret.Member, mb.Claim().Bytes()))
}

// raftIDAt is the id of the member whose Raft address is addr, as the
// metadata has the members (the configured peers before it has any), ""
// unless exactly one has it: the id the mux states when it dials addr,
// which a node of another id there refuses.
func (n *Node) raftIDAt(addr string) string {
	var ids []string
	if fsm := n.metaFSM.Load(); fsm != nil {
		fsm.Read(func(m *meta.Meta) {
			for _, nd := range m.Nodes {
				if nd.RaftAddr == addr {
					ids = append(ids, nd.ID)
				}
			}
			if len(m.Nodes) > 0 && len(ids) == 0 {
				ids = []string{""} // not a member's address: do not guess
			}
		})
	}
	if ids == nil {
		for _, p := range n.cfg.Peers {
			if p.RaftAddr == addr {
				ids = append(ids, p.ID)
			}
		}
	}
	if len(ids) != 1 {
		return ""
	}
	return ids[0]
}

// initLoop records the cluster layout in the metadata group once a leader
// exists (idempotent: only the first init takes effect).
func (ms *membership) initLoop() {
	n := ms.n
	for {
		m, changed := n.meta.fsm.View()
		if m.KeyGroups != 0 {
			return
		}
		if n.meta.raft.State() == raft.Leader {
			var nodes []meta.Node
			for _, p := range n.cfg.Peers {
				nodes = append(nodes, meta.Node{ID: p.ID, RaftAddr: p.RaftAddr, APIAddr: p.APIAddr, GossipAddr: p.GossipAddr})
			}
			_, err := n.meta.propose(n.ctx, meta.Init{ClusterID: "cep", KeyGroups: n.cfg.KeyGroups, Shards: n.infos,
				Nodes: nodes, Replication: n.cfg.Replicas})
			if err == nil {
				return
			}
		}
		select {
		case <-n.ctx.Done():
			return
		case <-changed:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// keepJoined joins the gossip of every member this node should see and
// does not (the Join seeds while it sees no one), every 10 seconds, or
// every second while joining fails.
func (ms *membership) keepJoined() {
	n := ms.n
	warned := ""
	for {
		every := 10 * time.Second
		var seeds []string
		add := func(id, addr string) {
			if addr == "" || id == n.cfg.NodeID || addr == n.gossip.Addr() || slices.Contains(seeds, addr) {
				return
			}
			if mb, ok := n.gossip.Member(id); ok && mb.State == gossip.Alive {
				return
			}
			seeds = append(seeds, addr)
		}
		if ms.aliveMembers() <= 1 {
			for _, s := range n.cfg.Join {
				add("", s)
			}
		}
		for _, p := range n.peers() {
			add(p.ID, p.GossipAddr)
		}
		if len(seeds) > 0 {
			if _, err := n.gossip.Join(seeds); err != nil {
				// a seed that does not take this node's key (another
				// cluster secret) never will: say so once
				if msg := err.Error(); strings.Contains(msg, "crypt") && msg != warned {
					n.log.Warn("the gossip of the seeds does not take this node's key: are they of this cluster, with the same cluster secret (or --gossip-key)?", "seeds", seeds, "err", err)
					warned = msg
				} else {
					n.log.Debug("joining the gossip", "seeds", seeds, "err", err)
				}
				every = time.Second
			}
		}
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// aliveMembers counts the members the gossip sees alive, this node included.
func (ms *membership) aliveMembers() int {
	n := ms.n
	c := 0
	for _, mb := range n.gossip.Members() {
		if mb.State == gossip.Alive {
			c++
		}
	}
	return c
}

// run runs the metadata leader's part of membership.
func (ms *membership) run() {
	n := ms.n
	for {
		m, changed := n.meta.fsm.View()
		var gossipChanged <-chan struct{}
		if n.gossip != nil {
			gossipChanged = n.gossip.Changed()
		}
		wait := time.Second
		if n.IsMetaLeader() {
			if m.KeyGroups != 0 {
				busy, err := ms.steer(m)
				if err != nil && n.ctx.Err() == nil {
					n.log.Warn("managing the cluster's members", "err", err)
				} else if busy {
					wait = busyPoll // the next step, or a change under way
				}
			}
		} else {
			ms.unreachable = nil // a new term of leadership looks afresh
			ms.noticeRemoved(m)
		}
		select {
		case <-n.ctx.Done():
			return
		case <-changed:
		case <-gossipChanged:
		case <-time.After(wait):
		}
	}
}

// noticeRemoved says once, loudly, that this node has been removed from
// the cluster (cepctl node remove): it keeps running, serving nothing,
// until its operator stops it; /readyz says so from then on.
func (ms *membership) noticeRemoved(m *meta.Meta) {
	n := ms.n
	if ms.removed.Load() || n.gossip == nil {
		return
	}
	self, ok := n.gossip.Member(n.cfg.NodeID)
	if !ok {
		return
	}
	inGroup := true
	if f := n.meta.raft.GetConfiguration(); f.Error() == nil {
		inGroup = slices.ContainsFunc(f.Configuration().Servers, func(s raft.Server) bool { return string(s.ID) == n.cfg.NodeID })
	}
	// the group may drop this node before sending it the change that
	// does: a node left unheard by any leader for removedSilence is out
	// of it as well
	if lc := n.meta.raft.LastContact(); inGroup && !n.IsMetaLeader() && !lc.IsZero() && time.Since(lc) > removedSilence {
		inGroup = false
	}
	if !plan.RemovedSelf(m, n.cfg.NodeID, self.Fresh, self.Started, len(n.Shards()), inGroup) {
		return
	}
	ms.removed.Store(true)
	n.log.Error("this node has been removed from the cluster: it holds no replica and no part in the metadata, and serves nothing; stop it (its data directory may go), or start it with an empty data directory to join again")
}

// removedSilence is how long a node being removed goes without hearing
// from a metadata leader before it takes itself for out of the group.
const removedSilence = 10 * time.Second

// busyPoll is how soon the membership loops look again after a change,
// or while one is under way (a replica catching up, shards moving).
const busyPoll = 100 * time.Millisecond

// steer makes one change towards the membership the metadata and the
// gossip call for (the next round sees its effect); busy reports that it
// made one or that one is under way.
func (ms *membership) steer(m *meta.Meta) (busy bool, err error) {
	n := ms.n
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	defer cancel()
	if len(m.Nodes) == 0 {
		// metadata written before members were recorded: the configured ones
		for _, p := range n.cfg.Peers {
			if _, err := n.meta.propose(ctx, meta.PutNode{Node: &meta.Node{ID: p.ID, RaftAddr: p.RaftAddr, APIAddr: p.APIAddr, GossipAddr: p.GossipAddr}}); err != nil {
				return false, err
			}
		}
		return true, nil
	}
	if done, err := ms.registerMembers(ctx, m); done || err != nil {
		return done, err
	}
	ms.checkReachable(m)
	if done, err := n.steerSplits(ctx, m); done || err != nil {
		return done, err
	}
	members := ms.members(m) // as checkReachable found them
	if done, err := ms.steerMetaGroup(ctx, members); done || err != nil {
		return done, err
	}
	return ms.steerReplicas(ctx, m, members)
}

// registerMembers records the nodes the gossip sees alive that the
// metadata does not have, or has at other addresses, once their API
// answers there (with TLS, a node with a certificate of the cluster's CA).
func (ms *membership) registerMembers(ctx context.Context, m *meta.Meta) (bool, error) {
	n := ms.n
	for _, mb := range n.gossip.Members() {
		if mb.State != gossip.Alive || mb.RaftAddr == "" || mb.APIAddr == "" {
			continue
		}
		if !m.MayRejoin(mb.ID, mb.Fresh, mb.Started) {
			continue // a process removed from the cluster, still running
		}
		nd := m.Node(mb.ID)
		if nd == nil && !ms.readsVersion(mb, m.ActiveVersion()) {
			continue
		}
		if nd != nil && nd.RaftAddr == mb.RaftAddr && nd.APIAddr == mb.APIAddr && nd.GossipAddr == mb.GossipAddr {
			continue
		}
		if !n.cfg.proven(mb) {
			// has the gossip key (or replays a member's metadata with
			// other addresses) but not the cluster secret
			ms.warnUnproven(mb)
			continue
		}
		if n.peerAt(mb.APIAddr).Probe(ctx) != peer.Alive {
			n.log.Debug("a member of the gossip does not answer on its API yet", "member", mb.ID, "api", mb.APIAddr)
			continue
		}
		_, err := n.meta.propose(ctx, meta.PutNode{Node: &meta.Node{ID: mb.ID, RaftAddr: mb.RaftAddr, APIAddr: mb.APIAddr, GossipAddr: mb.GossipAddr},
			Fresh: mb.Fresh, Started: mb.Started})
		if errors.Is(err, meta.ErrPrecondition) {
			n.log.Debug("not taking back a removed node", "member", mb.ID, "err", err)
			continue
		}
		if err != nil {
			return true, fmt.Errorf("registering node %s: %w", mb.ID, err)
		}
		if nd == nil {
			n.log.Info("node joined", "joined", mb.ID, "raft", mb.RaftAddr, "api", mb.APIAddr)
		} else {
			n.log.Info("node's addresses changed", "member", mb.ID, "raft", mb.RaftAddr, "api", mb.APIAddr)
		}
		return true, nil
	}
	return false, nil
}

// warnUnproven warns, once per claim, of a gossip member whose claim does
// not prove the cluster secret.
func (ms *membership) warnUnproven(mb gossip.Member) {
	n := ms.n
	key := mb.ID + "\x00" + string(mb.Claim().Bytes())
	if ms.unprovenWarned == nil {
		ms.unprovenWarned = map[string]bool{}
	}
	if ms.unprovenWarned[key] {
		return
	}
	if len(ms.unprovenWarned) > 1000 {
		clear(ms.unprovenWarned) // bounded: a flood of claims is warned of again
	}
	ms.unprovenWarned[key] = true
	n.log.Warn("a member of the gossip does not prove the cluster secret; not registering it (a process with the gossip key only, or a node of another cluster)",
		"member", mb.ID, "gossip", mb.GossipAddr, "raft", mb.RaftAddr, "api", mb.APIAddr)
}

// down reports whether member id has been unreachable for DeadAfter, as
// checkReachable last found.
func (ms *membership) down(id string) bool {
	n := ms.n
	since, ok := ms.unreachable[id]
	return ok && time.Since(since) >= n.cfg.DeadAfter
}

// checkReachable records since when each member has been unreachable:
// dead in the gossip (since the gossip declared it so) or not seen by it
// (its gossip address is not known; since this node first found it so),
// and not answering on its API either. Only the metadata leader's loop
// calls it.
func (ms *membership) checkReachable(m *meta.Meta) {
	n := ms.n
	if ms.unreachable == nil {
		ms.unreachable = map[string]time.Time{}
	}
	for id := range ms.unreachable {
		if m.Node(id) == nil {
			delete(ms.unreachable, id)
		}
	}
	for _, nd := range m.Nodes {
		if nd.ID == n.cfg.NodeID {
			continue
		}
		mb, seen := n.gossip.Member(nd.ID)
		if seen && mb.State != gossip.Dead {
			delete(ms.unreachable, nd.ID)
			continue
		}
		// dead in the gossip, or not seen by it: its API decides (a node
		// whose gossip port alone is blocked still serves its replicas)
		if n.peerAt(nd.APIAddr).Probe(n.ctx) == peer.Alive {
			delete(ms.unreachable, nd.ID)
		} else if _, ok := ms.unreachable[nd.ID]; !ok {
			since := time.Now()
			if seen {
				since = mb.Since
			}
			ms.unreachable[nd.ID] = since
		}
	}
}

// members are the metadata's nodes as the planners take them: down for
// DeadAfter (checkReachable), alive in the gossip now.
func (ms *membership) members(m *meta.Meta) []plan.Member {
	n := ms.n
	out := make([]plan.Member, 0, len(m.Nodes))
	for _, nd := range m.Nodes {
		mb, seen := n.gossip.Member(nd.ID)
		out = append(out, plan.Member{ID: nd.ID, RaftAddr: nd.RaftAddr, Removing: nd.Removing,
			Down: ms.down(nd.ID), Alive: seen && mb.State == gossip.Alive})
	}
	return out
}

// metaCatchUpLag is how far behind the leader's commit index a member's
// copy of the metadata log may be for it to be promoted to a voter.
const metaCatchUpLag = 16

// steerMetaGroup makes the change plan.MetaGroupChange decides for the
// metadata group's configuration: every member a server (non-voter
// first), an odd number of voters up to plan.MetaVoters among the members
// that have caught up, voters that leave taken out while a majority of
// the others is up, members the metadata forgot removed.
func (ms *membership) steerMetaGroup(ctx context.Context, members []plan.Member) (bool, error) {
	n := ms.n
	rf := n.meta.raft
	f := rf.GetConfiguration()
	if err := f.Error(); err != nil {
		return true, err
	}
	if changed, err := n.quarantine.demoteMeta(ctx, f.Configuration()); changed || err != nil {
		return true, err
	}
	var servers []plan.Server
	for _, s := range f.Configuration().Servers {
		servers = append(servers, plan.Server{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	var nonvoters []string
	for _, s := range servers {
		if !s.Voter {
			nonvoters = append(nonvoters, s.ID)
		}
	}
	c := plan.MetaGroupChange(n.cfg.NodeID, members, servers, ms.metaCaughtUp(ctx, rf.CommitIndex(), nonvoters), plan.MetaVoters)
	var fut raft.Future
	id := c.ID
	switch c.Kind {
	case plan.None:
		return false, nil
	case plan.AddNonvoter:
		fut = rf.AddNonvoter(raft.ServerID(c.ID), raft.ServerAddress(c.Addr), 0, 0)
	case plan.Promote:
		fut = rf.AddVoter(raft.ServerID(c.ID), raft.ServerAddress(c.Addr), 0, 0)
	case plan.Remove:
		fut = rf.RemoveServer(raft.ServerID(c.ID), 0, 0)
	case plan.Demote:
		fut = rf.DemoteVoter(raft.ServerID(c.ID), 0, 0)
	case plan.Transfer:
		fut, id = rf.LeadershipTransfer(), n.cfg.NodeID
	}
	if err := raftlog.Wait(ctx, fut); err != nil {
		return true, fmt.Errorf("metadata group: %s %s: %w", c.Kind, id, err)
	}
	n.log.Info("metadata group changed", "change", c.Kind.String(), "member", id)
	return true, nil
}

// metaCaughtUp is how plan.MetaGroupChange learns whether a non-voter has
// caught up: the member answers on its API that it hears from this node
// as the metadata leader (so the Raft traffic reaches it) and has the log
// committed to within metaCatchUpLag of this node's commit index
// (commit). A member that only answers health checks never has. The
// first question asks all the group's nonvoters at once, so that members
// slow to answer delay a round by one timeout, not one each.
func (ms *membership) metaCaughtUp(ctx context.Context, commit uint64, nonvoters []string) func(id string) bool {
	var once sync.Once
	caught := make([]bool, len(nonvoters))
	return func(id string) bool {
		once.Do(func() {
			var wg sync.WaitGroup
			for i, id := range nonvoters {
				wg.Go(func() { caught[i] = ms.metaMemberCaughtUp(ctx, commit, id) })
			}
			wg.Wait()
		})
		i := slices.Index(nonvoters, id)
		return i >= 0 && caught[i]
	}
}

func (ms *membership) metaMemberCaughtUp(ctx context.Context, commit uint64, id string) bool {
	n := ms.n
	p, ok := n.peer(id)
	if !ok || p.APIAddr == "" {
		return false
	}
	its, leader, err := n.peerAt(p.APIAddr).MetaProgress(ctx)
	if err != nil {
		n.log.Debug("a non-voter of the metadata group does not say how far it is", "member", id, "err", err)
		return false
	}
	ok = leader == n.cfg.NodeID && its+metaCatchUpLag >= commit
	if !ok {
		n.log.Debug("a non-voter of the metadata group is behind", "member", id, "its_leader", leader, "commit", its, "leader_commit", commit)
	}
	return ok
}

// steerReplicas carries out what plan.ReplicaChanges decides for the shard
// map: the moves placement calls for, a split for the nodes, or a removed
// node forgotten once it holds nothing.
func (ms *membership) steerReplicas(ctx context.Context, m *meta.Meta, members []plan.Member) (busy bool, err error) {
	n := ms.n
	in := plan.Replicas{Shards: m.Shards, Members: members, Replication: m.EffectiveReplication(), AutoSplit: !n.cfg.NoAutoSplit}
	p := plan.ReplicaChanges(in)
	if p.NeedConverged {
		configs := ms.shardConfigs(ctx, m)
		in.Converged = make(map[uint64]bool, len(m.Shards))
		for _, info := range m.Shards {
			in.Converged[info.ID] = converged(info.Replicas, configs[info.ID])
		}
		p = plan.ReplicaChanges(in)
	}
	for _, mv := range p.Moves {
		if _, err := n.meta.propose(ctx, meta.SetReplicas{ShardID: mv.ShardID, Replicas: mv.To, ExpectReplicas: mv.From}); err != nil {
			return false, fmt.Errorf("shard %d: %w", mv.ShardID, err)
		}
		n.log.Info("shard's replicas change", "shard", mv.ShardID, "from", mv.From, "to", mv.To)
	}
	switch {
	case p.SplitForNodes:
		return ms.splitForNodes(ctx, m)
	case p.Forget != "":
		if _, err := n.meta.propose(ctx, meta.ForgetNode{Name: p.Forget, Time: n.cfg.Now().UnixMilli()}); err != nil {
			return false, fmt.Errorf("removing node %s: %w", p.Forget, err)
		}
		n.log.Info("node removed from the cluster", "removed", p.Forget)
		if n.gossip != nil {
			n.gossip.Forget(p.Forget)
		}
	}
	return p.Busy, nil
}

// splitForNodes splits the shard plan.SplitForNodes picks when the cluster
// has more active nodes than shards and every shard is placed: a shard is
// processed by one leader, so a node leads one only once there are as
// many.
func (ms *membership) splitForNodes(ctx context.Context, m *meta.Meta) (bool, error) {
	n := ms.n
	if err := n.canSplit(m); err != nil {
		n.log.Debug("not splitting a shard for the nodes added", "err", err)
		return false, nil
	}
	id, wait := plan.SplitForNodes(m.Shards, m.KeyGroups)
	if wait || id == 0 {
		return wait, nil
	}
	res, err := n.meta.propose(ctx, meta.SplitShard{ShardID: id})
	if err != nil {
		return false, fmt.Errorf("splitting shard %d for the nodes added: %w", id, err)
	}
	s := res.(*meta.ShardInfo)
	n.log.Info("shard splits: more nodes than shards", "shard", s.ID, "at", s.SplitAt, "into", s.SplitInto, "shards", len(m.Shards)+1)
	return true, nil
}

// converged reports whether a shard's configuration has exactly the
// replicas of its map entry, all voters.
func converged(replicas []string, servers map[string]raft.ServerSuffrage) bool {
	if servers == nil || len(servers) != len(replicas) {
		return false
	}
	for _, id := range replicas {
		if s, ok := servers[id]; !ok || s != raft.Voter {
			return false
		}
	}
	return true
}

// shardConfigs returns each shard's configuration as its leader reports
// it: this node's replica when it leads, else the node whose reports
// (ListShards) name itself the shard's leader. A shard whose leader does not answer
// is missing.
func (ms *membership) shardConfigs(ctx context.Context, m *meta.Meta) map[uint64]map[string]raft.ServerSuffrage {
	n := ms.n
	out := map[uint64]map[string]raft.ServerSuffrage{}
	for _, sh := range n.Shards() {
		if !sh.IsLeader() {
			continue
		}
		if f := sh.Raft().GetConfiguration(); f.Error() == nil {
			out[sh.ID()] = suffrages(f.Configuration())
		}
	}
	if len(out) == len(m.Shards) {
		return out
	}
	for _, nd := range m.Nodes {
		if nd.ID == n.cfg.NodeID {
			continue
		}
		if mb, ok := n.gossip.Member(nd.ID); ok && mb.State == gossip.Dead {
			continue
		}
		reports, err := n.peerAt(nd.APIAddr).Reports(ctx)
		if err != nil {
			continue
		}
		addLeaderConfigs(out, nd.ID, reports)
	}
	return out
}

// addLeaderConfigs adds to out the configuration of each group whose
// report by node id names id its leader, where out has none.
func addLeaderConfigs(out map[uint64]map[string]raft.ServerSuffrage, id string, reports []plan.Report) {
	for _, s := range reports {
		if s.Leader != id || out[s.Group] != nil {
			continue
		}
		c := map[string]raft.ServerSuffrage{}
		for _, r := range s.Servers {
			c[r.ID] = raft.Voter
			if !r.Voter {
				c[r.ID] = raft.Nonvoter
			}
		}
		out[s.Group] = c
	}
}

func suffrages(c raft.Configuration) map[string]raft.ServerSuffrage {
	out := make(map[string]raft.ServerSuffrage, len(c.Servers))
	for _, s := range c.Servers {
		out[string(s.ID)] = s.Suffrage
	}
	return out
}
