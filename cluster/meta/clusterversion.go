package meta

import "github.com/cepcluster/cep/internal/clusterversion"

// SnapshotVersion is the version of the metadata snapshot this release
// writes (clusterversion.Formats.MetaSnapshot): the JSON of Meta.
const SnapshotVersion = 1

// SetClusterVersion moves the cluster's active version (Meta.ClusterVersion)
// from Expect, the one the proposer saw, up to Version. The metadata
// leader proposes it once every member reports a release that reads
// Version (cluster/version.go); a release before cluster versions rejects
// the kind as unknown, which is why it is never proposed while one is a
// member (clusterversion.Logged).
type SetClusterVersion struct {
	Version uint32 `json:"version,omitempty"`
	Expect  uint32 `json:"expect,omitempty"`
}

func (SetClusterVersion) Kind() string { return "setClusterVersion" }

// In its own init, not apply.go's table, so that commands added elsewhere
// do not meet it in one list.
func init() { register((*Meta).applySetClusterVersion) }

// applySetClusterVersion records any version above the active one, known to
// this release or not: applying depends on the log alone, and a node whose
// release cannot read what it records stops (cluster/version.go).
func (m *Meta) applySetClusterVersion(_ uint64, c SetClusterVersion) (any, error) {
	active := m.ActiveVersion()
	switch {
	case c.Expect != m.ClusterVersion:
		return nil, refused(ErrConflict, "the cluster version is %v, not %v", active, clusterversion.Active(c.Expect))
	case clusterversion.Version(c.Version) <= active:
		return nil, refused(ErrPrecondition, "cluster version %v is not above the active %v: the version never goes back", clusterversion.Version(c.Version), active)
	}
	m.ClusterVersion = c.Version
	return clusterversion.Version(c.Version), nil
}

// ActiveVersion is the cluster's active format version: what every node
// writes.
func (m *Meta) ActiveVersion() clusterversion.Version {
	return clusterversion.Active(m.ClusterVersion)
}
