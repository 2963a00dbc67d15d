package plan

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/cluster/meta"
)

// drawReplicas draws shards of two blocks each over 1–6 members, some
// removing or down, some shards splitting, some not converged.
func drawReplicas(t *rapid.T) Replicas {
	var in Replicas
	var ids []string
	for i := range rapid.IntRange(1, 6).Draw(t, "members") {
		id := fmt.Sprintf("n%d", i)
		ids = append(ids, id)
		in.Members = append(in.Members, Member{ID: id,
			Removing: rapid.IntRange(0, 4).Draw(t, id+"-removing") == 0,
			Down:     rapid.IntRange(0, 4).Draw(t, id+"-down") == 0})
	}
	in.Converged = map[uint64]bool{}
	for i := range rapid.IntRange(1, 6).Draw(t, "shards") {
		id := uint64(i + 1)
		reps := rapid.Permutation(ids).Draw(t, "order")
		s := meta.ShardInfo{ID: id, First: 16 * i, Last: 16*i + 15, Replicas: reps[:rapid.IntRange(0, len(reps)).Draw(t, "replicas")]}
		if rapid.IntRange(0, 5).Draw(t, "splitting") == 0 {
			s.Splitting = true
		}
		in.Shards = append(in.Shards, s)
		in.Converged[id] = rapid.IntRange(0, 3).Draw(t, "converged") > 0
	}
	in.Replication = rapid.IntRange(1, 4).Draw(t, "replication")
	in.AutoSplit = rapid.Bool().Draw(t, "autosplit")
	return in
}

func TestReplicaChangesAreValid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := drawReplicas(t)
		conv := in.Converged
		in.Converged = nil
		if p := ReplicaChanges(in); !p.NeedConverged && (len(p.Moves) > 0 || p.Forget != "" || p.SplitForNodes) {
			t.Fatalf("changes without asking the configurations: %+v", p)
		}
		in.Converged = conv
		p := ReplicaChanges(in)
		if p.NeedConverged {
			t.Fatal("asks again")
		}
		moving := 0
		for _, s := range in.Shards {
			if !conv[s.ID] {
				moving++
			}
		}
		if len(p.Moves) > 0 && moving+len(p.Moves) > MaxMoving {
			t.Fatalf("%d moves while %d shards change", len(p.Moves), moving)
		}
		active, present := activePresent(in.Members)
		want := Place(in.Shards, active, present, in.Replication)
		for _, mv := range p.Moves {
			i := slices.IndexFunc(in.Shards, func(s meta.ShardInfo) bool { return s.ID == mv.ShardID })
			s := in.Shards[i]
			if !conv[s.ID] || !s.Settled() || !slices.Equal(mv.From, s.Replicas) || !slices.Equal(mv.To, want[s.ID]) {
				t.Fatalf("move %+v of %+v (converged %v), placement wants %v", mv, s, conv[s.ID], want[s.ID])
			}
		}
		if (len(p.Moves) > 0 || p.Forget != "") && !p.Busy {
			t.Fatalf("changes but not busy: %+v", p)
		}
		if p.Forget != "" {
			if len(p.Moves) > 0 || p.SplitForNodes || moving > 0 {
				t.Fatalf("forgets %s with %+v while %d shards change", p.Forget, p, moving)
			}
			for _, s := range in.Shards {
				if slices.Contains(s.Replicas, p.Forget) {
					t.Fatalf("forgets %s, which shard %d holds", p.Forget, s.ID)
				}
			}
			if i := slices.IndexFunc(in.Members, func(m Member) bool { return m.ID == p.Forget }); !in.Members[i].Removing {
				t.Fatalf("forgets %s, not being removed", p.Forget)
			}
		}
		if p.SplitForNodes && (!in.AutoSplit || len(active) <= len(in.Shards) || moving > 0 || len(present) < len(in.Members)) {
			t.Fatalf("splits: %+v, %d active, %d shards, %d changing", p, len(active), len(in.Shards), moving)
		}
	})
}

// Carried out move by move (each shard's configuration catching up at
// once), the plan ends with no move: the shard map Place calls for.
func TestReplicaChangesConverge(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := drawReplicas(t)
		for i := range in.Shards {
			in.Shards[i].Splitting = false
			in.Converged[in.Shards[i].ID] = true
		}
		for step := 0; ; step++ {
			if step > 4*len(in.Shards) {
				t.Fatalf("still moving after %d rounds", step)
			}
			p := ReplicaChanges(in)
			if len(p.Moves) == 0 {
				break
			}
			for _, mv := range p.Moves {
				i := slices.IndexFunc(in.Shards, func(s meta.ShardInfo) bool { return s.ID == mv.ShardID })
				in.Shards[i].Replicas = mv.To
			}
		}
		active, present := activePresent(in.Members)
		if left := Place(in.Shards, active, present, in.Replication); len(left) > 0 {
			t.Fatalf("placement still wants %v", left)
		}
	})
}

func TestSplitForNodesPicksTheLargest(t *testing.T) {
	shards := []meta.ShardInfo{{ID: 1, First: 0, Last: 63}, {ID: 2, First: 64, Last: 191}, {ID: 3, First: 192, Last: 255}}
	if id, wait := SplitForNodes(shards, 256); id != 2 || wait {
		t.Fatalf("%d %v", id, wait)
	}
	shards[0].Splitting = true
	if id, wait := SplitForNodes(shards, 256); id != 0 || !wait {
		t.Fatalf("a split under way: %d %v", id, wait)
	}
	one := []meta.ShardInfo{{ID: 1, First: 0, Last: 7}}
	if id, wait := SplitForNodes(one, 256); id != 0 || wait {
		t.Fatalf("one block does not split: %d %v", id, wait)
	}
}

// activePresent: the members that may receive replicas, and those that
// keep theirs (not being removed).
func activePresent(members []Member) (active, present []string) {
	for _, m := range members {
		if !m.Removing {
			present = append(present, m.ID)
			if !m.Down {
				active = append(active, m.ID)
			}
		}
	}
	return active, present
}
