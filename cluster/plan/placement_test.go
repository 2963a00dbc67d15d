package plan

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/cluster/meta"
)

// placeCase is an input of Place.
type placeCase struct {
	shards          []meta.ShardInfo
	active, present []string
	r               int
}

// drawPlaceCase draws 1–12 shards over 1–7 nodes, each node active, present
// but not active (dead or being removed) or gone, with current lists of
// any length over all of them (gone nodes included), shard ids out of order.
func drawPlaceCase(t *rapid.T) placeCase {
	var c placeCase
	nodes := make([]string, rapid.IntRange(1, 7).Draw(t, "nodes"))
	for i := range nodes {
		nodes[i] = fmt.Sprintf("n%d", i)
		switch rapid.SampledFrom([]string{"active", "active", "present", "gone"}).Draw(t, nodes[i]) {
		case "active":
			c.active = append(c.active, nodes[i])
			c.present = append(c.present, nodes[i])
		case "present":
			c.present = append(c.present, nodes[i])
		}
	}
	ids := make([]uint64, rapid.IntRange(1, 12).Draw(t, "shards"))
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	for _, id := range rapid.Permutation(ids).Draw(t, "ids") {
		replicas := rapid.Permutation(nodes).Draw(t, "order")
		replicas = replicas[:rapid.IntRange(0, len(replicas)).Draw(t, "replicas")]
		c.shards = append(c.shards, meta.ShardInfo{ID: id, First: int(id), Last: int(id), Replicas: replicas})
	}
	c.r = rapid.IntRange(1, 5).Draw(t, "r")
	return c
}

// applyPlaced returns the shards with the lists of changed replaced.
func applyPlaced(shards []meta.ShardInfo, changed map[uint64][]string) []meta.ShardInfo {
	out := slices.Clone(shards)
	for i := range out {
		if l, ok := changed[out[i].ID]; ok {
			out[i].Replicas = slices.Clone(l)
		} else {
			out[i].Replicas = slices.Clone(out[i].Replicas)
		}
	}
	return out
}

func clonePlaceShards(shards []meta.ShardInfo) []meta.ShardInfo { return applyPlaced(shards, nil) }

func placeDistinct(ids []string) int { return len(slices.Compact(slices.Sorted(slices.Values(ids)))) }

// placeCounts returns the replicas and the preferred leaderships of each active
// node.
func placeCounts(shards []meta.ShardInfo, active []string) (load, leads map[string]int) {
	load, leads = make(map[string]int), make(map[string]int)
	for _, id := range active {
		load[id], leads[id] = 0, 0
	}
	for _, s := range shards {
		for i, id := range s.Replicas {
			if _, ok := load[id]; ok {
				load[id]++
				if i == 0 {
					leads[id]++
				}
			}
		}
	}
	return load, leads
}

func placeSpread(m map[string]int) int {
	if len(m) == 0 {
		return 0
	}
	lo, hi := int(^uint(0)>>1), 0
	for _, v := range m {
		lo, hi = min(lo, v), max(hi, v)
	}
	return hi - lo
}

// checkPlaced checks the shards after applying Place's result to before.
func checkPlaced(t *rapid.T, c placeCase, before, after []meta.ShardInfo) {
	for i, s := range after {
		old := before[i].Replicas
		if placeDistinct(s.Replicas) != len(s.Replicas) {
			t.Fatalf("shard %d: %v holds a node twice", s.ID, s.Replicas)
		}
		nActive, cand := 0, 0 // active replicas; old replicas present but not active
		for j, id := range s.Replicas {
			switch {
			case !slices.Contains(c.present, id):
				t.Fatalf("shard %d: %v holds %s, which is not present", s.ID, s.Replicas, id)
			case slices.Contains(c.active, id):
				if j > nActive {
					t.Fatalf("shard %d: %v holds active %s after a non-active node", s.ID, s.Replicas, id)
				}
				nActive++
			case !slices.Contains(old, id):
				t.Fatalf("shard %d: %v gained non-active %s (was %v)", s.ID, s.Replicas, id, old)
			}
		}
		if len(c.active) >= c.r {
			if len(s.Replicas) != c.r || nActive != c.r {
				t.Fatalf("shard %d: %v, want %d active replicas", s.ID, s.Replicas, c.r)
			}
			continue
		}
		// too few active nodes: all of them, then the old non-active ones
		// still present, in their order, up to the old length and r
		if nActive != len(c.active) {
			t.Fatalf("shard %d: %v does not hold every active node %v", s.ID, s.Replicas, c.active)
		}
		var kept []string
		for _, id := range old {
			if slices.Contains(c.present, id) && !slices.Contains(c.active, id) && !slices.Contains(kept, id) {
				kept = append(kept, id)
				cand++
			}
		}
		n := max(len(c.active), min(len(c.active)+cand, placeDistinct(old), c.r))
		if len(s.Replicas) != n || !slices.Equal(s.Replicas[nActive:], kept[:n-nActive]) {
			t.Fatalf("shard %d: %v from %v, want the %d active nodes then %v", s.ID, s.Replicas, old, nActive, kept[:n-nActive])
		}
	}
	load, leads := placeCounts(after, c.active)
	if placeSpread(load) > 1 {
		t.Fatalf("replicas per active node %v differ by more than 1", load)
	}
	// the leaders are spread locally: no shard's leader leads 2 more shards
	// than another active replica of it
	for _, s := range after {
		for _, id := range s.Replicas[1:] {
			if _, ok := leads[id]; ok && leads[s.Replicas[0]] >= leads[id]+2 {
				t.Fatalf("shard %d: %v, preferred leaders %v", s.ID, s.Replicas, leads)
			}
		}
	}
	// That spreads them globally only when any two active nodes share a
	// shard (every shard holds every active node) or when leading is
	// holding (r = 1). Otherwise a node may lead 2 shards more than one
	// it shares none of them with (4 nodes, r = 2, 12 new shards end with
	// 4, 3, 3 and 2), which only a chain of swaps would even out.
	if (c.r == 1 || len(c.active) <= c.r) && placeSpread(leads) > 1 {
		t.Fatalf("preferred leaders per active node %v differ by more than 1", leads)
	}
}

// Place's result, applied, satisfies the placement rules and is a fixed
// point; Place modifies nothing.
func TestPlaceProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawPlaceCase(t)
		before := clonePlaceShards(c.shards)
		got := Place(c.shards, c.active, c.present, c.r)
		if !reflect.DeepEqual(c.shards, before) {
			t.Fatalf("place modified the shards: %v, was %v", c.shards, before)
		}
		if len(c.active) == 0 {
			if got != nil {
				t.Fatalf("no active node, got %v", got)
			}
			return
		}
		for _, s := range c.shards {
			if l, ok := got[s.ID]; ok && slices.Equal(l, s.Replicas) {
				t.Fatalf("shard %d is in the result unchanged: %v", s.ID, l)
			}
		}
		if len(got) > len(c.shards) {
			t.Fatalf("result %v has shards that do not exist", got)
		}
		after := applyPlaced(c.shards, got)
		checkPlaced(t, c, before, after)
		if again := Place(after, c.active, c.present, c.r); len(again) != 0 {
			t.Fatalf("placing %v again changes %v", after, again)
		}
	})
}

// Place depends on active and present as sets and on the shards by id, not
// on the order or repetitions they come in.
func TestPlaceDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawPlaceCase(t)
		want := Place(c.shards, c.active, c.present, c.r)
		repeated := c.active[:rapid.IntRange(0, len(c.active)).Draw(t, "repeated")]
		active := rapid.Permutation(append(slices.Clone(c.active), repeated...)).Draw(t, "active")
		present := rapid.Permutation(c.present).Draw(t, "present")
		shards := rapid.Permutation(clonePlaceShards(c.shards)).Draw(t, "shard order")
		if got := Place(shards, active, present, c.r); !reflect.DeepEqual(got, want) {
			t.Fatalf("active %v present %v: %v; active %v present %v: %v", c.active, c.present, want, active, present, got)
		}
	})
}

// With every node active (at least r of them) and the shards placed, a new
// node only receives replicas: at most ceil(total replicas / nodes, the new
// one included), each replacing one replica of a different shard; the
// other replicas stay where they are (lists may be reordered, for the
// preferred leaders). The old nodes' loads differ by at most 1, and stay
// so as the most loaded give up replicas, so every move goes to the new
// node, until it is within 1 of them.
func TestPlaceAddNode(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawPlaceCase(t)
		c.active = slices.Clone(c.present)
		if len(c.active) == 0 {
			c.active, c.present = []string{"n0"}, []string{"n0"}
		}
		c.r = rapid.IntRange(1, len(c.active)).Draw(t, "r")
		placed := applyPlaced(c.shards, Place(c.shards, c.active, c.present, c.r))
		node := rapid.SampledFrom([]string{"a", "n3x", "z"}).Draw(t, "new node")
		active := append(slices.Clone(c.active), node)
		got := Place(placed, active, append(slices.Clone(c.present), node), c.r)
		total, moved := c.r*len(placed), 0
		for _, s := range placed {
			l, ok := got[s.ID]
			if !ok {
				continue
			}
			var added, removed []string
			for _, id := range l {
				if !slices.Contains(s.Replicas, id) {
					added = append(added, id)
				}
			}
			for _, id := range s.Replicas {
				if !slices.Contains(l, id) {
					removed = append(removed, id)
				}
			}
			if len(added) != len(removed) || len(added) > 1 || len(added) == 1 && added[0] != node {
				t.Fatalf("shard %d: %v → %v, want at most one replica replaced by %s", s.ID, s.Replicas, l, node)
			}
			moved += len(added)
		}
		if bound := (total + len(active) - 1) / len(active); moved > bound {
			t.Fatalf("%d replicas moved to %s, want at most %d: %v → %v", moved, node, bound, placed, got)
		}
	})
}

func TestPlaceCases(t *testing.T) {
	shards := func(lists ...[]string) []meta.ShardInfo {
		out := make([]meta.ShardInfo, len(lists))
		for i, l := range lists {
			out[i] = meta.ShardInfo{ID: uint64(i + 1), Replicas: l}
		}
		return out
	}
	l := func(ids ...string) []string { return ids }
	for _, tc := range []struct {
		name            string
		shards          []meta.ShardInfo
		active, present []string
		r               int
		want            map[uint64][]string
	}{{
		name:   "no active node",
		shards: shards(l("a")), present: l("a"), r: 1,
	}, {
		name:   "no shard",
		active: l("a"), present: l("a"), r: 1,
	}, {
		name:   "placed",
		shards: shards(l("a", "b"), l("b", "c"), l("c", "a")), active: l("c", "a", "b"), present: l("a", "b", "c"), r: 2,
	}, {
		// nowhere to move c's replicas: they stay
		name:   "3 nodes r=3 one dead",
		shards: shards(l("a", "b", "c"), l("b", "a", "c"), l("a", "b", "c")), active: l("a", "b"), present: l("a", "b", "c"), r: 3,
	}, {
		// ... after the active ones: a dead node is no preferred leader
		name:   "3 nodes r=3 one dead listed first",
		shards: shards(l("c", "a", "b"), l("b", "c", "a")), active: l("a", "b"), present: l("a", "b", "c"), r: 3,
		want: map[uint64][]string{1: l("a", "b", "c"), 2: l("b", "a", "c")},
	}, {
		// c's replicas go to d, appended; d then takes one preferred leadership from a
		name:   "4 nodes r=3 one removed",
		shards: shards(l("a", "b", "c"), l("b", "c", "a"), l("c", "a", "b")), active: l("a", "b", "d"), present: l("a", "b", "c", "d"), r: 3,
		want: map[uint64][]string{1: l("d", "b", "a"), 2: l("b", "a", "d"), 3: l("a", "b", "d")},
	}, {
		name:   "1 node r=3 two join",
		shards: shards(l("a"), l("a"), l("a")), active: l("a", "b", "c"), present: l("a", "b", "c"), r: 3,
		want: map[uint64][]string{1: l("b", "a", "c"), 2: l("c", "b", "a"), 3: l("a", "b", "c")},
	}, {
		// only two nodes are left for r=3: the gone one is dropped anyway
		name:   "gone node dropped",
		shards: shards(l("a", "b", "c"), l("c", "a", "b")), active: l("a", "b"), present: l("a", "b"), r: 3,
		want: map[uint64][]string{1: l("b", "a"), 2: l("a", "b")},
	}, {
		name:   "duplicate replica",
		shards: shards(l("a", "a", "b")), active: l("a", "b"), present: l("a", "b"), r: 2,
		want: map[uint64][]string{1: l("a", "b")},
	}, {
		name:   "r lowered",
		shards: shards(l("a", "b", "c")), active: l("a", "b", "c"), present: l("a", "b", "c"), r: 2,
		want: map[uint64][]string{1: l("a", "b")},
	}, {
		// the new shard goes to the least loaded nodes, b then c (smallest
		// id first); a, leading 2 shards to c's none, hands one to c
		name:   "new shard",
		shards: shards(l("a", "b"), l("a", "c"), nil), active: l("a", "b", "c"), present: l("a", "b", "c"), r: 2,
		want: map[uint64][]string{2: l("c", "a"), 3: l("b", "c")},
	}, {
		// every node holds one replica: the new shard goes to those leading
		// no shard, c and d, rather than to a and b
		name:   "new shard to the fewest leaderships",
		shards: shards(l("b", "c"), l("a", "d"), nil), active: l("a", "b", "c", "d"), present: l("a", "b", "c", "d"), r: 2,
		want: map[uint64][]string{3: l("c", "d")},
	}, {
		// a holds all 6 replicas: 4 moves, alternating between b and c
		name:   "1 node r=1 two join",
		shards: shards(l("a"), l("a"), l("a"), l("a"), l("a"), l("a")), active: l("a", "b", "c"), present: l("a", "b", "c"), r: 1,
		want: map[uint64][]string{1: l("b"), 2: l("c"), 3: l("b"), 4: l("c")},
	}, {
		// b and c hold 2 replicas, a none: b (smallest id) gives a its
		// replica of the lowest shard, in place, preferred leadership
		// included
		name:   "balance in place",
		shards: shards(l("b", "c"), l("b", "c")), active: l("a", "b", "c"), present: l("a", "b", "c"), r: 2,
		want: map[uint64][]string{1: l("a", "c")},
	}, {
		// a holds 3 replicas, c 1: the lowest shard with a and not c
		// gives c its replica of a
		name:   "balance from the lowest shard",
		shards: shards(l("a", "b"), l("b", "a"), l("a", "c")), active: l("a", "b", "c"), present: l("a", "b", "c"), r: 2,
		want: map[uint64][]string{1: l("c", "b")},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := Place(tc.shards, tc.active, tc.present, tc.r)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
