package plan

import (
	"cmp"
	"slices"

	"github.com/cepcluster/cep/cluster/meta"
)

// Place returns the replica lists the shards should have, given the nodes
// that may receive replicas (active: alive and not being removed), every
// node still in the cluster (present, a superset of active; an active node
// missing from present is ignored) and the replication factor r (below 1
// it counts as 1). Only the
// shards whose list changes are in the result, keyed by shard id (ids are
// unique), with their complete new list; nil when nothing changes, when
// there are no shards or when no node is active, as there is then nowhere
// to put a replica. The shards are not modified.
//
// It depends only on its arguments: active and present are sets, whatever
// their order or repetitions, and the shards are taken in ascending id, so
// every node computing it from the same metadata proposes the same change,
// and a result applied to the shards is a fixed point (placing again
// changes nothing).
//
// A shard should have want = min(r, len(active)) replicas, all on active
// nodes. The lists are derived in steps, each moving as little as it can:
//
//  1. the shard's active replicas are kept, in their order, up to want
//     (when r shrank, the last ones are dropped);
//  2. missing replicas go to the active nodes not in the list holding the
//     fewest replicas (ties: fewest preferred leaderships, then smallest
//     id), counting the kept replicas of every shard first and filling the
//     shards in ascending id; they are appended at the end;
//  3. while there are fewer active nodes than r, the replicas on nodes
//     still present but not active are kept after the active ones, in
//     their order, until the list has as many nodes as before or r:
//     there is nowhere to move them, and a node that comes back still
//     holds its replica (a node gone from present takes its replicas);
//  4. replicas are moved between active nodes until their loads differ by
//     at most 1 (see balanceReplicas);
//  5. preferred leaders are spread by reordering within the lists (see
//     spreadLeaders). Replicas[0] is always an active node.
//
// A list never holds a node twice, nor a node missing from present.
func Place(shards []meta.ShardInfo, active, present []string, r int) map[uint64][]string {
	inPresent := make(map[string]bool, len(present))
	for _, id := range present {
		inPresent[id] = true
	}
	nodes := slices.Compact(slices.Sorted(slices.Values(active)))
	nodes = slices.DeleteFunc(nodes, func(id string) bool { return !inPresent[id] })
	if len(nodes) == 0 || len(shards) == 0 {
		return nil
	}
	isActive := make(map[string]bool, len(nodes))
	for _, id := range nodes {
		isActive[id] = true
	}
	r = max(r, 1)
	want := min(r, len(nodes))

	order := slices.Clone(shards) // the Replicas slices are only read
	slices.SortStableFunc(order, func(a, b meta.ShardInfo) int { return cmp.Compare(a.ID, b.ID) })
	lists := make([][]string, len(order))
	load := make(map[string]int, len(nodes))  // replicas per active node
	leads := make(map[string]int, len(nodes)) // preferred leaderships per active node
	for i, s := range order {
		var l []string
		for _, id := range s.Replicas {
			if isActive[id] && len(l) < want && !slices.Contains(l, id) {
				l = append(l, id)
				load[id]++
			}
		}
		if len(l) > 0 {
			leads[l[0]]++
		}
		lists[i] = l
	}
	for i, s := range order {
		l := lists[i]
		for len(l) < want { // some active node is not in l: len(l) < len(nodes)
			best := ""
			for _, id := range nodes { // sorted: on a full tie the first stays
				if !slices.Contains(l, id) && (best == "" || load[id] < load[best] ||
					load[id] == load[best] && leads[id] < leads[best]) {
					best = id
				}
			}
			if len(l) == 0 {
				leads[best]++
			}
			l = append(l, best)
			load[best]++
		}
		before := len(slices.Compact(slices.Sorted(slices.Values(s.Replicas))))
		for _, id := range s.Replicas {
			if len(l) >= min(before, r) {
				break
			}
			if inPresent[id] && !isActive[id] && !slices.Contains(l, id) {
				l = append(l, id)
			}
		}
		lists[i] = l
	}
	balanceReplicas(lists, nodes, load)
	spreadLeaders(lists, isActive)

	var changed map[uint64][]string
	for i, s := range order {
		if !slices.Equal(lists[i], s.Replicas) {
			if changed == nil {
				changed = make(map[uint64][]string)
			}
			changed[s.ID] = lists[i]
		}
	}
	return changed
}

// balanceReplicas moves replicas, one at a time, from the most loaded
// active node to the least loaded one while they differ by 2 or more
// (ties: smallest id for both), in the lowest shard (lists are in
// ascending shard id) holding the first and not the second. The replica is replaced in place,
// so the newcomer inherits its position, preferred leadership included,
// and the other replicas of the shard stay where they are. load holds the
// replicas per active node (sorted in nodes) and is kept up to date.
//
// Such a shard always exists: of the shards holding the most loaded node,
// at most load[least] also hold the least loaded one. Every move lowers
// E+D, where E sums the loads above ceil(mean) and D the shortfalls below
// floor(mean): the most loaded node is above ceil(mean) or the least
// loaded below floor(mean) (else they would differ by at most 1), and
// neither crosses the mean in the move. E+D starts at most at twice the total,
// which bounds the loop.
func balanceReplicas(lists [][]string, nodes []string, load map[string]int) {
	total := 0
	for _, id := range nodes {
		total += load[id]
	}
	for range 2 * total {
		hi, lo := nodes[0], nodes[0]
		for _, id := range nodes {
			if load[id] > load[hi] {
				hi = id
			}
			if load[id] < load[lo] {
				lo = id
			}
		}
		if load[hi]-load[lo] < 2 {
			return
		}
		for _, l := range lists {
			if i := slices.Index(l, hi); i >= 0 && !slices.Contains(l, lo) {
				l[i] = lo
				load[hi]--
				load[lo]++
				break
			}
		}
	}
}

// spreadLeaders spreads the preferred leaders (Replicas[0], which Raft
// elections favour, so each leads about as many shards as the others):
// while a shard's preferred leader is the preferred leader of at least 2
// more shards than another active replica of that shard, the two swap
// places. Of the possible swaps it makes the one with the largest
// difference, then in the lowest shard, then with the replica earliest in
// the list. Only lists are reordered; membership does not change.
//
// The spread is local: a node leading 2 shards more than another node
// sharing none of them stays as it is. Every swap lowers the sum of the
// squared leaderships by at least 2, from at most len(lists)², which
// bounds the loop.
func spreadLeaders(lists [][]string, isActive map[string]bool) {
	leads := make(map[string]int)
	for _, l := range lists {
		leads[l[0]]++
	}
	for range len(lists) * len(lists) {
		shard, pos, gap := -1, 0, 1
		for i, l := range lists {
			for j := 1; j < len(l); j++ {
				if d := leads[l[0]] - leads[l[j]]; d > gap && isActive[l[j]] {
					shard, pos, gap = i, j, d
				}
			}
		}
		if shard < 0 {
			return
		}
		l := lists[shard]
		leads[l[0]]--
		leads[l[pos]]++
		l[0], l[pos] = l[pos], l[0]
	}
}
