package nfa

import (
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
