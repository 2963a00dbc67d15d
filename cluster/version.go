package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/cluster/gossip"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/internal/clusterversion"
	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/snapshot"
)

// The cluster version (internal/clusterversion) moves up by itself: the
// metadata leader proposes meta.SetClusterVersion as soon as every member
// reports a release that writes a higher version. Automatically rather
// than by an operator's command, because a rolling update (a
// StatefulSet's, say) has no step at which to run one; a rollback stays
// possible for as long as one member runs the older release, which is the
// whole of a rolling update, and the README says to finish one before
// starting the next.

// versionRetry is how often the metadata leader looks again at the
// members' versions while one of them holds the cluster version back (a
// member's gossip changes without a metadata change).
const versionRetry = 2 * time.Second

// memberVersion is the highest cluster version member id's release
// writes, as its gossip says (a release before cluster versions says
// none: Base); ok is false when the gossip does not see it alive.
func (n *Node) memberVersion(id string) (v clusterversion.Version, ok bool) {
	if id == n.cfg.NodeID {
		return clusterversion.Highest, true
	}
	if n.gossip == nil {
		return 0, false
	}
	mb, seen := n.gossip.Member(id)
	if !seen || mb.State != gossip.Alive {
		return 0, false
	}
	return clusterversion.Reported(mb.Version), true
}

// versionToMoveTo is the version every member of m writes, if it is above
// the active one; "" held names a member that holds it back (not seen
// alive, or at the active version).
func (n *Node) versionToMoveTo(m *meta.Meta) (to clusterversion.Version, held string) {
	to = clusterversion.Highest
	for _, nd := range m.Nodes { // those being removed still hold replicas
		v, ok := n.memberVersion(nd.ID)
		if !ok {
			return 0, nd.ID
		}
		if v < to {
			to, held = v, nd.ID
		}
	}
	if to <= m.ActiveVersion() {
		return 0, held
	}
	return to, ""
}

// moveVersion runs on every node: it writes the active version's formats
// and stops the node if its release cannot read the active version; while
// the node leads the metadata group it moves the version up once every
// member can read a higher one.
func (n *Node) moveVersion() {
	for {
		m, changed := n.meta.fsm.View()
		active := m.ActiveVersion()
		if err := clusterversion.Unreadable(active); err != nil {
			n.fail(err)
			return
		}
		n.writeFormats(active)
		var retry <-chan time.Time
		if n.IsMetaLeader() || active < clusterversion.Highest {
			retry = time.After(versionRetry) // leadership or a member's release may change
		}
		if n.IsMetaLeader() {
			if to, _ := n.versionToMoveTo(m); to != 0 {
				ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
				_, err := n.Propose(ctx, meta.SetClusterVersion{Version: uint32(to), Expect: m.ClusterVersion})
				cancel()
				if err == nil {
					n.log.Info("cluster version moved: every member's release writes it", "from", active, "to", to)
				} else if n.ctx.Err() == nil {
					n.log.Debug("the cluster version stays for now", "to", to, "err", err)
				}
			}
		}
		select {
		case <-n.ctx.Done():
			return
		case <-changed:
		case <-retry:
		}
	}
}

// writeFormats makes this node's shard replicas write the entries of
// version v (every replica of a shard writes what its leader proposes).
func (n *Node) writeFormats(v clusterversion.Version) {
	f, ok := v.Formats()
	if !ok {
		return // Unreadable has stopped the node
	}
	for _, sh := range n.replicas.list() {
		if err := sh.SetBatchVersion(f.Batch); err != nil {
			n.log.Error("a shard cannot write the cluster version's entries", "version", v, "err", err)
		}
	}
}

// writeShardFormats sets a newly opened replica's batch version.
func (n *Node) writeShardFormats(sh *shard.Shard) {
	var v clusterversion.Version
	n.meta.fsm.Read(func(m *meta.Meta) { v = m.ActiveVersion() })
	if f, ok := v.Formats(); ok {
		if err := sh.SetBatchVersion(f.Batch); err != nil {
			n.log.Error("a shard cannot write the cluster version's entries", "version", v, "err", err)
		}
	}
}

// savepointFormats says why this node cannot write a savepoint in the
// active version's formats, nil when it can.
func (n *Node) savepointFormats() error {
	var v clusterversion.Version
	n.meta.fsm.Read(func(m *meta.Meta) { v = m.ActiveVersion() })
	f, ok := v.Formats()
	switch {
	case !ok:
		return fmt.Errorf("%w: %v", api.ErrFailedPrecondition, clusterversion.Unreadable(v))
	case f.Savepoint != snapshot.Version || f.Section != shard.SectionVersion:
		return fmt.Errorf("%w: the cluster version %v writes savepoints of format %d, sections %d; this release writes %d, %d", api.ErrFailedPrecondition, v, f.Savepoint, f.Section, snapshot.Version, shard.SectionVersion)
	}
	return nil
}

// fail reports that the node cannot go on (Failed), with its reason
// logged once.
func (n *Node) fail(err error) {
	select {
	case n.failed <- err:
		n.log.Error("this node stops", "err", err)
	default:
	}
}

// Failed carries why the node cannot go on (its release does
// not read the cluster's version, say): its owner stops it.
func (n *Node) Failed() <-chan error { return n.failed }

// highestVersionOf is the highest cluster version node id's release
// writes as far as this node knows: its own, another's as its gossip says
// (0: not known, or a release before cluster versions).
func (n *Node) highestVersionOf(id string) uint32 {
	if id == n.cfg.NodeID {
		return uint32(clusterversion.Highest)
	}
	if n.gossip == nil {
		return 0
	}
	mb, _ := n.gossip.Member(id)
	return uint32(mb.Version)
}

// readsVersion reports whether gossip member mb's release reads the
// cluster version v; a node that does not is not taken in (warned of once):
// it could not read what the members write.
func (ms *membership) readsVersion(mb gossip.Member, v clusterversion.Version) bool {
	if clusterversion.Reported(mb.Version) >= v {
		return true
	}
	key := fmt.Sprintf("%s\x00%d", mb.ID, mb.Version)
	if ms.behindWarned == nil || len(ms.behindWarned) > 1000 {
		ms.behindWarned = map[string]bool{} // bounded: warned of again
	}
	if !ms.behindWarned[key] {
		ms.behindWarned[key] = true
		ms.n.log.Warn("a node whose release cannot read the cluster version is not taken in: run a release that reads it",
			"member", mb.ID, "release", mb.Release, "writes", clusterversion.Reported(mb.Version), "version", v)
	}
	return false
}

// awaitVersion waits up to d for the cluster's active version to reach v
// (a cluster just started moves it within a few seconds, once every
// member is seen), else says what holds it back.
func (n *Node) awaitVersion(ctx context.Context, v clusterversion.Version, d time.Duration) error {
	timeout := time.After(d)
	for {
		m, changed := n.meta.fsm.View()
		if m.ActiveVersion() >= v {
			return nil
		}
		select {
		case <-changed:
			continue
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout:
		}
		why := "not every node runs a release that writes it"
		if _, held := n.versionToMoveTo(m); held != "" {
			why = fmt.Sprintf("node %s does not run a release that writes it (or is not seen alive)", held)
		}
		return fmt.Errorf("it needs cluster version %v and the cluster is at %v: %s; finish the upgrade first", v, m.ActiveVersion(), why)
	}
}
