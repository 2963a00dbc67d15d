package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
)

// joinResult is what --join measured: nodes joining the in-process node
// after the throughput phase, with its state.
type joinResult struct {
	Nodes          int     `json:"nodes"`            // that joined
	ShardsBefore   int     `json:"shards_before"`    // shards when they started
	ShardsAfter    int     `json:"shards_after"`     // shards once placed
	PartialMatches uint64  `json:"partial_matches"`  // state of the cluster when they started
	BufferedEvents uint64  `json:"buffered_events"`  // same
	Members        float64 `json:"members_seconds"`  // until every one was a member
	Placed         float64 `json:"placed_seconds"`   // until every shard had its replicas, all voters, one shard per node
	FirstReplica   float64 `json:"replica_seconds"`  // until a joined node first held a voting replica
	Configurations int     `json:"shard_changes"`    // shard map changes seen (polled)
	StatusEvery    float64 `json:"poll_interval_ms"` // how often the cluster was asked
}

// measureJoin starts k nodes in this process that join the cluster through
// the first member's gossip, and times until they are members and until
// every shard has min(3, nodes) voting replicas and (the cluster splitting
// shards while it has more nodes than shards) there are as many shards as
// nodes, up to 32.
func measureJoin(ctx context.Context, c *benchCluster, k int, natsURL, dir string, nodeLog, log *slog.Logger) (*joinResult, error) {
	seed := c.members[0].node
	if seed == nil {
		return nil, fmt.Errorf("--join needs the in-process node (--nodes 1)")
	}
	cl := newClients(seed.APIAddr())
	res := &joinResult{Nodes: k, StatusEvery: 50}
	sh, err := cl.cluster.ListShards(ctx, connect.NewRequest(&cepv1.ListShardsRequest{ClusterWide: true}))
	if err != nil {
		return nil, err
	}
	res.ShardsBefore = len(sh.Msg.Shards)
	for _, s := range sh.Msg.Shards {
		res.PartialMatches += s.PartialMatches
		res.BufferedEvents += s.BufferedEvents
	}
	start := time.Now()
	for i := 0; i < k; i++ {
		id := fmt.Sprintf("j%d", i+1)
		n, err := cluster.Start(ctx, cluster.Config{NodeID: id, DataDir: filepath.Join(dir, id), RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0",
			NATSURL: natsURL, Join: []string{seed.GossipAddr()}, Logger: nodeLog, Secret: seed.Config().Secret})
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", id, err)
		}
		c.members = append(c.members, &member{id: id, api: n.APIAddr(), node: n, dir: filepath.Join(dir, id)})
	}
	total := 1 + k
	wantShards := max(res.ShardsBefore, min(total, 32))
	last := ""
	for {
		elapsed := time.Since(start).Seconds()
		st, err1 := cl.cluster.GetStatus(ctx, connect.NewRequest(&cepv1.GetStatusRequest{}))
		sh, err2 := cl.cluster.ListShards(ctx, connect.NewRequest(&cepv1.ListShardsRequest{ClusterWide: true}))
		if err1 == nil && err2 == nil {
			if res.Members == 0 && len(st.Msg.Nodes) == total {
				res.Members = elapsed
			}
			placed := len(sh.Msg.Shards) == wantShards
			layout := ""
			for _, s := range sh.Msg.Shards {
				voters := 0
				for _, r := range s.Replicas {
					if r.Suffrage == cepv1.Suffrage_SUFFRAGE_VOTER {
						voters++
						if res.FirstReplica == 0 && r.NodeId != "n1" {
							res.FirstReplica = elapsed
						}
					}
				}
				placed = placed && s.LeaderNodeId != "" && voters == min(3, total) && len(s.Replicas) == voters
				layout += fmt.Sprintf("%d:%d-%d:%d ", s.Id, s.KeyGroups.GetFirst(), s.KeyGroups.GetLast(), voters)
			}
			if layout != last {
				res.Configurations++
				last = layout
			}
			if placed && res.Members != 0 {
				res.Placed, res.ShardsAfter = elapsed, len(sh.Msg.Shards)
				log.Info("joined nodes placed", "nodes", total, "shards", res.ShardsAfter, "seconds", fmt.Sprintf("%.2f", elapsed))
				return res, nil
			}
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("not placed after %.0f s: %v", elapsed, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
