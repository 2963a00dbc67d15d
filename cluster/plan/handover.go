package plan

import "cmp"

// Replica is what a shard's leader hears of another replica of its shard
// from that replica's node.
type Replica struct {
	ID      string
	Voter   bool   // a voter of the shard's configuration
	Applied uint64 // how far it has applied the log
	// NATSReachable: its node reaches NATS (a leader that cannot would
	// read and publish nothing).
	NATSReachable bool
}

// Trigger is why a leader thinks of handing its shard over.
type Trigger int

const (
	// Preferred: this replica leads, the shard map prefers another (its
	// first replica); leadership moves once that one has caught up.
	Preferred Trigger = iota
	// Behind: elected with much of the log still to apply (restarted a
	// moment ago, replaying), it would read and publish nothing until it
	// had caught up.
	Behind
	// CutOff: this node has not reached NATS for a while.
	CutOff
	// Closing: the node closes; a voter that reaches NATS serves better
	// than an election after the leader's silence.
	Closing
)

func (t Trigger) String() string {
	switch t {
	case Preferred:
		return "preferred"
	case Behind:
		return "behind"
	case CutOff:
		return "cut off from NATS"
	case Closing:
		return "closing"
	}
	return "unknown"
}

// HandOverLag is how many log entries the preferred replica may still
// have to apply when leadership moves to it: a few batches, milliseconds
// of work.
const HandOverLag = 8

// BehindHandOff is how many log entries a new leader may have left to
// apply before it hands leadership to a voter that has applied more; that
// voter must be within half of it of the log's end, and a replica taking
// over from one cut off from NATS within all of it of the leader.
const BehindHandOff = 64

// HandOver is what a leader knows when it thinks of handing its shard
// over.
type HandOver struct {
	Trigger   Trigger
	Self      string // the leader
	Preferred string // the shard map's first replica; "" when unknown
	Applied   uint64 // how far the leader has applied the log
	Last      uint64 // the log's last index (Behind)
	// Replicas are the other replicas whose nodes answered.
	Replicas []Replica
}

// Due reports whether h's trigger asks for a hand-over at all, before
// any replica is asked about: a leader not far behind, or one the map
// prefers, keeps its shard.
func (h HandOver) Due() bool {
	switch h.Trigger {
	case Preferred:
		return h.Preferred != "" && h.Preferred != h.Self
	case Behind:
		return h.Last >= h.Applied+BehindHandOff
	}
	return true
}

// HandOverTarget is the one rule every trigger asks: the replica to hand
// leadership to, ok false to keep it. A replica qualifies when it is
// another voter whose node reaches NATS and that has applied the log
// close enough to serve at once:
//
//   - Preferred: only the preferred replica, within HandOverLag of the
//     leader;
//   - Behind: only while the leader has BehindHandOff entries or more to
//     apply; within BehindHandOff/2 of the log's end (when every replica
//     is replaying, after a restart of the whole cluster, none qualifies
//     and leadership stays rather than moving from one to the next);
//   - CutOff and Closing: within BehindHandOff of the leader (one further
//     behind would read and publish nothing until it had caught up, and
//     hand leadership on again).
//
// Of those that qualify, the preferred replica, so that leadership does
// not move twice; otherwise the one that has applied the most, the lowest
// id on a tie (the answer does not hang on the order the nodes answered).
func HandOverTarget(h HandOver) (id string, ok bool) {
	if !h.Due() {
		return "", false
	}
	qualifies := func(r Replica) bool {
		if r.ID == h.Self || !r.Voter || !r.NATSReachable {
			return false
		}
		switch h.Trigger {
		case Preferred:
			return r.ID == h.Preferred && r.Applied+HandOverLag >= h.Applied
		case Behind:
			return r.Applied+BehindHandOff/2 >= h.Last
		case CutOff, Closing:
			return r.Applied+BehindHandOff >= h.Applied
		}
		return false
	}
	var best *Replica
	for i := range h.Replicas {
		r := &h.Replicas[i]
		if !qualifies(*r) {
			continue
		}
		if r.ID == h.Preferred {
			return r.ID, true
		}
		if best == nil || cmp.Or(cmp.Compare(r.Applied, best.Applied), cmp.Compare(best.ID, r.ID)) > 0 {
			best = r
		}
	}
	if best == nil {
		return "", false
	}
	return best.ID, true
}
