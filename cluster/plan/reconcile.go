package plan

import (
	"maps"
	"slices"

	"github.com/cepcluster/cep/cluster/meta"
)

// Running is what a shard runs, as its state says: each pattern's
// version by name, and the patterns that read each source.
type Running struct {
	Versions map[string]uint64
	Readers  map[string][]string
}

// Skip is a source a deployment starts reading that no pattern staying
// reads: its reading last stopped somewhere (or never started), so the
// events published meanwhile are skipped to the stream's end (OpSkip), or
// with FromStart read from the start of the stream.
type Skip struct {
	Source    string
	FromStart bool
}

// Reconcile is what a shard's leader proposes so that the shard runs the
// versions the metadata holds, in one entry and in this order: the
// deletions, then the skips (applied once the deleted patterns no longer
// read their sources), then the deployments. Patterns are named in order.
type Reconcile struct {
	Delete []string
	Skip   []Skip
	Deploy []string
}

// Empty: the shard runs what the metadata holds; nothing is proposed.
func (r Reconcile) Empty() bool { return len(r.Delete)+len(r.Deploy) == 0 }

// ReconcileOf is the diff of what the shard runs against the metadata m:
//
//   - a pattern m deletes that the shard runs is deleted;
//   - a pattern m holds at another version than the shard's is deployed:
//     a new pattern starts at its deployment, so each source it reads that
//     no pattern staying reads is skipped first (from the start of its
//     stream, for a new pattern deployed FromStart);
//   - a pattern the shard runs that m no longer names at all, at or below
//     m.ForgottenOf its name, is deleted: its tombstone was forgotten
//     while this shard had not applied the deletion. Every version of the
//     name deployed later is above it, so a deployment this node's
//     metadata replica has not applied yet is not taken for one.
func ReconcileOf(m *meta.Meta, run Running) Reconcile {
	var rc Reconcile
	// sources read by none of the patterns that stay (those deleted here
	// do not count); a skip is made once per source
	unread := map[string]bool{}
	isUnread := func(src string) bool {
		u, ok := unread[src]
		if !ok {
			u = !slices.ContainsFunc(run.Readers[src], func(p string) bool { return m.Patterns[p] != nil && !m.Patterns[p].Deleted })
		}
		return u
	}
	for _, name := range slices.Sorted(maps.Keys(m.Patterns)) {
		p := m.Patterns[name]
		v, ok := run.Versions[name]
		switch {
		case p.Deleted && ok:
			rc.Delete = append(rc.Delete, name)
		case !p.Deleted && v != p.Version:
			rc.Deploy = append(rc.Deploy, name)
			for _, src := range p.ReadsOf() {
				if isUnread(src) {
					unread[src] = false
					rc.Skip = append(rc.Skip, Skip{Source: src, FromStart: p.FromStart && !ok})
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(run.Versions)) {
		if m.Patterns[name] == nil && run.Versions[name] <= m.ForgottenOf(name) {
			rc.Delete = append(rc.Delete, name)
		}
	}
	return rc
}
