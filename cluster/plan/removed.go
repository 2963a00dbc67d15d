package plan

import "github.com/cepcluster/cep/cluster/meta"

// RemovedSelf reports whether node self has left the cluster, from its
// own copy of the metadata (m), whether this process started without
// state (fresh) and when (started, Unix ms, as it gossips it), how many
// shard replicas it holds and whether it is in the metadata group's Raft
// configuration. The metadata may name it removed;
// but the group drops a node before the removal is logged, so its copy
// usually stops at "being removed": then, holding no replica and out of
// the group, nothing is left for it to do. A process started afresh
// after the removal may take the id back (meta.MayRejoin).
func RemovedSelf(m *meta.Meta, self string, fresh bool, started int64, replicas int, inMetaGroup bool) bool {
	nd := m.Node(self)
	if nd == nil {
		return !m.MayRejoin(self, fresh, started)
	}
	return nd.Removing && replicas == 0 && !inMetaGroup
}
