package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/shard"
)

// preferred is the replica the shard map prefers as the shard's leader.
func (r *leader) preferred() string {
	m, _ := r.n.meta.fsm.View()
	for _, info := range m.Shards {
		if info.ID == r.sh.ID() && len(info.Replicas) > 0 {
			return info.Replicas[0]
		}
	}
	return ""
}

// isVoter reports whether node id is a voter of the shard's configuration.
func (r *leader) isVoter(id string) bool {
	f := r.sh.Raft().GetConfiguration()
	if f.Error() != nil {
		return false
	}
	return suffrages(f.Configuration())[id] == raft.Voter
}

// catchUpLag is how many log entries a non-voter may still lack when it
// is promoted: it keeps receiving them; what it must not need is a
// snapshot while it counts for the quorum.
const catchUpLag = 256

// manageMembers runs while this replica leads its shard: it makes the
// shard's configuration follow the shard map, one change at a time.
func (r *leader) manageMembers(ctx context.Context) {
	for {
		m, changed := r.n.meta.fsm.View()
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

// reconcileMembers makes one change: add a replica of the map as a
// non-voter; promote one that has caught up; once every replica of the
// map votes, remove one the map does not have (this one: hand leadership
// to a replica that stays, which removes it).
func (r *leader) reconcileMembers(ctx context.Context, m *meta.Meta) (busy bool, err error) {
	i := m.ShardIndex(r.sh.ID())
	if i < 0 || len(m.Shards[i].Replicas) == 0 {
		return false, nil
	}
	target := m.Shards[i].Replicas
	rf := r.sh.Raft()
	f := rf.GetConfiguration()
	if err := f.Error(); err != nil {
		return false, err
	}
	cfg := suffrages(f.Configuration())
	wait := func(what, id string, fut raft.Future) (bool, error) {
		if err := shard.Wait(ctx, fut); err != nil {
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
	for _, id := range target {
		if _, ok := cfg[id]; ok {
			continue
		}
		p, ok := r.n.peer(id)
		if !ok {
			continue
		}
		return wait("non-voter added", id, rf.AddNonvoter(raft.ServerID(id), raft.ServerAddress(p.RaftAddr), 0, 10*time.Second))
	}
	for _, id := range target {
		if cfg[id] != raft.Nonvoter {
			continue
		}
		p, ok := r.n.peer(id)
		if !ok {
			continue
		}
		applied, err := r.n.appliedAt(ctx, p.APIAddr, r.sh.ID())
		if err != nil || applied+catchUpLag < r.sh.FSM().Index() {
			busy = true
			continue // not caught up yet: asked again soon
		}
		return wait("promoted to voter", id, rf.AddVoter(raft.ServerID(id), raft.ServerAddress(p.RaftAddr), 0, 10*time.Second))
	}
	for _, id := range target {
		if cfg[id] != raft.Voter {
			return true, nil
		}
	}
	for _, s := range f.Configuration().Servers {
		id := string(s.ID)
		if slices.Contains(target, id) {
			continue
		}
		if id == r.n.cfg.NodeID {
			to := target[0]
			p, ok := r.n.peer(to)
			if !ok {
				return false, nil
			}
			return wait("leadership handed to "+to+" by", id, rf.LeadershipTransferToServer(raft.ServerID(to), raft.ServerAddress(p.RaftAddr)))
		}
		return wait("removed", id, rf.RemoveServer(s.ID, 0, 10*time.Second))
	}
	return false, nil
}
