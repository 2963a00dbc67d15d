package cluster

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/cepcluster/cep/cluster/meta"
)

// A deleted pattern leaves a tombstone in the metadata (its name, version
// and the deletion), which every shard leader's reconcile needs to delete
// it from its shard. Once every shard has applied the deletion, the
// metadata leader proposes ForgetPattern, which removes it; a re-deploy
// before then replaces it. Whether a shard applied it is read from the
// shards' states here, but the removal is a logged command: every replica
// of the metadata applies it at the same point.

// tombstoneRetry is how often the metadata leader looks again at the
// tombstones whose deletion some shard has not applied.
const tombstoneRetry = 2 * time.Second

// forgetDeleted runs on every node and acts while it leads the metadata
// group.
func (n *Node) forgetDeleted() {
	for {
		var dead []meta.Pattern
		changed := n.meta.fsm.Watch(func(m *meta.Meta) {
			for _, p := range m.Patterns {
				if p.Deleted {
					dead = append(dead, meta.Pattern{Name: p.Name, Version: p.Version})
				}
			}
		})
		wait := time.Duration(0)
		if len(dead) > 0 && n.IsMetaLeader() {
			slices.SortFunc(dead, func(a, b meta.Pattern) int { return strings.Compare(a.Name, b.Name) })
			for _, p := range dead {
				if !n.forgetIfApplied(n.ctx, p.Name, p.Version) {
					wait = tombstoneRetry
				}
			}
		} else if len(dead) > 0 {
			wait = tombstoneRetry // leadership may come here
		}
		var retry <-chan time.Time
		if wait > 0 {
			retry = time.After(wait)
		}
		select {
		case <-n.ctx.Done():
			return
		case <-changed:
		case <-retry:
		}
	}
}

// forgetIfApplied proposes ForgetPattern for the tombstone of name at
// version once every shard has applied the deletion; it reports whether
// there is nothing left to do.
func (n *Node) forgetIfApplied(ctx context.Context, name string, version uint64) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if len(n.notApplied(ctx, deletionApplied(name, version))) > 0 {
		return false
	}
	// per name once every member applies it so; else, as before, every
	// name's versions go on above this one (a cosmetic difference only)
	id, _ := n.behindProto(n.Meta(), protoForgetPerName)
	_, err := n.Propose(ctx, meta.ForgetPattern{Name: name, Expect: version, PerName: id == ""})
	if err != nil && ctx.Err() == nil {
		n.log.Debug("a deleted pattern's tombstone stays for now", "pattern", name, "version", version, "err", err)
	}
	return err == nil
}

// deletionApplied is patternApplied's check for a deletion known to be
// one (without a copy of the metadata): no replica runs the pattern at
// that version or before.
func deletionApplied(name string, version uint64) shardCheck {
	return versionCheck(name, func(v uint64, ok bool) bool { return !ok || v > version })
}
