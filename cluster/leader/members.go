package leader

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/plan"
	"github.com/cepcluster/cep/internal/raftlog"
)

// preferred is the replica the shard map prefers as the shard's leader.
func (r *Leader) preferred() string {
	m, _ := r.env.Meta.View()
	return PreferredOf(m, r.sh.ID())
}

// PreferredOf is the replica the shard map m prefers as shard id's leader,
// "" when it lists none.
func PreferredOf(m *meta.Meta, id uint64) string {
	for _, info := range m.Shards {
		if info.ID == id && len(info.Replicas) > 0 {
			return info.Replicas[0]
		}
	}
	return ""
}

// isVoter reports whether node id is a voter of the shard's configuration.
func (r *Leader) isVoter(id string) bool {
	f := r.sh.Raft().GetConfiguration()
	if f.Error() != nil {
		return false
	}
	return suffrages(f.Configuration())[id] == raft.Voter
}

// busyPoll is how soon the members are looked at again while a change is
// under way (as the node's metadata membership loop does).
const busyPoll = 100 * time.Millisecond

// catchUpLag is how many log entries a non-voter may still lack when it
// is promoted: it keeps receiving them; what it must not need is a
// snapshot while it counts for the quorum.
const catchUpLag = 256

// manageMembers runs while this replica leads its shard: it makes the
// shard's configuration follow the shard map, one change at a time.
func (r *Leader) manageMembers(ctx context.Context) {
	for {
		m, changed := r.env.Meta.View()
		wait := time.Second
		busy, err := r.reconcileMembers(ctx, m)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("changing the shard's replicas", "err", err)
		} else if busy {
			wait = busyPoll
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-time.After(wait):
		}
	}
}

// reconcileMembers makes the shard's configuration one change closer to
// the shard map, as plan.ShardChange decides (add a replica of the map as
// a non-voter; promote one that has caught up; once every replica of the
// map votes, remove one the map does not have, or for this one hand
// leadership to a replica that stays, which removes it). It gathers what
// the planner needs and carries the change out.
func (r *Leader) reconcileMembers(ctx context.Context, m *meta.Meta) (busy bool, err error) {
	i := m.ShardIndex(r.sh.ID())
	if i < 0 || len(m.Shards[i].Replicas) == 0 {
		return false, nil
	}
	rf := r.sh.Raft()
	f := rf.GetConfiguration()
	if err := f.Error(); err != nil {
		return false, err
	}
	if changed, err := r.env.Quarantine.Demote(ctx, r.sh, f.Configuration()); changed || err != nil {
		return changed, err
	}
	caughtUp := func(id string) bool {
		applied, err := r.env.Peers.Applied(ctx, id, r.sh.ID())
		return err == nil && applied+catchUpLag >= r.sh.FSM().Index()
	}
	c, busy := plan.ShardChange(shardMembers(r.env.NodeID, m.Shards[i].Replicas, f.Configuration(), r.env.Peers.RaftAddr, caughtUp))
	wait := func(what, id string, fut raft.Future) (bool, error) {
		if err := raftlog.Wait(ctx, fut); err != nil {
			return false, fmt.Errorf("%s %s: %w", what, id, err)
		}
		r.log.Info("shard's configuration changed", "change", what, "member", id)
		// the state machine never sees a configuration entry: an empty
		// batch after it brings the applied index to the log's end
		if err := r.sh.Barrier(ctx, 10*time.Second); err != nil {
			r.log.Debug("barrier after a configuration change", "err", err)
		}
		return true, nil
	}
	id, addr := raft.ServerID(c.ID), raft.ServerAddress(c.Addr)
	switch c.Kind {
	case plan.AddNonvoter:
		return wait("non-voter added", c.ID, rf.AddNonvoter(id, addr, 0, 10*time.Second))
	case plan.Promote:
		return wait("promoted to voter", c.ID, rf.AddVoter(id, addr, 0, 10*time.Second))
	case plan.Remove:
		return wait("removed", c.ID, rf.RemoveServer(id, 0, 10*time.Second))
	case plan.Transfer:
		return wait("leadership handed to "+c.ID+" by", r.env.NodeID, rf.LeadershipTransferToServer(id, addr))
	}
	return busy, nil
}

// shardMembers is what plan.ShardChange needs of a shard led by self:
// the map's replicas (target), the configuration's servers in order, the
// Raft addresses of the replicas of the map this node knows (addr), and
// for each non-voter among them whether it has caught up (asked only of
// those). A server in raft's deprecated Staging suffrage counts as neither
// voter nor caught up, so it is never promoted and holds removals back.
func shardMembers(self string, target []string, cfg raft.Configuration, addr func(string) (string, bool), caughtUp func(id string) bool) plan.ShardMembers {
	s := plan.ShardMembers{Self: self, Target: target, Addrs: map[string]string{}, CaughtUp: map[string]bool{}}
	for _, sv := range cfg.Servers {
		s.Servers = append(s.Servers, plan.Server{ID: string(sv.ID), Addr: string(sv.Address), Voter: sv.Suffrage == raft.Voter})
	}
	suffrage := suffrages(cfg)
	for _, id := range target {
		a, ok := addr(id)
		if !ok {
			continue
		}
		s.Addrs[id] = a
		if suffrage[id] == raft.Nonvoter {
			s.CaughtUp[id] = caughtUp(id)
		}
	}
	return s
}

// suffrages maps each server of c to its suffrage.
func suffrages(c raft.Configuration) map[string]raft.ServerSuffrage {
	out := make(map[string]raft.ServerSuffrage, len(c.Servers))
	for _, s := range c.Servers {
		out[string(s.ID)] = s.Suffrage
	}
	return out
}
