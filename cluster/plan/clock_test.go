package plan

import (
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/cluster/meta"
)

// clockShardsBefore is how the clock loop chose its shards and mode before
// it asked ClockOf, kept to show the planner decides the same.
func clockShardsBefore(shards []meta.ShardInfo, self uint64, stopped func(meta.ShardInfo) bool) ([]uint64, bool) {
	ids := make([]uint64, 0, len(shards))
	for _, s := range shards {
		if !stopped(s) {
			ids = append(ids, s.ID)
		}
	}
	if !slices.Contains(ids, self) {
		ids = append(ids, self)
	}
	return ids, len(ids) > 1
}

// reconcileClockBefore is how reconcile set Deploy.Clock before it asked
// ClockOf: every shard counted, stopped or not.
func reconcileClockBefore(shards []meta.ShardInfo) bool { return len(shards) > 1 }

type clockCase struct {
	shards  []meta.ShardInfo
	self    uint64
	stopped map[uint64]bool
}

func (c clockCase) isStopped(s meta.ShardInfo) bool { return c.stopped[s.ID] }

func drawClockCase(t *rapid.T) clockCase {
	var c clockCase
	ids := rapid.SliceOfNDistinct(rapid.Uint64Range(1, 8), 0, 6, rapid.ID[uint64]).Draw(t, "shards")
	for _, id := range ids {
		c.shards = append(c.shards, meta.ShardInfo{ID: id, Replicas: []string{"n1"}})
	}
	c.self = rapid.Uint64Range(1, 8).Draw(t, "self")
	c.stopped = map[uint64]bool{}
	for _, id := range ids {
		// the leader's own shard runs (it leads); another may be stopped
		if id != c.self && rapid.Bool().Draw(t, "stopped") {
			c.stopped[id] = true
		}
	}
	return c
}

// The clock loop's shards and mode are as before.
func TestClockOfDecidesAsTheClockLoopDid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawClockCase(t)
		wantShards, wantOn := clockShardsBefore(c.shards, c.self, c.isStopped)
		got := ClockOf(c.shards, c.self, c.isStopped)
		if !slices.Equal(got.Shards, wantShards) || got.On != wantOn {
			t.Fatalf("ClockOf = %+v, want shards %v on %v", got, wantShards, wantOn)
		}
	})
}

// A pattern deployed with the mode ClockOf gives is not switched by the
// clock loop on its next tick, whatever the shard map and the stopped
// shards; the two rules asked before disagreed only when a stopped shard,
// or the leader's own shard missing from the map, made the difference
// between one shard and more.
func TestDeployedClockModeStays(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawClockCase(t)
		cp := ClockOf(c.shards, c.self, c.isStopped)
		names := rapid.SliceOfDistinct(rapid.StringMatching(`[a-c]`), rapid.ID[string]).Draw(t, "patterns")
		// what the state holds once the deployments are applied
		modes := map[string]bool{}
		for _, n := range names {
			modes[n] = cp.On
		}
		if ch := ClockModeChanges(modes, cp); len(ch) > 0 {
			t.Fatalf("deployed with On=%v, then switched: %v", cp.On, ch)
		}
		_, loopOn := clockShardsBefore(c.shards, c.self, c.isStopped)
		if before := reconcileClockBefore(c.shards); before != loopOn {
			// the old disagreement: only a stopped shard, or a map that
			// does not list the leader's shard yet, causes it
			listed := slices.ContainsFunc(c.shards, func(s meta.ShardInfo) bool { return s.ID == c.self })
			if len(c.stopped) == 0 && listed {
				t.Fatalf("the old rules disagreed without a stopped shard: %+v", c)
			}
		}
	})
}

// The modes switched are exactly those that differ, in name order.
func TestClockModeChanges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		modes := rapid.MapOf(rapid.StringMatching(`[a-e]`), rapid.Bool()).Draw(t, "modes")
		cp := Clock{On: rapid.Bool().Draw(t, "on")}
		var want []string
		for _, n := range slices.Sorted(maps.Keys(modes)) {
			if modes[n] != cp.On {
				want = append(want, n)
			}
		}
		if got := ClockModeChanges(modes, cp); !slices.Equal(got, want) {
			t.Fatalf("ClockModeChanges = %v, want %v", got, want)
		}
	})
}

// The case that logged a deployment on the clock and switched it off on
// the next tick: two shards, the other quarantined here with no replica
// elsewhere.
func TestClockOfLeavesAStoppedShardOut(t *testing.T) {
	shards := []meta.ShardInfo{{ID: 1, Replicas: []string{"n1"}}, {ID: 2, Replicas: []string{"n1"}}}
	stopped := func(s meta.ShardInfo) bool { return s.ID == 2 }
	if !reconcileClockBefore(shards) {
		t.Fatal("the old reconcile rule counted the stopped shard")
	}
	cp := ClockOf(shards, 1, stopped)
	if cp.On || !slices.Equal(cp.Shards, []uint64{1}) {
		t.Fatalf("ClockOf = %+v, want shard 1 alone, off the clock", cp)
	}
}
