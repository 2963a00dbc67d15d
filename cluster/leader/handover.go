package leader

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/cluster/plan"
	"github.com/cepcluster/cep/internal/raftlog"
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
func (r *Leader) handOver(ctx context.Context) bool {
	for {
		select {
		case <-ctx.Done():
			return true
		case <-time.After(r.env.Config.HandOverAfter):
		}
		h := plan.HandOver{Trigger: plan.Preferred, Self: r.env.NodeID, Preferred: r.preferred()}
		if !h.Due() {
			continue
		}
		addr, ok := r.env.Peers.RaftAddr(h.Preferred)
		if !ok || !r.isVoter(h.Preferred) {
			continue
		}
		// a transfer blocks new proposals until it ends: only try it when
		// the preferred replica answers and has caught up
		rep, err := r.env.Peers.Replica(ctx, h.Preferred, r.sh.ID())
		if err != nil {
			r.log.Debug("leadership stays here", "preferred", h.Preferred, "err", err)
			continue
		}
		rep.ID, rep.Voter = h.Preferred, true
		h.Applied = r.sh.FSM().Index()
		h.Replicas = []plan.Replica{rep}
		if _, ok := plan.HandOverTarget(h); !ok {
			r.log.Debug("leadership stays here", "preferred", h.Preferred, "its_applied_index", rep.Applied,
				"applied_index", h.Applied, "it_reaches_nats", rep.NATSReachable)
			continue
		}
		if err := raftlog.Wait(ctx, r.sh.Raft().LeadershipTransferToServer(raft.ServerID(h.Preferred), raft.ServerAddress(addr))); err != nil {
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
func (r *Leader) handOffIfBehind(ctx context.Context) bool {
	h := plan.HandOver{Trigger: plan.Behind, Self: r.env.NodeID, Preferred: r.preferred(),
		Applied: r.sh.FSM().Index(), Last: r.sh.Raft().LastIndex()}
	if !h.Due() {
		return false
	}
	h.Replicas = r.env.Peers.Replicas(ctx, r.sh)
	to, ok := plan.HandOverTarget(h)
	if !ok {
		return false
	}
	addr, found := r.env.Peers.RaftAddr(to)
	if !found {
		return false
	}
	if err := raftlog.Wait(ctx, r.sh.Raft().LeadershipTransferToServer(raft.ServerID(to), raft.ServerAddress(addr))); err != nil {
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

// leaveIfCutOffFromNATS runs for a leader session: once this node's NATS
// has not answered for NATSHandOverAfter, it transfers the shard's
// leadership to a replica that reaches NATS (plan.HandOverTarget), asking
// again every probe period while none does. Losing leadership ends the
// session through the leadership channel.
func (r *Leader) leaveIfCutOffFromNATS(ctx context.Context) {
	stuck := false // logged that no replica can take over, this outage
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.env.Config.NATSProbeEvery):
		}
		down := r.env.NATSUnreachableFor(time.Now())
		if down < r.env.Config.NATSHandOverAfter {
			stuck = false
			continue
		}
		to, ok := plan.HandOverTarget(plan.HandOver{Trigger: plan.CutOff, Self: r.env.NodeID, Preferred: r.preferred(),
			Applied: r.sh.FSM().Index(), Replicas: r.env.Peers.Replicas(ctx, r.sh)})
		if !ok {
			if !stuck {
				r.log.Warn("cannot reach NATS, and no replica that can has caught up: leadership stays", "for", down.Round(time.Second))
				stuck = true
			}
			continue
		}
		addr, found := r.env.Peers.RaftAddr(to)
		if !found {
			continue
		}
		if err := raftlog.Wait(ctx, r.sh.Raft().LeadershipTransferToServer(raft.ServerID(to), raft.ServerAddress(addr))); err != nil {
			r.log.Warn("cannot reach NATS; handing leadership over failed", "to", to, "err", err)
			continue
		}
		r.log.Warn("cannot reach NATS: leadership handed to a replica that can", "to", to, "for", down.Round(time.Second))
		return
	}
}
