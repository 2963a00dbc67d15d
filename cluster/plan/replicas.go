package plan

import (
	"slices"

	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/keygroup"
)

// MaxMoving is how many shards may be changing replicas at once: each new
// replica is sent a snapshot of its shard.
const MaxMoving = 2

// Replicas is what the metadata leader knows when it steers the shard map.
type Replicas struct {
	Shards      []meta.ShardInfo
	Members     []Member // the metadata's nodes, in its order (ID, Removing, Down)
	Replication int      // replicas a shard should have
	// AutoSplit: the node may split shards while there are more active
	// nodes than shards.
	AutoSplit bool
	// Converged says, per shard id, that the shard's configuration has
	// exactly the replicas of its map entry, all voters. Nil until the
	// configurations were asked for (see ReplicaPlan.NeedConverged).
	Converged map[uint64]bool
}

// Move is a change of a shard's replicas in the map, guarded by what it
// was (meta.SetReplicas).
type Move struct {
	ShardID  uint64
	From, To []string
}

// ReplicaPlan is what the metadata leader does next to the shard map.
type ReplicaPlan struct {
	// NeedConverged: something may change, and whether the shards'
	// configurations match their entries decides what; ask them, set
	// Replicas.Converged and plan again. Nothing else is set then.
	NeedConverged bool
	Moves         []Move // to propose in order, while each is accepted
	// SplitForNodes: every shard is placed and there are more active
	// nodes than shards: split one (SplitForNodes picks it).
	SplitForNodes bool
	Forget        string // a node being removed that holds nothing now
	Busy          bool   // a change was made or is under way: look again soon
}

// ReplicaChanges decides the next changes of the shard map:
//
//  1. the lists Place calls for, for the shards that are settled (a split
//     finishes first) and whose configuration matches their entry (a
//     shard still changing finishes first), at most MaxMoving shards
//     changing at once, in ascending shard id;
//  2. once no list changes, a split for the nodes when AutoSplit allows
//     it, no node is being removed and no shard is changing;
//  3. else a node being removed that no shard holds any more, while no
//     shard is changing, is forgotten.
//
// A node being removed receives no replica and keeps none (even where no
// other node can take it: the removal refuses that unless told to); a node
// down keeps its replicas where no other can take them (Place).
func ReplicaChanges(in Replicas) ReplicaPlan {
	var active, present, removing []string
	for _, m := range in.Members {
		if m.Removing {
			removing = append(removing, m.ID)
			continue
		}
		present = append(present, m.ID)
		if !m.Down {
			active = append(active, m.ID)
		}
	}
	targets := Place(in.Shards, active, present, in.Replication)
	autoSplit := in.AutoSplit && len(active) > len(in.Shards)
	if len(targets) == 0 && len(removing) == 0 && !autoSplit {
		return ReplicaPlan{}
	}
	if in.Converged == nil {
		return ReplicaPlan{NeedConverged: true}
	}
	var p ReplicaPlan
	moving := 0
	for _, s := range in.Shards {
		if !in.Converged[s.ID] {
			moving++
		}
	}
	p.Busy = moving > 0
	for _, s := range in.Shards {
		if !s.Settled() {
			delete(targets, s.ID)
		}
	}
	ids := make([]uint64, 0, len(targets))
	for id := range targets {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if moving >= MaxMoving {
			break
		}
		i := slices.IndexFunc(in.Shards, func(s meta.ShardInfo) bool { return s.ID == id })
		if i < 0 || !in.Converged[id] {
			continue
		}
		p.Moves = append(p.Moves, Move{ShardID: id, From: in.Shards[i].Replicas, To: targets[id]})
		moving++
		p.Busy = true
	}
	if len(targets) > 0 {
		return p
	}
	if autoSplit && len(removing) == 0 && moving == 0 {
		p.SplitForNodes = true
		return p
	}
	for _, id := range removing {
		held := false
		for _, s := range in.Shards {
			held = held || slices.Contains(s.Replicas, id) || !in.Converged[s.ID]
		}
		if held {
			p.Busy = true
			continue
		}
		p.Forget, p.Busy = id, true
		return p
	}
	return p
}

// SplitForNodes picks the shard to split when the cluster has more active
// nodes than shards: the one with the most key groups (the first of them),
// if it has at least two blocks of them (a shard of one block does not
// split). wait: a split is under way; it finishes first.
func SplitForNodes(shards []meta.ShardInfo, keyGroups int) (id uint64, wait bool) {
	per := keyGroups / keygroup.Blocks(keyGroups)
	var pick *meta.ShardInfo
	for i := range shards {
		s := &shards[i]
		if !s.Settled() {
			return 0, true
		}
		if size := s.Last - s.First + 1; size >= 2*per && (pick == nil || size > pick.Last-pick.First+1) {
			pick = s
		}
	}
	if pick == nil {
		return 0, false
	}
	return pick.ID, false
}
