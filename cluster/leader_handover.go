package cluster

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/cluster/plan"
	"github.com/cepcluster/cep/shard"
)

// handOver spreads leadership: each shard prefers the first replica of its
// replica list (the lists are rotated, so each node is preferred for some
// shards). A replica that is not the preferred one leads for a moment and
// then transfers leadership to it, once the preferred replica has applied
// the log up to about where this one has: a replica restarted a moment ago
// may hold the whole log and still be applying it, and as leader it would
// read and publish nothing until it had caught up (seconds under load).
// While the preferred replica is down or behind, this one keeps leading and
// asks again every HandOverAfter. Losing leadership ends the session
// through the leadership channel. The target is plan.HandOverTarget's.
func (r *leader) handOver(ctx context.Context) bool {
	for {
		select {
		case <-ctx.Done():
			return true
		case <-time.After(r.n.cfg.HandOverAfter):
		}
		h := plan.HandOver{Trigger: plan.Preferred, Self: r.n.cfg.NodeID, Preferred: r.preferred()}
		if !h.Due() {
			continue
		}
		p, ok := r.n.peer(h.Preferred)
		if !ok || !r.isVoter(h.Preferred) {
			continue
		}
		// a transfer blocks new proposals until it ends: only try it when
		// the preferred replica answers and has caught up
		rep, err := r.n.peerAt(p.APIAddr).Replica(ctx, r.sh.ID())
		if err != nil {
			r.log.Debug("leadership stays here", "preferred", h.Preferred, "err", err)
			continue
		}
		rep.id, rep.voter = h.Preferred, true
		h.Applied = r.sh.FSM().Index()
		h.Replicas = []plan.Replica{rep.plan()}
		if _, ok := plan.HandOverTarget(h); !ok {
			r.log.Debug("leadership stays here", "preferred", h.Preferred, "its_applied_index", rep.applied,
				"applied_index", h.Applied, "it_reaches_nats", rep.natsUnreachable == 0)
			continue
		}
		if err := shard.Wait(ctx, r.sh.Raft().LeadershipTransferToServer(raft.ServerID(h.Preferred), raft.ServerAddress(p.RaftAddr))); err != nil {
			r.log.Debug("leadership stays here", "preferred", h.Preferred, "err", err)
			continue
		}
		r.log.Info("leadership handed to the preferred replica", "to", h.Preferred)
		return true
	}
}

// handOffIfBehind runs when a session starts: a replica elected while it
// still has much of the log to apply (restarted a moment ago, replaying
// from its snapshot) would read and publish nothing until it had caught
// up, so it hands leadership to a voter that has nearly caught up
// (plan.HandOverTarget, trigger Behind). It reports whether leadership
// moved.
func (r *leader) handOffIfBehind(ctx context.Context) bool {
	h := plan.HandOver{Trigger: plan.Behind, Self: r.n.cfg.NodeID, Preferred: r.preferred(),
		Applied: r.sh.FSM().Index(), Last: r.sh.Raft().LastIndex()}
	if !h.Due() {
		return false
	}
	h.Replicas = r.n.replicaReports(ctx, r.sh)
	to, ok := plan.HandOverTarget(h)
	if !ok {
		return false
	}
	p, found := r.n.peer(to)
	if !found {
		return false
	}
	if err := shard.Wait(ctx, r.sh.Raft().LeadershipTransferToServer(raft.ServerID(to), raft.ServerAddress(p.RaftAddr))); err != nil {
		r.log.Debug("leadership stays here while catching up", "to", to, "err", err)
		return false
	}
	r.log.Info("leadership handed to a replica that has applied more", "to", to, "its_applied_index", appliedOf(h.Replicas, to), "applied_index", h.Applied)
	return true
}

// appliedOf is how far replica id has applied the log, as reported.
func appliedOf(reps []plan.Replica, id string) uint64 {
	for _, r := range reps {
		if r.ID == id {
			return r.Applied
		}
	}
	return 0
}
