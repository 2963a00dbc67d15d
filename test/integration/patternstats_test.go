package integration

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/raft"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/shard"
)

// leadersCounters reads each pattern's counters straight from the state
// of every shard's leader, summed: what GetPatternStats must answer, and
// the shards each node leads.
func (tc *testCluster) leadersCounters() (sums map[string]*cepv1.PatternStats, led map[int][]uint32) {
	sums, led = map[string]*cepv1.PatternStats{}, map[int][]uint32{}
	for i, n := range tc.nodes {
		if n == nil {
			continue
		}
		for _, sh := range n.Shards() {
			if sh.Raft().State() != raft.Leader {
				continue
			}
			led[i] = append(led[i], uint32(sh.ID()))
			var counts []shard.NamedPatternCounters
			sh.FSM().View(func(s *shard.State, _ uint64) { counts = s.PatternCounters() })
			for _, c := range counts {
				s := sums[c.Name]
				if s == nil {
					s = &cepv1.PatternStats{Name: c.Name}
					sums[c.Name] = s
				}
				s.Matches += c.Matches
				s.Timeouts += c.Timeouts
				s.Late += c.Late
				s.DeadLetters += c.DeadLetters
				s.PartialMatches += uint64(c.PartialMatches)
				s.ConditionErrors += c.ConditionErrors
				s.EmitErrors += c.EmitErrors
			}
		}
		slices.Sort(led[i])
	}
	return sums, led
}

// GetPatternStats, asked of any node, is the sum of every shard leader's
// counters and the offline engine's counts, every shard counted once;
// leader_only answers a node's own shards; after a shard leader stops,
// the new leaders' counts make the same sums.
func TestPatternStatsSumTheShardLeaders(t *testing.T) {
	tc := newPeers(t, 3, 3*time.Minute)
	tc.startAll()
	tc.deployOnBank(0, lflSpec)
	lines := bankEvents(33, 300)
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
	tc.sameAsOffline("lfl", lflSpec, lines)
	want := offlineCounts(t, lflSpec, lines)
	if want.Matches == 0 || want.Timeouts == 0 {
		t.Fatalf("offline %+v: the events do not exercise the counters", want)
	}
	var allShards []uint32
	for _, info := range tc.nodes[0].Meta().Shards {
		allShards = append(allShards, uint32(info.ID))
	}
	slices.Sort(allShards)

	check := func(when string) {
		t.Helper()
		testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
			sums, led := tc.leadersCounters()
			lfl := sums["lfl"]
			if lfl == nil || lfl.Matches != want.Matches || lfl.Timeouts != want.Timeouts || lfl.Late != want.Late || lfl.ConditionErrors != want.ConditionErrors {
				return fmt.Errorf("%s: the leaders count %v, the offline engine %+v", when, lfl, want)
			}
			for i, n := range tc.nodes {
				if n == nil {
					continue
				}
				c := tc.client(i)
				res, err := c.patterns.GetPatternStats(tc.ctx, req(&cepv1.GetPatternStatsRequest{}))
				if err != nil {
					return fmt.Errorf("%s: node %d: %v", when, i+1, err)
				}
				if len(res.Msg.Patterns) != 1 || !reflect.DeepEqual(res.Msg.Patterns[0].String(), lfl.String()) {
					return fmt.Errorf("%s: node %d answers %v, the leaders' counters sum to %v", when, i+1, res.Msg.Patterns, lfl)
				}
				if !slices.Equal(res.Msg.Shards, allShards) || len(res.Msg.MissingShards) != 0 || len(res.Msg.ByShard) != 0 {
					return fmt.Errorf("%s: node %d counted shards %v, missing %v, by shard %d; want %v", when, i+1, res.Msg.Shards, res.Msg.MissingShards, len(res.Msg.ByShard), allShards)
				}
				one, err := c.patterns.GetPatternStats(tc.ctx, req(&cepv1.GetPatternStatsRequest{Name: "lfl"}))
				if err != nil || len(one.Msg.Patterns) != 1 || one.Msg.Patterns[0].String() != lfl.String() {
					return fmt.Errorf("%s: node %d, lfl alone: %v %v", when, i+1, one, err)
				}
				own, err := c.patterns.GetPatternStats(tc.ctx, req(&cepv1.GetPatternStatsRequest{LeaderOnly: true}))
				if err != nil {
					return fmt.Errorf("%s: node %d, leader_only: %v", when, i+1, err)
				}
				if !slices.Equal(own.Msg.Shards, led[i]) || len(own.Msg.ByShard) != len(led[i]) {
					return fmt.Errorf("%s: node %d, leader_only, answers shards %v, it leads %v", when, i+1, own.Msg.Shards, led[i])
				}
			}
			return nil
		})
	}
	check("after the events")
	_, err := tc.client(1).patterns.GetPatternStats(tc.ctx, req(&cepv1.GetPatternStatsRequest{Name: "nope"}))
	wantCode(t, "an unknown pattern", err, connect.CodeNotFound)

	// a shard's leader other than node 1 stops; the others take over
	_, led := tc.leadersCounters()
	gone := -1
	for i := 1; i < len(tc.nodes); i++ {
		if len(led[i]) > 0 {
			gone = i
		}
	}
	if gone < 0 {
		t.Logf("node 1 leads every shard (%v): node 3 stops", led)
		gone = 2
	}
	if err := tc.stop(gone); err != nil {
		t.Fatal(err)
	}
	check(fmt.Sprintf("node %d stopped", gone+1))
}
