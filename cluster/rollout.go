package cluster

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/peer"
	"github.com/cepcluster/cep/shard"
)

// How often waitShards looks at this node's replicas, and at most how
// often it asks the other nodes about the shards it still waits for.
const (
	rolloutLocalEvery  = 10 * time.Millisecond
	rolloutRemoteEvery = 100 * time.Millisecond
)

// shardCheck says whether a replica has applied a change, from its state
// (a replica of this node) or from what its node reports of it (a
// replica of another node: peer.Client.Rollouts). A shard has applied a
// change once any of its replicas has: the entry is then committed in the
// shard's log, so every event the shard logs afterwards — everything
// published from then on — comes after it.
type shardCheck struct {
	local  func(*shard.State) bool
	remote func(peer.ShardRollout) bool
	// moved reports that the metadata moved past the change meanwhile:
	// there is nothing to wait for any more
	moved func(*meta.Meta) bool
}

// waitShards waits until every shard has applied the change check looks
// for and returns the shards that have not when bound or ctx ends, sorted;
// nil when all have (or the metadata moved past it).
func (n *Node) waitShards(ctx context.Context, bound time.Duration, check shardCheck) []uint32 {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	pending := slices.Clone(n.Meta().Shards)
	asked := time.Now() // the other nodes are asked only about what takes a while
	for {
		pending = n.notAppliedHere(pending, check)
		if len(pending) > 0 && time.Since(asked) >= rolloutRemoteEvery {
			asked = time.Now()
			if check.moved != nil && check.moved(n.Meta()) {
				return nil // (a copy of the metadata: not every 10 ms)
			}
			pending = n.notAppliedElsewhere(ctx, pending, check)
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

// notApplied returns, without waiting, the shards none of whose replicas
// (this node's, then the other nodes') has applied the change.
func (n *Node) notApplied(ctx context.Context, check shardCheck) []uint32 {
	pending := n.notAppliedHere(slices.Clone(n.Meta().Shards), check)
	if len(pending) > 0 {
		pending = n.notAppliedElsewhere(ctx, pending, check)
	}
	return shardIDs(pending)
}

// patternApplied is the check for the change that brought the named
// pattern to version: for a deployment or update, a replica runs that
// version or a later one; for a deletion, none, or a later deployment.
func (n *Node) patternApplied(name string, version uint64) shardCheck {
	deleted := false
	if p := n.Meta().Patterns[name]; p != nil && p.Version == version {
		deleted = p.Deleted
	}
	check := versionCheck(name, func(v uint64, ok bool) bool {
		if deleted {
			return !ok || v > version
		}
		return ok && v >= version
	})
	check.moved = func(m *meta.Meta) bool {
		p := m.Patterns[name]
		return p == nil || p.Version != version
	}
	return check
}

// versionCheck is the shardCheck of applied on the version of the named
// pattern a replica runs (ok: it runs one); moved is the caller's.
func versionCheck(name string, applied func(v uint64, ok bool) bool) shardCheck {
	return shardCheck{
		local: func(st *shard.State) bool { return applied(st.Version(name)) },
		remote: func(sh peer.ShardRollout) bool {
			for _, pv := range sh.Running {
				if pv.Name == name {
					return applied(pv.Version, true)
				}
			}
			return applied(0, false)
		},
	}
}

// restored is the check for the savepoint restore id: a replica's state
// came from it.
func restored(id string) shardCheck {
	return shardCheck{
		local:  func(st *shard.State) bool { return st.RestoreID() == id },
		remote: func(sh peer.ShardRollout) bool { return sh.RestoreID == id },
		moved:  func(m *meta.Meta) bool { return m.Restore == nil || m.Restore.ID != id },
	}
}

// notAppliedHere returns the pending shards that this node's replicas have
// not applied the change to (or that it holds no replica of).
func (n *Node) notAppliedHere(pending []meta.ShardInfo, check shardCheck) []meta.ShardInfo {
	return slices.DeleteFunc(pending, func(info meta.ShardInfo) bool {
		done := false
		for _, sh := range n.Shards() {
			if sh.ID() == info.ID {
				sh.FSM().View(func(st *shard.State, _ uint64) { done = check.local(st) })
			}
		}
		return done
	})
}

// shardIDs lists the shards' ids, sorted; nil for none.
func shardIDs(shards []meta.ShardInfo) []uint32 {
	var out []uint32
	for _, info := range shards {
		out = append(out, uint32(info.ID))
	}
	slices.Sort(out)
	return out
}

// notAppliedElsewhere asks the other nodes that hold replicas of the
// pending shards (ListShards, in parallel, a second each) and returns the
// shards none of them reports as applied.
func (n *Node) notAppliedElsewhere(ctx context.Context, pending []meta.ShardInfo, check shardCheck) []meta.ShardInfo {
	ask := map[string]bool{}
	for _, info := range pending {
		for _, id := range info.Replicas {
			ask[id] = id != n.cfg.NodeID
		}
	}
	done := map[uint64]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range n.peers() {
		if !ask[p.ID] || p.APIAddr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			shards, err := n.peerAt(p.APIAddr).Rollouts(ctx)
			if err != nil {
				return // down or unreachable: its replicas count as not applied
			}
			mu.Lock()
			defer mu.Unlock()
			for _, sh := range shards {
				if check.remote(sh) {
					done[sh.Shard] = true
				}
			}
		}()
	}
	wg.Wait()
	return slices.DeleteFunc(pending, func(info meta.ShardInfo) bool { return done[info.ID] })
}
