package leader

import (
	"context"
	"slices"

	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/plan"
	"github.com/cepcluster/cep/internal/schema"
	"github.com/cepcluster/cep/shard"
)

// reconcile proposes the deployments and deletions that the shard has not
// applied yet (plan.ReconcileOf), so every shard runs the versions the
// metadata holds.
//
// A new pattern starts at its deployment: it sees the events the shard
// logs after it. A source no deployed pattern reads is not being read, and
// its positions are where reading last stopped (or at the start of its
// stream), so a deployment (or an update) that starts reading it is
// preceded by OpSkip to the stream's end: the events published before it
// — the stream's history, or what came while nothing read it — are not
// read. For a derived source, the shard that forwards it skips the
// origin's history too.
func (r *Leader) reconcile(ctx context.Context, m *meta.Meta) error {
	m, err := r.env.BeforeReconcile(ctx, m)
	if err != nil {
		return err
	}
	run := plan.Running{Versions: map[string]uint64{}, Readers: map[string][]string{}}
	r.sh.FSM().View(func(s *shard.State, _ uint64) {
		for _, p := range s.Patterns() {
			run.Versions[p.Name] = p.Version
		}
		for _, name := range SourcesOf(m) {
			run.Readers[name] = s.Readers(name)
		}
	})
	rc := plan.ReconcileOf(m, run)
	if rc.Empty() {
		return nil
	}
	// on the clock or not as the clock loop decides it, so a deployment is
	// not switched on the next tick
	clock := plan.ClockOf(m.Shards, r.sh.ID(), r.env.Quarantine.StoppedHere).On
	var ops []shard.Op
	for _, name := range rc.Delete {
		ops = append(ops, shard.DeleteOp{Pattern: name})
	}
	for _, sk := range rc.Skip {
		ops = append(ops, r.skipHistory(ctx, m, sk.Source, sk.FromStart)...)
	}
	for _, name := range rc.Deploy {
		p := m.Patterns[name]
		ops = append(ops, r.strictOps(m, p)...)
		maxKeys, maxStateBytes := r.env.PatternLimits(p.Spec, p.Format)
		ops = append(ops, &shard.Deploy{
			Name: name, Version: p.Version, Spec: []byte(p.Spec), Sources: p.Sources, Reads: p.Reads,
			Subject: p.OutputSubject, Policy: shard.UpdatePolicy(p.Policy),
			MaxPartialMatches: p.MaxPartialMatches, Records: shard.RecordTypesOf(p.Records),
			MaxKeys:       int64(maxKeys),
			MaxStateBytes: maxStateBytes,
			// the sources' clocks across the shards (Leader.clock); a shard
			// alone runs on its events, as `cepctl run`
			Clock: clock,
		})
	}
	return r.sh.Propose(ctx, &shard.Batch{Ops: ops})
}

// strictOps are the StrictOps that make the shard check the events of
// p's sources as the metadata declares them: with a strict source's
// fields, or none once it is not strict (created again without). Only
// where the shard's differ, so a shard without strict sources logs none.
func (r *Leader) strictOps(m *meta.Meta, p *meta.Pattern) []shard.Op {
	var ops []shard.Op
	r.sh.FSM().View(func(s *shard.State, _ uint64) {
		for _, name := range p.Sources {
			var want schema.Schema
			if src := m.Sources[name]; src != nil && src.Strict {
				want = src.Schema
			}
			if !slices.Equal(s.Strict(name), want) {
				ops = append(ops, shard.StrictOp{Source: name, Fields: want})
			}
		}
	})
	return ops
}

// skipHistory returns the OpSkip operations that make a pattern starting
// to read src (which no deployed pattern reads) skip the events published
// so far — or, fromStart, read them all from the start of the stream;
// none for a stream it cannot look up (the pattern then reads from where
// the source's reading last stopped, and a warning says so).
func (r *Leader) skipHistory(ctx context.Context, m *meta.Meta, src string, fromStart bool) []shard.Op {
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
		ops = append(ops, shard.SkipOp{Source: src, Seq: seq})
	}
	if origin := m.Sources[sm.Origin]; origin != nil && ForwarderOf(m, src) == r.sh.ID() {
		if seq, ok := end(origin.Stream, origin.Name); ok {
			ops = append(ops, shard.SkipOp{Source: origin.Name, Target: src, Seq: seq})
		}
	}
	return ops
}

// streamEnd returns the last sequence number of a source's stream.
func (r *Leader) streamEnd(ctx context.Context, stream, src string) (uint64, bool) {
	st, err := r.env.JetStream().Stream(ctx, stream)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("a new pattern reads the source from where its reading last stopped: its stream's end is unknown", "source", src, "stream", stream, "err", err)
		}
		return 0, false
	}
	return st.CachedInfo().State.LastSeq, true
}
