package cluster

import (
	"slices"
	"sort"
	"sync"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"

	"github.com/cepcluster/cep/cluster/leader"
	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/watermark"
)

// ClockStatus is one source clock of a shard as its leader sees it.
type ClockStatus = leader.ClockStatus

// clockStatuses are the source clocks of the shards a node leads, as
// their leaders last computed them (for the status and the metrics).
type clockStatuses struct {
	mu sync.Mutex
	m  map[uint64][]ClockStatus
}

// setClockStatus records shard's clocks; nil forgets them (the leader
// session ended).
func (n *Node) setClockStatus(shardID uint64, st []ClockStatus) {
	n.clocks.mu.Lock()
	defer n.clocks.mu.Unlock()
	if st == nil {
		delete(n.clocks.m, shardID)
		return
	}
	if n.clocks.m == nil {
		n.clocks.m = map[uint64][]ClockStatus{}
	}
	n.clocks.m[shardID] = st
}

// ClockStatus returns the source clocks of shardID if this node leads
// it (ok false otherwise), by pattern then source.
func (n *Node) ClockStatus(shardID uint64) (st []ClockStatus, ok bool) {
	n.clocks.mu.Lock()
	defer n.clocks.mu.Unlock()
	st, ok = n.clocks.m[shardID]
	return slices.Clone(st), ok
}

// sourceClocks is a shard's clocks as the API lists them.
func sourceClocks(cs []shard.SourceClock) []*cepv1.SourceClock {
	out := make([]*cepv1.SourceClock, 0, len(cs))
	for _, c := range cs {
		sc := &cepv1.SourceClock{Pattern: c.Pattern, Source: c.Source}
		if c.Clock != watermark.MinTime {
			sc.WatermarkMs, sc.HasWatermark = c.Clock, true
		}
		if c.MaxTime != watermark.MinTime {
			sc.NewestEventMs, sc.HasNewestEvent = c.MaxTime, true
		}
		out = append(out, sc)
	}
	return out
}

// unreadStreams are the streams this node's shard leaders do not read,
// and why, for the shards' status; safe for concurrent use.
type unreadStreams struct {
	mu sync.Mutex
	m  map[uint64]map[string]string // shard -> stream -> reason
}

func (u *unreadStreams) set(shardID uint64, stream, reason string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[uint64]map[string]string{}
	}
	if u.m[shardID] == nil {
		u.m[shardID] = map[string]string{}
	}
	u.m[shardID][stream] = reason
}

func (u *unreadStreams) clear(shardID uint64, stream string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.m[shardID], stream)
}

// list is the shard's streams not read, as "STREAM: reason", sorted.
func (u *unreadStreams) list(shardID uint64) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for stream, reason := range u.m[shardID] {
		out = append(out, stream+": "+reason)
	}
	sort.Strings(out)
	return out
}
