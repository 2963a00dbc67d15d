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

// MetaGroupChange returns the next change of the metadata group's
// configuration (servers, in the configuration's order), decided by its
// leader self from the cluster's members (in the metadata's order).
// caughtUp reports whether a non-voter has the metadata log up to a small
// bound of the leader's and hears from this leader (asked only of
// non-voters it may promote, so that a round that promotes no one asks no
// one).
//
// A voter is live when it is a member not down, up when it is also alive
// in the gossip; a change is safe when the voters it leaves have a
// majority up. The rules, the first that applies giving the change (None
// when none does):
//
//  1. a member that is not a server, not down and alive in the gossip is
//     added as a non-voter;
//  2. a server that is no member any more is removed; a voter only when
//     safe (self: leadership is handed over first, so that the next leader
//     removes it);
//  3. a server down is removed, a voter when safe (back, it joins as a
//     non-voter again: rule 1);
//  4. the group aims at target voters: of the voters neither removing nor
//     down (kept) and the non-voters that could replace or join them
//     (alive, neither removing nor down, and caught up), at most voters,
//     and an odd number (a fourth voter adds no tolerance over three; two
//     lose the majority when either fails, one only when it does); while
//     fewer are kept, one of those
//     non-voters is promoted. As target is odd, a promotion into an even
//     count is one on the way to an odd one: another promotion follows (one
//     voter to three: two candidates caught up, promoted in consecutive
//     rounds; the one window in which losing a member loses the majority),
//     or a voter that leaves is taken out;
//  5. a voter removing, then a kept voter beyond target (not self; one not
//     alive first, then the last), is demoted, when safe (self removing:
//     leadership is handed over first).
//
// Invariants (property-tested in metagroup_test.go and, through sequences
// of member events, metagroup_events_test.go):
//   - no change takes away the live voters' majority: a promotion adds a
//     live voter, a removal or demotion is safe, and up voters are live;
//   - a member that has not caught up never becomes a voter, so a member
//     that appears and vanishes before it caught up never counts towards
//     a quorum: one node plus any number of them keeps the one voter;
//   - the voter count rests at an odd number (or at fewer kept voters
//     than that only while no safe change gets there); an even count is
//     one step on the way;
//   - with enough live members caught up, the changes reach target
//     voters (TestMetaGroupConverges).
func MetaGroupChange(self string, members []Member, servers []Server, caughtUp func(id string) bool, voters int) Change {
	byID := make(map[string]Member, len(members))
	for _, m := range members {
		byID[m.ID] = m
	}
	for _, m := range members {
		if serverIndex(servers, m.ID) < 0 && !m.Down && m.Alive {
			return Change{Kind: AddNonvoter, ID: m.ID, Addr: m.RaftAddr}
		}
	}
	isUp := func(id string) bool {
		m, ok := byID[id]
		return ok && !m.Down && m.Alive
	}
	all, up := 0, 0
	for _, s := range servers {
		if s.Voter {
			all++
			if isUp(s.ID) {
				up++
			}
		}
	}
	// safe: without voter id, the voters left have a majority up
	safe := func(id string) bool {
		u := up
		if isUp(id) {
			u--
		}
		return 2*u > all-1
	}
	takeOut := func(s Server, kind Kind) Change {
		if s.ID == self {
			return Change{Kind: Transfer}
		}
		return Change{Kind: kind, ID: s.ID}
	}
	for _, s := range servers {
		if _, member := byID[s.ID]; !member && (!s.Voter || safe(s.ID)) {
			return takeOut(s, Remove)
		}
	}
	for _, s := range servers {
		if m, member := byID[s.ID]; member && m.Down && (!s.Voter || safe(s.ID)) {
			return takeOut(s, Remove)
		}
	}
	kept := 0
	var eligible []Server
	for _, s := range servers {
		m, member := byID[s.ID]
		switch {
		case !member || m.Down || m.Removing:
		case s.Voter:
			kept++
		case m.Alive:
			eligible = append(eligible, s)
		}
	}
	target := func(candidates int) int {
		t := min(voters, kept+candidates)
		if t%2 == 0 {
			t--
		}
		return max(t, 1)
	}
	if kept < target(len(eligible)) {
		var cands []Server
		for _, s := range eligible {
			if caughtUp(s.ID) {
				cands = append(cands, s)
			}
		}
		t := target(len(cands))
		if len(cands) > 0 && kept < t {
			return Change{Kind: Promote, ID: cands[0].ID, Addr: cands[0].Addr}
		}
	}
	for _, s := range servers {
		if m, member := byID[s.ID]; member && s.Voter && !m.Down && m.Removing && safe(s.ID) {
			return takeOut(s, Demote)
		}
	}
	// beyond the target counted from the voters alone: promoting came first
	if kept > target(0) {
		var pick *Server
		for i := len(servers) - 1; i >= 0; i-- {
			s := &servers[i]
			m, member := byID[s.ID]
			if !s.Voter || !member || m.Down || m.Removing || s.ID == self || !safe(s.ID) {
				continue
			}
			if pick == nil || (isUp(pick.ID) && !m.Alive) {
				pick = s
			}
		}
		if pick != nil {
			return Change{Kind: Demote, ID: pick.ID}
		}
	}
	return Change{}
}
