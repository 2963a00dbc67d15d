package plan

import (
	"maps"
	"slices"

	"github.com/cepcluster/cep/cluster/meta"
)

// Clock is how a shard's leader runs its patterns' event time: the shards
// whose partitions make each source's clock, and whether the patterns run
// on that clock at all.
type Clock struct {
	// Shards are the shards whose partitions count, self among them.
	Shards []uint64
	// On: the patterns run on the sources' clocks across the shards. A
	// shard alone is its sources' only partition: its events move the
	// watermark directly, exactly as `cepctl run`'s.
	On bool
}

// ClockOf decides a shard's Clock from the shard map, once, for both who
// ask: the reconcile that deploys a pattern (Deploy.Clock) and the clock
// loop that logs the clocks and switches the mode (OpClockMode). Asked of
// two rules, a deployment was logged on the clock by one and off it by the
// other on the next tick.
//
// A shard stopped here (quarantined on this node with no other replica to
// rebuild it from) applies and reads nothing until a restore, so it
// reports no partition: counted, it would hold every clock back, and a
// shard left with it alone would wait on the clock for nothing. So it is
// left out of both the shards and the count.
func ClockOf(shards []meta.ShardInfo, self uint64, stopped func(meta.ShardInfo) bool) Clock {
	ids := make([]uint64, 0, len(shards)+1)
	for _, s := range shards {
		if !stopped(s) {
			ids = append(ids, s.ID)
		}
	}
	// this leader's shard counts even when the map does not list it yet
	if !slices.Contains(ids, self) {
		ids = append(ids, self)
	}
	return Clock{Shards: ids, On: len(ids) > 1}
}

// ClockModeChanges returns, by name, the event-time patterns whose mode
// (modes, by name) is not c.On: those an OpClockMode switches.
func ClockModeChanges(modes map[string]bool, c Clock) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(modes)) {
		if modes[name] != c.On {
			out = append(out, name)
		}
	}
	return out
}
