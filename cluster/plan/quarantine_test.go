package plan

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/cluster/meta"
)

var qnodes = []string{"n1", "n2", "n3", "n4"}

func drawServers(t *rapid.T, label string) []Server {
	var out []Server
	for _, id := range rapid.Permutation(qnodes).Draw(t, label+"-order")[:rapid.IntRange(0, len(qnodes)).Draw(t, label+"-count")] {
		out = append(out, Server{ID: id, Voter: rapid.Bool().Draw(t, label+id+"-voter")})
	}
	return out
}

func TestDemoteQuarantinedDemotesTheFirstQuarantinedVoter(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		self := rapid.SampledFrom(qnodes).Draw(t, "self")
		servers := drawServers(t, "servers")
		reported := map[string]bool{}
		for _, id := range qnodes {
			reported[id] = rapid.Bool().Draw(t, id+"-quarantined")
		}
		var asked []string
		c := DemoteQuarantined(self, servers, func(id string) bool { asked = append(asked, id); return reported[id] })
		// the first voter other than self whose node reports it
		i := slices.IndexFunc(servers, func(s Server) bool { return s.Voter && s.ID != self && reported[s.ID] })
		if i < 0 {
			if c.Kind != None {
				t.Fatalf("%v with no quarantined voter", c)
			}
		} else if c.Kind != Demote || c.ID != servers[i].ID {
			t.Fatalf("%v, want the demotion of %s", c, servers[i].ID)
		}
		// only voters other than self are asked about, each once, and
		// none after the one demoted
		for j, id := range asked {
			k := serverIndex(servers, id)
			if k < 0 || !servers[k].Voter || id == self || slices.Contains(asked[:j], id) {
				t.Fatalf("asked about %s (%v)", id, servers)
			}
			if c.Kind == Demote && j == len(asked)-1 && id != c.ID {
				t.Fatalf("last asked %s, demoted %s", id, c.ID)
			}
		}
	})
}

func TestRebuildOnlyOnceTheLeaderCountsNoVote(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		self := rapid.SampledFrom(qnodes).Draw(t, "self")
		leader := Report{Group: 1, Leader: rapid.SampledFrom(qnodes).Draw(t, "leader"), Servers: drawServers(t, "config")}
		ok := rapid.Bool().Draw(t, "answered")
		got := Rebuild(self, leader, ok)
		i := serverIndex(leader.Servers, self)
		voter := i >= 0 && leader.Servers[i].Voter
		if got != (ok && !voter) {
			t.Fatalf("rebuild %v: leader answered %v, self a voter %v", got, ok, voter)
		}
	})
}

func TestStrandedWithoutAnotherReplica(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		self := rapid.SampledFrom(qnodes).Draw(t, "self")
		replicas := rapid.SliceOf(rapid.SampledFrom(qnodes)).Draw(t, "replicas")
		others := 0
		for _, id := range replicas {
			if id != self {
				others++
			}
		}
		if Stranded(self, replicas) != (others == 0) {
			t.Fatalf("stranded %v with %d other replicas", Stranded(self, replicas), others)
		}
	})
}

func TestForgetQuarantinedOnlyWhatTheMapMoved(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		self := rapid.SampledFrom(qnodes).Draw(t, "self")
		m := &meta.Meta{}
		for i := range rapid.IntRange(0, 5).Draw(t, "shards") {
			reps := rapid.Permutation(qnodes).Draw(t, fmt.Sprint("order", i))
			m.Shards = append(m.Shards, meta.ShardInfo{ID: uint64(i + 1), Replicas: reps[:rapid.IntRange(0, len(reps)).Draw(t, fmt.Sprint("replicas", i))]})
		}
		var quarantined []uint64
		for id := range uint64(8) {
			if rapid.Bool().Draw(t, fmt.Sprint("quarantined", id)) {
				quarantined = append(quarantined, id)
			}
		}
		got := ForgetQuarantined(self, m, quarantined)
		for _, id := range quarantined {
			i := m.ShardIndex(id)
			moved := i >= 0 && !slices.Contains(m.Shards[i].Replicas, self)
			if slices.Contains(got, id) != moved {
				t.Fatalf("shard %d forgotten %v, placed elsewhere by the map %v", id, !moved, moved)
			}
		}
		if !slices.IsSorted(got) || len(got) > len(quarantined) {
			t.Fatalf("%v of %v", got, quarantined)
		}
	})
}

func TestMetaRebuiltAfterDemotionAndPromotion(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// a sequence of looks at the configuration: absent, non-voter or
		// voter
		looks := rapid.SliceOf(rapid.IntRange(0, 2)).Draw(t, "looks")
		demoted, seenNonvoter := false, false
		for i, l := range looks {
			present, voter := l > 0, l == 2
			var done bool
			demoted, done = MetaRebuilt(demoted, present, voter)
			seenNonvoter = seenNonvoter || (present && !voter)
			if demoted != seenNonvoter {
				t.Fatalf("look %d: demoted %v, a non-voter seen %v", i, demoted, seenNonvoter)
			}
			if done != (seenNonvoter && present && voter) {
				t.Fatalf("look %d: done %v (demoted %v, voter %v)", i, done, demoted, voter)
			}
			if done {
				return // the watch ends
			}
		}
	})
}

func TestQuarantinedAndLeaderReport(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var reports []Report
		for i := range rapid.IntRange(0, 5).Draw(t, "reports") {
			reports = append(reports, Report{Group: uint64(rapid.IntRange(0, 3).Draw(t, fmt.Sprint("group", i))),
				Leader:      rapid.SampledFrom(append([]string{""}, qnodes...)).Draw(t, fmt.Sprint("leader", i)),
				Quarantined: rapid.Bool().Draw(t, fmt.Sprint("quarantined", i))})
		}
		group := uint64(rapid.IntRange(0, 3).Draw(t, "group"))
		id := rapid.SampledFrom(qnodes).Draw(t, "id")
		q := slices.ContainsFunc(reports, func(r Report) bool { return r.Group == group && r.Quarantined })
		if Quarantined(reports, group) != q {
			t.Fatalf("quarantined %v, want %v", !q, q)
		}
		r, ok := LeaderReport(id, reports, group)
		i := slices.IndexFunc(reports, func(r Report) bool { return r.Group == group && r.Leader == id })
		if ok != (i >= 0) || ok && (r.Group != group || r.Leader != id || r.Quarantined != reports[i].Quarantined) {
			t.Fatalf("leader report %+v %v, want index %d of %+v", r, ok, i, reports)
		}
	})
}
