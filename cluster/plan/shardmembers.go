package plan

import "slices"

// ShardMembers is what a shard's leader knows when it makes its
// configuration follow the shard map.
type ShardMembers struct {
	Self    string   // the leader
	Target  []string // the shard map's replicas; Target[0] is the preferred leader
	Servers []Server // the configuration, in its order
	// Addrs are the Raft addresses of the members this node knows; a
	// replica whose address is unknown is left alone until it is known.
	Addrs map[string]string
	// CaughtUp: a non-voter of Target close enough to the leader's log to
	// count for the quorum without needing a snapshot.
	CaughtUp map[string]bool
}

// ShardChange returns the next change of a shard's configuration towards its map
// entry, and whether a change is still under way (the leader should look
// again soon):
//
//  1. a replica of the map that is not a server is added as a non-voter;
//  2. a non-voter of the map that has caught up is promoted (one that has
//     not keeps the change under way);
//  3. only once every replica of the map votes, a server the map does not
//     have is removed; the leader itself hands leadership to Target[0],
//     which removes it.
//
// So a shard never has fewer voters than before while it moves. Nothing
// changes while Target is empty.
func ShardChange(s ShardMembers) (c Change, busy bool) {
	if len(s.Target) == 0 {
		return Change{}, false
	}
	for _, id := range s.Target {
		if serverIndex(s.Servers, id) >= 0 {
			continue
		}
		if addr, ok := s.Addrs[id]; ok {
			return Change{Kind: AddNonvoter, ID: id, Addr: addr}, true
		}
	}
	for _, id := range s.Target {
		i := serverIndex(s.Servers, id)
		if i < 0 || s.Servers[i].Voter {
			continue
		}
		addr, ok := s.Addrs[id]
		if !ok {
			continue
		}
		if !s.CaughtUp[id] {
			busy = true // asked again soon
			continue
		}
		return Change{Kind: Promote, ID: id, Addr: addr}, true
	}
	for _, id := range s.Target {
		if i := serverIndex(s.Servers, id); i < 0 || !s.Servers[i].Voter {
			return Change{}, true
		}
	}
	for _, sv := range s.Servers {
		if slices.Contains(s.Target, sv.ID) {
			continue
		}
		if sv.ID == s.Self {
			to := s.Target[0]
			addr, ok := s.Addrs[to]
			if !ok {
				return Change{}, false
			}
			return Change{Kind: Transfer, ID: to, Addr: addr}, true
		}
		return Change{Kind: Remove, ID: sv.ID}, true
	}
	return Change{}, busy
}
