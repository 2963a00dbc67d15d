package plan

import (
	"slices"

	"github.com/cepcluster/cep/cluster/meta"
)

// Quarantine. A replica whose files are damaged is closed, its files moved
// aside, and kept from voting until it is rebuilt: the group's leader
// demotes it to a non-voter once its node reports it quarantined; it opens
// empty (the metadata replica: votes again) once the leader no longer
// counts it as a voter, and is caught up and promoted as any added
// replica. A shard with no other replica cannot be rebuilt: it stays
// stopped. These are the decisions along the way; package cluster gathers
// the reports and carries them out (quarantine.go).

// Report is what a node reports of its replica of a group (0: the
// metadata group), as the quarantine's decisions take it.
type Report struct {
	Group uint64
	// Leader is the group's leader as the reporting node knows it ("":
	// none known).
	Leader string
	// Quarantined: the node's replica is quarantined.
	Quarantined bool
	// Servers are the group's configuration as the node's replica has it
	// (Addr not given).
	Servers []Server
}

// Quarantined reports whether a node's reports say its replica of group is
// quarantined.
func Quarantined(reports []Report, group uint64) bool {
	return slices.ContainsFunc(reports, func(r Report) bool { return r.Group == group && r.Quarantined })
}

// LeaderReport returns, of the reports of node id, the one of group if id
// names itself the group's leader: only the leader's own configuration
// counts (a replica just added knows the leader before it has the
// configuration).
func LeaderReport(id string, reports []Report, group uint64) (Report, bool) {
	for _, r := range reports {
		if r.Group == group && r.Leader == id {
			return r, true
		}
	}
	return Report{}, false
}

// Stranded reports whether self's replica of a shard placed on replicas
// has no other replica to be rebuilt from: quarantined, it stays stopped
// (until a restore).
func Stranded(self string, replicas []string) bool {
	return !slices.ContainsFunc(replicas, func(id string) bool { return id != self })
}

// Rebuild reports whether self's quarantined replica may open empty: the
// group's leader answered (ok, with its report leader) and no longer
// counts self as a voter.
func Rebuild(self string, leader Report, ok bool) bool {
	if !ok {
		return false // no leader heard
	}
	return !slices.ContainsFunc(leader.Servers, func(s Server) bool { return s.ID == self && s.Voter })
}

// ForgetQuarantined returns those of the quarantined shards that the shard
// map m no longer places on self, in quarantined's order; a shard the map
// does not list (a copy of the metadata catching up) stays quarantined.
func ForgetQuarantined(self string, m *meta.Meta, quarantined []uint64) []uint64 {
	var out []uint64
	for _, id := range quarantined {
		i := m.ShardIndex(id)
		if i < 0 || slices.Contains(m.Shards[i].Replicas, self) {
			continue
		}
		out = append(out, id)
	}
	return out
}

// DemoteQuarantined returns the change the leader self of a group makes
// before any other (servers: its configuration, in order): the first voter
// other than self whose node reports its replica quarantined is demoted,
// as it lost its log and must not vote with a forgotten term or vote, nor
// count towards a quorum. quarantined is asked of those voters only, in
// order, until one is.
func DemoteQuarantined(self string, servers []Server, quarantined func(id string) bool) Change {
	for _, s := range servers {
		if !s.Voter || s.ID == self || !quarantined(s.ID) {
			continue
		}
		return Change{Kind: Demote, ID: s.ID}
	}
	return Change{}
}

// MetaRebuilt is one look of the quarantined metadata replica at its own
// place in the group's configuration (present, and whether as a voter):
// demoted records that it has been a non-voter; done, that it is a voter
// again since, promoted after catching up, and may vote.
func MetaRebuilt(demoted, present, voter bool) (nowDemoted, done bool) {
	if !present {
		return demoted, false
	}
	if !voter {
		demoted = true
	}
	return demoted, voter && demoted
}
