package plan

import (
	"testing"

	"github.com/cepcluster/cep/cluster/meta"
)

// A node takes itself for removed only when nothing is left for it: a
// member being removed that still holds a replica or a place in the
// metadata group is still leaving, and a fresh process under a removed
// id is joining again.
func TestRemovedSelf(t *testing.T) {
	member := meta.New()
	member.Nodes = []meta.Node{{ID: "n1"}, {ID: "n2"}}
	leaving := meta.New()
	leaving.Nodes = []meta.Node{{ID: "n1", Removing: true}, {ID: "n2"}}
	gone := meta.New()
	gone.Nodes = []meta.Node{{ID: "n2"}}
	gone.Removed = []meta.Removed{{ID: "n1", Time: 5}}
	never := meta.New()
	never.Nodes = []meta.Node{{ID: "n2"}}
	for _, tt := range []struct {
		name        string
		m           *meta.Meta
		fresh       bool
		started     int64
		replicas    int
		inMetaGroup bool
		want        bool
	}{
		{"a member", member, false, 1, 0, false, false},
		{"leaving, replicas still here", leaving, false, 1, 2, false, false},
		{"leaving, still in the metadata group", leaving, false, 1, 0, true, false},
		{"left: no replica, out of the group", leaving, false, 1, 0, false, true},
		{"recorded removed", gone, false, 1, 0, false, true},
		{"recorded removed, a fresh process started before the removal", gone, true, 4, 0, false, true},
		{"recorded removed, a fresh process started after it (joining again)", gone, true, 6, 0, false, false},
		{"not yet registered (joining)", never, false, 1, 0, false, false},
	} {
		if got := RemovedSelf(tt.m, "n1", tt.fresh, tt.started, tt.replicas, tt.inMetaGroup); got != tt.want {
			t.Errorf("%s: RemovedSelf = %v, want %v", tt.name, got, tt.want)
		}
	}
}
