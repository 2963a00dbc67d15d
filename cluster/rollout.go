package cluster

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/cepcluster/cep/shard"
)

// How often pendingShards looks at this node's replicas, and at most how
// often it asks the other nodes about the shards it still waits for.
const (
	rolloutLocalEvery  = 10 * time.Millisecond
	rolloutRemoteEvery = 100 * time.Millisecond
)

// pendingShards waits until every shard has applied the change that
// brought the named pattern to version — a deployment or update (the shard
// runs that version or a later one) or a deletion (it runs none, or a
// later deployment) — and returns the shards that have not when the node's
// DeployWait or ctx ends, sorted; nil when all have. A shard has applied
// it once any of its replicas has: the entry is then committed in the
// shard's log, so every event the shard logs afterwards — everything
// published from then on — comes after it. It stops waiting when the
// pattern's metadata moves past that version meanwhile.
func (n *Node) pendingShards(ctx context.Context, name string, version uint64) []uint32 {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.DeployWait)
	defer cancel()
	pending, applied := n.rollout(name, version)
	asked := time.Now() // the other nodes are asked only about what takes a while
	for {
		pending = n.notAppliedHere(pending, name, applied)
		if len(pending) > 0 && time.Since(asked) >= rolloutRemoteEvery {
			asked = time.Now()
			if p := n.Meta().Patterns[name]; p == nil || p.Version != version {
				return nil // (a copy of the metadata: not every 10 ms)
			}
			pending = n.notAppliedElsewhere(ctx, pending, name, applied)
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return shardIDs(pending)
		case <-time.After(rolloutLocalEvery):
		}
	}
}

// notRunning returns, without waiting, the shards none of whose replicas
// (this node's, then the other nodes') has applied the change that brought
// the named pattern to version.
func (n *Node) notRunning(ctx context.Context, name string, version uint64) []uint32 {
	pending, applied := n.rollout(name, version)
	pending = n.notAppliedHere(pending, name, applied)
	if len(pending) > 0 {
		pending = n.notAppliedElsewhere(ctx, pending, name, applied)
	}
	return shardIDs(pending)
}

// rollout returns every shard, and whether a replica running version v of
// the named pattern (ok false: none) has applied the change that brought
// it to version: for a deployment or update, it runs that version or a
// later one; for a deletion, none, or a later deployment.
func (n *Node) rollout(name string, version uint64) (shards []ShardInfo, applied func(v uint64, ok bool) bool) {
	m := n.Meta()
	deleted := false
	if p := m.Patterns[name]; p != nil && p.Version == version {
		deleted = p.Deleted
	}
	return slices.Clone(m.Shards), func(v uint64, ok bool) bool {
		if deleted {
			return !ok || v > version
		}
		return ok && v >= version
	}
}

// notAppliedHere returns the pending shards that this node's replicas have
// not applied the change to (or that it holds no replica of).
func (n *Node) notAppliedHere(pending []ShardInfo, name string, applied func(v uint64, ok bool) bool) []ShardInfo {
	return slices.DeleteFunc(pending, func(info ShardInfo) bool {
		done := false
		for _, sh := range n.shards {
			if sh.ID() == info.ID {
				sh.FSM().View(func(st *shard.State, _ uint64) { done = applied(st.Version(name)) })
			}
		}
		return done
	})
}

// shardIDs lists the shards' ids, sorted; nil for none.
func shardIDs(shards []ShardInfo) []uint32 {
	var out []uint32
	for _, info := range shards {
		out = append(out, uint32(info.ID))
	}
	slices.Sort(out)
	return out
}

// notAppliedElsewhere asks the other nodes that hold replicas of the
// pending shards (ListShards, in parallel, a second each) and returns the
// shards none of them reports as applied: applied is given the version of
// the named pattern the replica runs, ok false when it runs none.
func (n *Node) notAppliedElsewhere(ctx context.Context, pending []ShardInfo, name string, applied func(v uint64, ok bool) bool) []ShardInfo {
	ask := map[string]bool{}
	for _, info := range pending {
		for _, id := range info.Replicas {
			ask[id] = id != n.cfg.NodeID
		}
	}
	done := map[uint64]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range n.cfg.Peers {
		if !ask[p.ID] || p.APIAddr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			shards, err := n.shardsAt(ctx, p.APIAddr)
			if err != nil {
				return // down or unreachable: its replicas count as not applied
			}
			mu.Lock()
			defer mu.Unlock()
			for _, sh := range shards {
				v, ok := uint64(0), false
				for _, pv := range sh.Running {
					if pv.Name == name {
						v, ok = pv.Version, true
					}
				}
				if applied(v, ok) {
					done[uint64(sh.Id)] = true
				}
			}
		}()
	}
	wg.Wait()
	return slices.DeleteFunc(pending, func(info ShardInfo) bool { return done[info.ID] })
}
