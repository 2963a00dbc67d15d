package leader

import (
	"context"
	"maps"
	"slices"

	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/plan"
	"github.com/cepcluster/cep/shard"
)

// reconcile proposes the deployments and deletions that the shard has not
// applied yet, so every shard runs the versions the metadata holds.
//
// A new pattern starts at its deployment: it sees the events the shard
// logs after it. A source no deployed pattern reads is not being read, and
// its positions are where reading last stopped (or at the start of its
// stream), so a deployment (or an update) that starts reading it is
// preceded by OpSkip to the stream's end: the events published before it
// — the stream's history, or what came while nothing read it — are not
// read. For a derived source, the shard that forwards it skips the
// origin's history too.
func (r *leader) reconcile(ctx context.Context, m *meta.Meta) error {
	m, err := r.env.BeforeReconcile(ctx, m)
	if err != nil {
		return err
	}
	have := map[string]uint64{}
	unread := map[string]bool{}
	r.sh.FSM().View(func(s *shard.State, _ uint64) {
		for _, p := range s.Patterns() {
			have[p.Name] = p.Version
		}
		// read by none of the patterns that stay (those this batch deletes
		// do not count)
		for _, name := range SourcesOf(m) {
			unread[name] = !slices.ContainsFunc(s.Readers(name), func(p string) bool { return m.Patterns[p] != nil && !m.Patterns[p].Deleted })
		}
	})
	// on the clock or not as the clock loop decides it, so a deployment is
	// not switched on the next tick
	clock := plan.ClockOf(m.Shards, r.sh.ID(), r.env.Quarantine.StoppedHere).On
	// deletions, then the skips (applied once the deleted patterns no
	// longer read their sources), then deployments
	var dels, skips, deps []shard.Op
	for _, name := range slices.Sorted(maps.Keys(m.Patterns)) {
		p := m.Patterns[name]
		v, ok := have[name]
		switch {
		case p.Deleted && ok:
			dels = append(dels, shard.Op{Kind: shard.OpDelete, Pattern: name})
		case !p.Deleted && v != p.Version:
			maxKeys, maxStateBytes := r.env.PatternLimits(p.Spec, p.Format)
			deps = append(deps, shard.Op{Kind: shard.OpDeploy, Deploy: &shard.Deploy{
				Name: name, Version: p.Version, Spec: []byte(p.Spec), Sources: p.Sources, Reads: p.Reads,
				Subject: p.OutputSubject, Policy: shard.UpdatePolicy(p.Policy),
				MaxPartialMatches: p.MaxPartialMatches, Records: shard.RecordTypesOf(p.Records),
				MaxKeys:       int64(maxKeys),
				MaxStateBytes: maxStateBytes,
				// the sources' clocks across the shards (leader.clock); a shard
				// alone runs on its events, as `cepctl run`
				Clock: clock,
			}})
			for _, src := range p.ReadsOf() {
				if unread[src] {
					unread[src] = false
					skips = append(skips, r.skipHistory(ctx, m, src, p.FromStart && !ok)...)
				}
			}
		}
	}
	// a pattern the shard runs that the metadata no longer names at all:
	// its tombstone was forgotten while this shard had not applied the
	// deletion (a replica that reported no pattern while it caught up).
	// Only at or below ForgottenVersion: every version deployed later is
	// above it, so a deployment this node's metadata replica has not
	// applied yet is not taken for one
	for _, name := range slices.Sorted(maps.Keys(have)) {
		if m.Patterns[name] == nil && have[name] <= m.ForgottenVersion {
			dels = append(dels, shard.Op{Kind: shard.OpDelete, Pattern: name})
		}
	}
	if len(dels)+len(deps) == 0 {
		return nil
	}
	b := shard.Batch{Ops: slices.Concat(dels, skips, deps)}
	return r.sh.Propose(ctx, &b)
}

// skipHistory returns the OpSkip operations that make a pattern starting
// to read src (which no deployed pattern reads) skip the events published
// so far — or, fromStart, read them all from the start of the stream;
// none for a stream it cannot look up (the pattern then reads from where
// the source's reading last stopped, and a warning says so).
func (r *leader) skipHistory(ctx context.Context, m *meta.Meta, src string, fromStart bool) []shard.Op {
	sm := m.Sources[src]
	if sm == nil {
		return nil
	}
	end := func(stream, name string) (uint64, bool) {
		if fromStart {
			return 0, true
		}
		return r.streamEnd(ctx, stream, name)
	}
	var ops []shard.Op
	if seq, ok := end(sm.Stream, src); ok {
		ops = append(ops, shard.Op{Kind: shard.OpSkip, Source: src, Seq: seq})
	}
	if origin := m.Sources[sm.Origin]; origin != nil && ForwarderOf(m, src) == r.sh.ID() {
		if seq, ok := end(origin.Stream, origin.Name); ok {
			ops = append(ops, shard.Op{Kind: shard.OpSkip, Source: origin.Name, Target: src, Seq: seq})
		}
	}
	return ops
}

// streamEnd returns the last sequence number of a source's stream.
func (r *leader) streamEnd(ctx context.Context, stream, src string) (uint64, bool) {
	st, err := r.env.JetStream().Stream(ctx, stream)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("a new pattern reads the source from where its reading last stopped: its stream's end is unknown", "source", src, "stream", stream, "err", err)
		}
		return 0, false
	}
	return st.CachedInfo().State.LastSeq, true
}
