package nfa

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestEdgeIndexFindsCompatibleEdges checks the lookup of a node with many
// edges against testing each edge with dewey.compatible: the same edge
// indexes, ascending, for any versions, removed edges and edges added
// after the index was built.
func TestEdgeIndexFindsCompatibleEdges(t *testing.T) {
	version := func(t *rapid.T, label string) dewey {
		n := rapid.IntRange(1, 4).Draw(t, label+" length")
		v := make(dewey, n)
		for i := range v {
			v[i] = int32(rapid.IntRange(0, 2).Draw(t, label))
		}
		return v
	}
	rapid.Check(t, func(t *rapid.T) {
		n := &node{}
		add := func() {
			n.edges = append(n.edges, edge{ver: version(t, "edge")})
			if n.index != nil {
				n.indexEdge(len(n.edges) - 1)
			}
		}
		for range rapid.IntRange(indexFrom, 3*indexFrom).Draw(t, "edges") {
			add()
		}
		for i := range n.edges {
			if rapid.IntRange(0, 3).Draw(t, "remove") == 0 {
				n.removeEdge(int32(i))
			}
		}
		for range rapid.IntRange(1, 20).Draw(t, "lookups") {
			if rapid.Bool().Draw(t, "add") {
				add()
			}
			q := version(t, "query")
			var want []int32
			for i, e := range n.edges {
				if !e.removed && q.compatible(e.ver) {
					want = append(want, int32(i))
				}
			}
			got := n.compatibleEdges(q, nil)
			if n.index == nil && len(n.edges)-int(n.removed) >= indexFrom {
				t.Fatalf("a node with %d live edges has no index", len(n.edges)-int(n.removed))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("version %v: edges %v, want %v (edges %v)", q, got, want, n.edges)
			}
		}
	})
}

// bumpsInPlace's claim, checked on random nodes: when it holds for a
// partial match at n with version v, locking n under v.increase(k) and
// releasing it under v changes no lock count and removes no edge, so both
// can be skipped. Its conditions are not idle: among the nodes where it
// does not hold, the lock and release do change something.
func TestBumpInPlaceLockAndReleaseCancel(t *testing.T) {
	version := func(t *rapid.T, label string) dewey {
		v := make(dewey, rapid.IntRange(1, 3).Draw(t, label+" length"))
		for i := range v {
			v[i] = int32(rapid.IntRange(0, 2).Draw(t, label))
		}
		return v
	}
	changedWithout := 0
	rapid.Check(t, func(t *rapid.T) {
		ks := &keyState{}
		n := &node{ev: &event{refs: 1}, refs: 1} // the partial match's own reference
		n.edges = n.inline[:0:1]
		v := version(t, "partial match")
		for range rapid.IntRange(1, 2*indexFrom).Draw(t, "edges") {
			e := edge{ver: version(t, "edge")}
			// a live edge holds a lock per partial match or edge that locked
			// it, and one the partial match is compatible with holds its
			// own, except in decoded or migrated state (an edge without
			// locks marks the node unlocked)
			e.refs = int32(rapid.IntRange(0, 2).Draw(t, "locks"))
			if v.compatible(e.ver) && rapid.IntRange(0, 2).Draw(t, "own lock") > 0 {
				e.refs++
			}
			if e.refs == 0 {
				n.unlocked = true
			}
			n.addEdge(e)
		}
		if rapid.Bool().Draw(t, "indexed") {
			n.compatibleEdges(v, nil) // builds the index when there are enough edges
		}
		snapshot := func() string { return fmt.Sprint(n.refs, n.removed, n.edges) }
		before := snapshot()
		ks.lockNode(n, v.increase(rapid.IntRange(1, 3).Draw(t, "increase")))
		ks.releaseNode(n, v)
		after := snapshot()
		if bumpsInPlace(n, v) {
			if after != before {
				t.Fatalf("version %v: lock and release changed the node\n%s\n%s", v, before, after)
			}
		} else if after != before {
			changedWithout++
		}
	})
	if changedWithout == 0 {
		t.Fatal("where bumpsInPlace does not hold, lock and release never changed anything: its conditions check nothing")
	}
}
