package cluster

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

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
// through the leadership channel.
func (r *leader) handOver(ctx context.Context) bool {
	for {
		select {
		case <-ctx.Done():
			return true
		case <-time.After(r.n.cfg.HandOverAfter):
		}
		preferred := r.preferred()
		if preferred == "" || preferred == r.n.cfg.NodeID {
			continue
		}
		p, ok := r.n.peer(preferred)
		if !ok || !r.isVoter(preferred) {
			continue
		}
		addr := p.RaftAddr
		// a transfer blocks new proposals until it ends: only try it when
		// the preferred replica answers and has caught up
		rep, err := r.n.peerAt(p.APIAddr).Replica(ctx, r.sh.ID())
		if err != nil {
			r.log.Debug("leadership stays here", "preferred", preferred, "err", err)
			continue
		}
		if rep.natsUnreachable > 0 {
			// it would read and publish nothing, and hand it back
			r.log.Debug("leadership stays here: the preferred replica cannot reach NATS", "preferred", preferred)
			continue
		}
		applied := rep.applied
		if mine := r.sh.FSM().Index(); applied+handOverLag < mine {
			r.log.Debug("leadership stays here", "preferred", preferred, "its_applied_index", applied, "applied_index", mine)
			continue
		}
		if err := shard.Wait(ctx, r.sh.Raft().LeadershipTransferToServer(raft.ServerID(preferred), raft.ServerAddress(addr))); err != nil {
			r.log.Debug("leadership stays here", "preferred", preferred, "err", err)
			continue
		}
		r.log.Info("leadership handed to the preferred replica", "to", preferred)
		return true
	}
}

// handOverLag is how many log entries the preferred replica may still have
// to apply when leadership moves to it: a few batches, milliseconds of work.
const handOverLag = 8

// mostApplied finds, among the other voters of shard sh whose nodes reach
// NATS (a leader that cannot would read and publish nothing), the one whose
// replica has applied the most of the log (asking their nodes' APIs);
// ok is false when none answers.
func (n *Node) mostApplied(ctx context.Context, sh *shard.Shard) (peer Peer, applied uint64, ok bool) {
	f := sh.Raft().GetConfiguration()
	if f.Error() != nil {
		return Peer{}, 0, false
	}
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage != raft.Voter || string(srv.ID) == n.cfg.NodeID {
			continue
		}
		if p, found := n.peer(string(srv.ID)); found {
			if rep, err := n.peerAt(p.APIAddr).Replica(ctx, sh.ID()); err == nil && rep.natsUnreachable == 0 && (!ok || rep.applied > applied) {
				peer, applied, ok = p, rep.applied, true
			}
		}
	}
	return peer, applied, ok
}

// behindHandOff is how many log entries a new leader may have left to
// apply before it hands leadership to a voter that has applied more.
const behindHandOff = 64

// handOffIfBehind runs when a session starts: a replica elected while it
// still has much of the log to apply (restarted a moment ago, replaying
// from its snapshot) would read and publish nothing until it had caught
// up, so it hands leadership to the voter that has applied the most, if
// that one has nearly caught up (when every replica is replaying, after a
// restart of the whole cluster, none qualifies and leadership stays, rather
// than moving from one to the next). It reports whether leadership moved.
func (r *leader) handOffIfBehind(ctx context.Context) bool {
	mine, last := r.sh.FSM().Index(), r.sh.Raft().LastIndex()
	if last < mine+behindHandOff {
		return false
	}
	peer, applied, ok := r.n.mostApplied(ctx, r.sh)
	if !ok || applied+behindHandOff/2 < last {
		return false
	}
	if err := shard.Wait(ctx, r.sh.Raft().LeadershipTransferToServer(raft.ServerID(peer.ID), raft.ServerAddress(peer.RaftAddr))); err != nil {
		r.log.Debug("leadership stays here while catching up", "to", peer.ID, "err", err)
		return false
	}
	r.log.Info("leadership handed to a replica that has applied more", "to", peer.ID, "its_applied_index", applied, "applied_index", mine)
	return true
}
