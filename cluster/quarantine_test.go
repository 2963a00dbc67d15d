package cluster

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	"pgregory.net/rapid"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/peer"
	"github.com/cepcluster/cep/cluster/plan"
)

// The quarantine's decisions as quarantine.go made them before it asked
// cluster/plan, on the public ListShards answer, kept to show that the
// planners, given the reports (peer.ReportsOf) of the same answers, decide
// the same.

// rebuildBefore is rebuildQuarantined's decision: whether self's
// quarantined replica of info opens empty, given the leader's report s
// (known false: no leader answered).
func rebuildBefore(self string, info meta.ShardInfo, s *cepv1.Shard, known bool) bool {
	others := slices.DeleteFunc(slices.Clone(info.Replicas), func(id string) bool { return id == self })
	if len(others) == 0 {
		return false
	}
	voter := !known
	if known {
		for _, r := range s.Replicas {
			if r.NodeId == self && r.Suffrage == cepv1.Suffrage_SUFFRAGE_VOTER {
				voter = true
			}
		}
	}
	return known && !voter
}

// leaderReportBefore is leaderReport's choice among node id's shards.
func leaderReportBefore(id string, shards []*cepv1.Shard, group uint64) (*cepv1.Shard, bool) {
	for _, s := range shards {
		if uint64(s.Id) == group && s.LeaderNodeId == id {
			return s, true
		}
	}
	return nil, false
}

// removedFromBefore is removedFrom's reading of the leader's report.
func removedFromBefore(self string, s *cepv1.Shard) bool {
	for _, r := range s.Replicas {
		if r.NodeId == self {
			return false
		}
	}
	return true
}

// stoppedHereBefore is stoppedHere.
func stoppedHereBefore(self string, quarantined bool, info meta.ShardInfo) bool {
	if !quarantined {
		return false
	}
	return !slices.ContainsFunc(info.Replicas, func(id string) bool { return id != self })
}

// forgetBefore is forgetQuarantined's choice of the records to drop.
func forgetBefore(self string, m *meta.Meta, recs []uint64) []uint64 {
	var out []uint64
	for _, id := range recs {
		i := m.ShardIndex(id)
		if i < 0 || slices.Contains(m.Shards[i].Replicas, self) {
			continue
		}
		out = append(out, id)
	}
	return out
}

// demoteBefore is demoteQuarantined's (and demoteQuarantinedMeta's)
// choice, quarantined standing for the peer look-up and
// reportsQuarantine.
func demoteBefore(self string, cfg raft.Configuration, quarantined func(string) bool) string {
	for _, s := range cfg.Servers {
		id := string(s.ID)
		if s.Suffrage != raft.Voter || id == self {
			continue
		}
		if !quarantined(id) {
			continue
		}
		return id
	}
	return ""
}

// reportsQuarantineBefore is reportsQuarantine's reading of a node's list
// of shards.
func reportsQuarantineBefore(shards []*cepv1.Shard, group uint64) bool {
	for _, sh := range shards {
		if uint64(sh.Id) == group && sh.Quarantined != "" {
			return true
		}
	}
	return false
}

// metaRebuildBefore is one look of watchMetaRebuild: the suffrage of self
// (ok: in the configuration) and the demoted flag before, the flag after
// and whether the rebuild is done.
func metaRebuildBefore(demoted bool, s raft.ServerSuffrage, ok bool) (bool, bool) {
	if !ok {
		return demoted, false
	}
	if s == raft.Nonvoter {
		demoted = true
	}
	return demoted, s == raft.Voter && demoted
}

var quarantineNodes = []string{"n1", "n2", "n3", "n4"}

func drawShards(t *rapid.T, label string) []*cepv1.Shard {
	var out []*cepv1.Shard
	for i := range rapid.IntRange(0, 5).Draw(t, label+"-count") {
		l := fmt.Sprintf("%s%d", label, i)
		s := &cepv1.Shard{Id: uint32(rapid.IntRange(0, 3).Draw(t, l+"-id")),
			LeaderNodeId: rapid.SampledFrom(append([]string{""}, quarantineNodes...)).Draw(t, l+"-leader"),
			Quarantined:  rapid.SampledFrom([]string{"", "damaged log"}).Draw(t, l+"-quarantined")}
		for _, id := range rapid.Permutation(quarantineNodes).Draw(t, l+"-order")[:rapid.IntRange(0, len(quarantineNodes)).Draw(t, l+"-replicas")] {
			s.Replicas = append(s.Replicas, &cepv1.Replica{NodeId: id,
				Suffrage: cepv1.Suffrage(rapid.IntRange(0, 2).Draw(t, l+id+"-suffrage"))})
		}
		out = append(out, s)
	}
	return out
}

func drawShardInfo(t *rapid.T, id uint64) meta.ShardInfo {
	reps := rapid.Permutation(quarantineNodes).Draw(t, fmt.Sprint("placed", id))
	return meta.ShardInfo{ID: id, Replicas: reps[:rapid.IntRange(0, len(reps)).Draw(t, fmt.Sprint("placedOn", id))]}
}

func TestQuarantineReportsDecideAsBefore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		self := rapid.SampledFrom(quarantineNodes).Draw(t, "self")
		id := rapid.SampledFrom(quarantineNodes).Draw(t, "node")
		group := uint64(rapid.IntRange(0, 3).Draw(t, "group"))
		shards := drawShards(t, "shard")
		reports := peer.ReportsOf(shards)

		if got, want := plan.Quarantined(reports, group), reportsQuarantineBefore(shards, group); got != want {
			t.Fatalf("quarantined %v, before %v", got, want)
		}
		s, known := leaderReportBefore(id, shards, group)
		r, ok := plan.LeaderReport(id, reports, group)
		if ok != known {
			t.Fatalf("leader report found %v, before %v", ok, known)
		}
		if ok {
			if want := peer.ReportsOf([]*cepv1.Shard{s})[0]; !slices.Equal(serverIDs(r.Servers), serverIDs(want.Servers)) || r.Group != want.Group || r.Leader != want.Leader || r.Quarantined != want.Quarantined {
				t.Fatalf("leader report %+v, before %+v", r, want)
			}
			if got, want := !slices.ContainsFunc(r.Servers, func(s plan.Server) bool { return s.ID == self }), removedFromBefore(self, s); got != want {
				t.Fatalf("removed %v, before %v", got, want)
			}
		}
		info := drawShardInfo(t, group)
		if got, want := !plan.Stranded(self, info.Replicas) && plan.Rebuild(self, r, ok), rebuildBefore(self, info, s, known); got != want {
			t.Fatalf("rebuild %v, before %v (placed %v, leader %+v)", got, want, info.Replicas, s)
		}
		q := rapid.Bool().Draw(t, "quarantined here")
		if got, want := q && plan.Stranded(self, info.Replicas), stoppedHereBefore(self, q, info); got != want {
			t.Fatalf("stopped here %v, before %v", got, want)
		}
	})
}

func serverIDs(ss []plan.Server) []string {
	var out []string
	for _, s := range ss {
		out = append(out, fmt.Sprintf("%s/%v", s.ID, s.Voter))
	}
	return out
}

func TestQuarantineForgetAsBefore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		self := rapid.SampledFrom(quarantineNodes).Draw(t, "self")
		m := &meta.Meta{}
		for i := range rapid.IntRange(0, 5).Draw(t, "shards") {
			m.Shards = append(m.Shards, drawShardInfo(t, uint64(i+1)))
		}
		var recs []uint64
		for id := range uint64(8) {
			if rapid.Bool().Draw(t, fmt.Sprint("quarantined", id)) {
				recs = append(recs, id)
			}
		}
		if got, want := plan.ForgetQuarantined(self, m, recs), forgetBefore(self, m, recs); !slices.Equal(got, want) {
			t.Fatalf("forget %v, before %v", got, want)
		}
	})
}

func TestQuarantineDemoteAsBefore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		self := rapid.SampledFrom(quarantineNodes).Draw(t, "self")
		var cfg raft.Configuration
		for _, id := range rapid.Permutation(quarantineNodes).Draw(t, "order")[:rapid.IntRange(0, len(quarantineNodes)).Draw(t, "servers")] {
			cfg.Servers = append(cfg.Servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":1"),
				Suffrage: raft.ServerSuffrage(rapid.IntRange(0, 2).Draw(t, id+"-suffrage"))})
		}
		reported := map[string]bool{}
		for _, id := range quarantineNodes {
			reported[id] = rapid.Bool().Draw(t, id+"-reported")
		}
		// the same questions, in the same order: each is a call to a node
		var askedBefore, asked []string
		want := demoteBefore(self, cfg, func(id string) bool { askedBefore = append(askedBefore, id); return reported[id] })
		c := plan.DemoteQuarantined(self, planServers(cfg), func(id string) bool { asked = append(asked, id); return reported[id] })
		if c.ID != want || (c.Kind == plan.Demote) != (want != "") || (c.Kind != plan.Demote && c.Kind != plan.None) {
			t.Fatalf("demote %v, before %q", c, want)
		}
		if !slices.Equal(asked, askedBefore) {
			t.Fatalf("asked %v, before %v", asked, askedBefore)
		}
	})
}

func TestQuarantineMetaRebuildAsBefore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		demoted := rapid.Bool().Draw(t, "demoted")
		s := raft.ServerSuffrage(rapid.IntRange(0, 2).Draw(t, "suffrage"))
		ok := rapid.Bool().Draw(t, "present")
		wantDemoted, wantDone := metaRebuildBefore(demoted, s, ok)
		gotDemoted, gotDone := plan.MetaRebuilt(demoted, ok && s != raft.Staging, s == raft.Voter)
		if gotDemoted != wantDemoted || gotDone != wantDone {
			t.Fatalf("(%v, %v), before (%v, %v)", gotDemoted, gotDone, wantDemoted, wantDone)
		}
	})
}
