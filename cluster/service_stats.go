package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/shard"
)

// statsPeerTimeout bounds how long Stats waits for another node's
// answer: a node that does not answer leaves its shards missing, it does
// not hold up the others' counts.
const statsPeerTimeout = 5 * time.Second

// Stats sums what each pattern produced over every shard, each shard's
// counters read from its leader: the shards this node leads here, the
// others asked of their leaders' nodes (leader_only, so a call is
// forwarded once at most), all at once. A shard two nodes both say they
// lead (a leadership changing between reads) is counted once.
func (b patternBackend) Stats(ctx context.Context, r *cepv1.GetPatternStatsRequest) (*cepv1.GetPatternStatsResponse, error) {
	n := b.s.n
	m := n.Meta()
	if r.Name != "" {
		if pm := m.Patterns[r.Name]; pm == nil || pm.Deleted {
			return nil, fmt.Errorf("%w: pattern %q", api.ErrNotFound, r.Name)
		}
	}
	led := n.ledPatternStats(r.Name)
	if r.LeaderOnly {
		return statsOf(led, nil, r.Name, nil, false), nil
	}
	got := map[uint64]*cepv1.ShardPatternStats{}
	for _, s := range led {
		got[uint64(s.ShardId)] = s
	}
	var leaders []string // the other nodes to ask, in the order of their shards
	for _, info := range m.Shards {
		if got[info.ID] != nil {
			continue
		}
		if l := n.shardLeader(ctx, info); l != "" && l != n.cfg.NodeID && !slices.Contains(leaders, l) {
			leaders = append(leaders, l)
		}
	}
	answers := make([][]*cepv1.ShardPatternStats, len(leaders))
	var wg sync.WaitGroup
	for i, id := range leaders {
		p, ok := n.peer(id)
		if !ok || p.APIAddr == "" {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, statsPeerTimeout)
			defer cancel()
			res, err := n.peerAt(p.APIAddr).Patterns().GetPatternStats(ctx, connect.NewRequest(&cepv1.GetPatternStatsRequest{Name: r.Name, LeaderOnly: true}))
			if err == nil {
				answers[i] = res.Msg.ByShard
			} else if ce := (*connect.Error)(nil); !errors.As(err, &ce) || ce.Code() != connect.CodeNotFound {
				n.log.Debug("pattern stats: a shard leader did not answer", "node", id, "err", err)
			}
		})
	}
	wg.Wait()
	for _, a := range answers {
		for _, s := range a {
			if got[uint64(s.ShardId)] == nil {
				got[uint64(s.ShardId)] = s
			}
		}
	}
	var shards []*cepv1.ShardPatternStats
	var missing []uint32
	for _, info := range m.Shards {
		if s := got[info.ID]; s != nil {
			shards = append(shards, s)
		} else {
			missing = append(missing, uint32(info.ID))
		}
	}
	return statsOf(shards, missing, r.Name, m.PatternNames(), true), nil
}

// statsOf is the answer for the shards' counters: their sums per pattern,
// the shards counted and the missing ones. Cluster-wide (deployed set),
// every one of names is listed, counted or not, and no other; else
// (leader_only) the shards' own counters go too.
func statsOf(shards []*cepv1.ShardPatternStats, missing []uint32, name string, names []string, deployed bool) *cepv1.GetPatternStatsResponse {
	out := &cepv1.GetPatternStatsResponse{MissingShards: missing}
	sums := map[string]*cepv1.PatternStats{}
	for _, nm := range names {
		if name == "" || nm == name {
			sums[nm] = &cepv1.PatternStats{Name: nm}
		}
	}
	for _, s := range shards {
		out.Shards = append(out.Shards, s.ShardId)
		for _, p := range s.Patterns {
			sum := sums[p.Name]
			if sum == nil {
				if deployed {
					continue // deleted since the shard was read
				}
				sum = &cepv1.PatternStats{Name: p.Name}
				sums[p.Name] = sum
			}
			sum.Matches += p.Matches
			sum.Timeouts += p.Timeouts
			sum.Late += p.Late
			sum.DeadLetters += p.DeadLetters
			sum.PartialMatches += p.PartialMatches
			sum.ConditionErrors += p.ConditionErrors
			sum.EmitErrors += p.EmitErrors
		}
	}
	for _, s := range sums {
		out.Patterns = append(out.Patterns, s)
	}
	slices.SortFunc(out.Patterns, func(a, b *cepv1.PatternStats) int { return cmp.Compare(a.Name, b.Name) })
	slices.Sort(out.Shards)
	slices.Sort(out.MissingShards)
	if !deployed {
		out.ByShard = shards
	}
	return out
}

// ledPatternStats reads the counters of the shards this node leads (only
// pattern name's when set), sorted by shard.
func (n *Node) ledPatternStats(name string) []*cepv1.ShardPatternStats {
	var out []*cepv1.ShardPatternStats
	for _, sh := range n.Shards() {
		if !sh.IsLeader() {
			continue
		}
		s := &cepv1.ShardPatternStats{ShardId: uint32(sh.ID())}
		var counts []shard.NamedPatternCounters
		sh.FSM().View(func(st *shard.State, index uint64) { counts, s.AppliedIndex = st.PatternCounters(), index })
		for _, c := range counts {
			if name != "" && c.Name != name {
				continue
			}
			s.Patterns = append(s.Patterns, &cepv1.PatternStats{Name: c.Name, Matches: c.Matches, Timeouts: c.Timeouts, Late: c.Late,
				DeadLetters: c.DeadLetters, PartialMatches: uint64(c.PartialMatches), ConditionErrors: c.ConditionErrors, EmitErrors: c.EmitErrors})
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *cepv1.ShardPatternStats) int { return cmp.Compare(a.ShardId, b.ShardId) })
	return out
}
