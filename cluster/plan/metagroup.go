package plan

// Member is a member of the cluster as the metadata leader sees it.
type Member struct {
	ID       string
	RaftAddr string
	// Removing: an operator asked to remove it; it keeps its place until
	// its replicas have moved, but is no candidate for a vote.
	Removing bool
	// Down: unreachable (in the gossip and on its API) for the cluster's
	// dead-after time.
	Down bool
	// Alive: the gossip sees it alive now.
	Alive bool
}

// MetaVoters is how many voters the metadata group keeps when it can.
const MetaVoters = 3

// MetaGroupChange returns the next change of the metadata group's configuration
// (servers, in the configuration's order), decided by its leader self
// from the cluster's members (in the metadata's order):
//
//  1. a member that is not a server, not down and alive in the gossip is
//     added as a non-voter;
//  2. while fewer than want = min(voters, members neither removing nor
//     down) voters are live, a non-voter member neither removing nor
//     down is promoted;
//  3. a server that is no member any more, or a voter down while enough
//     others are live and there are more voters than wanted, is removed
//     (self: leadership is handed over first).
//
// The first rule that applies gives the change; None when none does.
func MetaGroupChange(self string, members []Member, servers []Server, voters int) Change {
	byID := make(map[string]Member, len(members))
	for _, m := range members {
		byID[m.ID] = m
	}
	for _, m := range members {
		if serverIndex(servers, m.ID) < 0 && !m.Down && m.Alive {
			return Change{Kind: AddNonvoter, ID: m.ID, Addr: m.RaftAddr}
		}
	}
	liveVoters, allVoters := 0, 0
	for _, s := range servers {
		if s.Voter {
			allVoters++
			if !byID[s.ID].Down {
				liveVoters++
			}
		}
	}
	candidates := 0
	for _, m := range members {
		if !m.Removing && !m.Down {
			candidates++
		}
	}
	want := min(voters, candidates)
	if liveVoters < want {
		for _, s := range servers {
			m, ok := byID[s.ID]
			if !s.Voter && ok && !m.Removing && !m.Down {
				return Change{Kind: Promote, ID: s.ID, Addr: s.Addr}
			}
		}
	}
	for _, s := range servers {
		m, member := byID[s.ID]
		deadVoter := s.Voter && m.Down && liveVoters >= want && allVoters > want
		if member && !deadVoter {
			continue
		}
		if s.ID == self {
			return Change{Kind: Transfer}
		}
		return Change{Kind: Remove, ID: s.ID}
	}
	return Change{}
}
