package cluster

import (
	"context"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/shard"
)

// How often pendingShards looks at this node's replicas, and at most how
// often it asks the other nodes about the shards it still waits for.
const (
	rolloutLocalEvery  = 10 * time.Millisecond
	rolloutRemoteEvery = 100 * time.Millisecond
)

// pendingShards waits until every shard runs the named pattern at version
// (or a later one) and returns the shards that still do not when the
// node's DeployWait or ctx ends, sorted; nil when all do. A shard runs it
// once any of its replicas has applied the deployment: the entry is then
// committed in the shard's log, so every event the shard logs afterwards —
// everything published from then on — is the new version's. It stops
// waiting when the pattern is deleted meanwhile.
func (n *Node) pendingShards(ctx context.Context, name string, version uint64) []uint32 {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.DeployWait)
	defer cancel()
	m := n.Meta()
	pending := make([]ShardInfo, 0, len(m.Shards))
	pending = append(pending, m.Shards...)
	runs := func(st *shard.State) bool {
		v, ok := st.Version(name)
		return ok && v >= version
	}
	var asked time.Time
	for {
		pending = slices.DeleteFunc(pending, func(info ShardInfo) bool {
			done := false
			for _, sh := range n.shards {
				if sh.ID() == info.ID {
					sh.FSM().View(func(st *shard.State, _ uint64) { done = runs(st) })
				}
			}
			return done
		})
		if len(pending) > 0 && time.Since(asked) >= rolloutRemoteEvery {
			asked = time.Now()
			pending = n.notRunningElsewhere(ctx, pending, name, version)
		}
		if len(pending) == 0 {
			return nil
		}
		if p := n.Meta().Patterns[name]; p == nil || p.Deleted {
			return nil
		}
		select {
		case <-ctx.Done():
			out := make([]uint32, len(pending))
			for i, info := range pending {
				out[i] = uint32(info.ID)
			}
			slices.Sort(out)
			return out
		case <-time.After(rolloutLocalEvery):
		}
	}
}

// notRunningElsewhere asks the other nodes that hold replicas of the
// pending shards (ListShards, in parallel, a second each) and returns the
// shards none of them reports running the pattern at version or later.
func (n *Node) notRunningElsewhere(ctx context.Context, pending []ShardInfo, name string, version uint64) []ShardInfo {
	ask := map[string]bool{}
	for _, info := range pending {
		for _, id := range info.Replicas {
			ask[id] = id != n.cfg.NodeID
		}
	}
	running := map[uint64]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	s := NewService(n)
	for _, p := range n.cfg.Peers {
		if !ask[p.ID] || p.APIAddr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			res, err := cepv1connect.NewClusterServiceClient(s.client, n.apiURL(p.APIAddr), s.clientOpts()...).ListShards(actx, connect.NewRequest(&cepv1.ListShardsRequest{}))
			if err != nil {
				return // down or unreachable: its replicas count as not running it
			}
			mu.Lock()
			defer mu.Unlock()
			for _, sh := range res.Msg.Shards {
				for _, pv := range sh.Running {
					if pv.Name == name && pv.Version >= version {
						running[uint64(sh.Id)] = true
					}
				}
			}
		}()
	}
	wg.Wait()
	return slices.DeleteFunc(pending, func(info ShardInfo) bool { return running[info.ID] })
}
