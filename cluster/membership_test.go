package cluster

import (
	"maps"
	"testing"

	"github.com/hashicorp/raft"
	"pgregory.net/rapid"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster/peer"
)

// shardConfigsBefore is how shardConfigs read a node's list of shards
// before it read the node's reports: the configurations of the shards the
// node leads, added to out where out has none.
func shardConfigsBefore(id string, shards []*cepv1.Shard, out map[uint64]map[string]raft.ServerSuffrage) {
	for _, s := range shards {
		if s.LeaderNodeId != id || out[uint64(s.Id)] != nil {
			continue
		}
		c := map[string]raft.ServerSuffrage{}
		for _, r := range s.Replicas {
			c[r.NodeId] = raft.Voter
			if r.Suffrage != cepv1.Suffrage_SUFFRAGE_VOTER {
				c[r.NodeId] = raft.Nonvoter
			}
		}
		out[uint64(s.Id)] = c
	}
}

func TestShardConfigsFromReportsAsBefore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		id := rapid.SampledFrom(quarantineNodes).Draw(t, "node")
		shards := drawShards(t, "shard")
		before, after := map[uint64]map[string]raft.ServerSuffrage{}, map[uint64]map[string]raft.ServerSuffrage{}
		if rapid.Bool().Draw(t, "known") {
			before[1] = map[string]raft.ServerSuffrage{"n1": raft.Voter}
			after[1] = map[string]raft.ServerSuffrage{"n1": raft.Voter}
		}
		shardConfigsBefore(id, shards, before)
		addLeaderConfigs(after, id, peer.ReportsOf(shards))
		if !maps.EqualFunc(before, after, maps.Equal) {
			t.Fatalf("%v, before %v", after, before)
		}
	})
}
