package leader

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/snapshot"
)

// warnIfRemoved warns when the stream no longer holds the events after
// pos that reading is about to resume at: its retention limits (or a
// purge) removed them before the shard read them — after a long outage, or
// when restoring an old savepoint — and reading goes on from the first
// event it still holds.
func (r *Leader) warnIfRemoved(ctx context.Context, stream string, pos uint64) {
	st, err := r.env.JetStream().Stream(ctx, stream)
	if err != nil {
		return // reading reports it
	}
	state := st.CachedInfo().State
	if state.FirstSeq > pos+1 && state.LastSeq >= state.FirstSeq {
		r.log.Warn("events were removed from the stream before this shard read them (retention limits or a purge); they are lost to its patterns",
			"stream", stream, "from", pos+1, "to", state.FirstSeq-1)
	}
}

// watchStreams checks, when the session starts and every StreamCheckEvery
// after, that the streams this leader reads exist. A stream deleted behind
// the cluster's back leaves its consumer waiting in silence (or sessions
// that end as they start), and publishers without a stream: this says so,
// once, in the log and in cep_source_stream_missing until it is back.
// A stream created anew (its identity is not the one the metadata holds)
// numbers its messages from 1 again, below positions already applied:
// reading it would skip them as re-reads, so the session ends (fail) and
// the next one does not read it (awaitOwnStream) until a restore says
// where to read it from; the log, cep_read_paused{reason="stream"} and
// the shard's status say so. What it found outlives the session
// (r.missing, r.replaced); run clears it when the leadership goes.
func (r *Leader) watchStreams(ctx context.Context, fail func(error)) {
	id := strconv.FormatUint(r.sh.ID(), 10)
	t := time.NewTicker(r.env.Config.StreamCheckEvery)
	defer t.Stop()
	for {
		m, _ := r.env.Meta.View()
		streams := map[string]string{} // stream -> a source read from it
		identity := map[string]int64{} // stream -> its creation as the metadata holds it
		for _, name := range SourcesOf(m) {
			if src := m.Sources[name]; src != nil {
				streams[src.Stream], identity[src.Stream] = name, src.StreamCreated
				if o := m.Sources[src.Origin]; src.Origin != "" && o != nil && ForwarderOf(m, name) == r.sh.ID() {
					streams[o.Stream], identity[o.Stream] = o.Name, o.StreamCreated
				}
			}
		}
		for stream, source := range streams {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			st, err := r.env.JetStream().Stream(cctx, stream)
			cancel()
			if err == nil {
				created, want := st.CachedInfo().Created.UnixNano(), identity[stream]
				switch {
				case want != 0 && created != want && !r.replaced[stream]:
					r.replaced[stream] = true
					reason := fmt.Sprintf("created anew (%s; the positions count in %s): not read until a savepoint is restored with --positions",
						snapshot.StreamIdentity(stream, created), snapshot.StreamIdentity(stream, want))
					r.env.Status.SetUnread(r.sh.ID(), stream, reason)
					r.log.Warn("a stream this shard reads was deleted and created again: it numbers its messages anew, below positions already applied, which would be skipped as re-reads; nothing of it is read until a savepoint is restored with --positions (from-start reads it whole)",
						"stream", stream, "source", source, "now", snapshot.StreamIdentity(stream, created), "positions_count_in", snapshot.StreamIdentity(stream, want))
					fail(fmt.Errorf("stream %s was created anew", stream)) // the next session does not read it
				case (want == 0 || created == want) && r.replaced[stream]:
					delete(r.replaced, stream)
					r.env.Status.ClearUnread(r.sh.ID(), stream)
					r.log.Info("the stream is the one the positions count in again", "stream", stream, "source", source)
				}
			}
			switch {
			case errors.Is(err, jetstream.ErrStreamNotFound) && !r.missing[stream]:
				r.missing[stream] = true
				r.env.Metrics.StreamMissing.WithLabelValues(id, stream).Set(1)
				r.log.Warn("a stream this shard reads is gone: nothing more of it is read until it is back; a stream created anew numbers its events from 1, below positions already applied, and is not read until a savepoint restore maps the positions onto it (--positions)",
					"stream", stream, "source", source)
			case err == nil && r.missing[stream]:
				delete(r.missing, stream)
				r.env.Metrics.StreamMissing.WithLabelValues(id, stream).Set(0)
				r.log.Info("the stream is back", "stream", stream, "source", source)
			}
		}
		for stream := range r.replaced {
			if _, read := streams[stream]; !read {
				// no longer read (its source deleted): nothing to say of it
				delete(r.replaced, stream)
				r.env.Status.ClearUnread(r.sh.ID(), stream)
			}
		}
		r.logPatternErrors()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// logPatternErrors logs, once per pattern and failure, the first condition
// that failed and the first emitted field that failed: the metrics count
// them (cep_condition_errors_total, cep_emit_errors_total), this says why.
// Called by the leader (watchStreams), so a shard logs it once.
func (r *Leader) logPatternErrors() {
	var patterns []shard.PatternInfo
	r.sh.FSM().View(func(s *shard.State, _ uint64) { patterns = s.PatternFailures() })
	for _, p := range patterns {
		seen := r.logged[p.Name]
		if p.FirstConditionError != "" && p.FirstConditionError != seen.condition {
			r.log.Warn("a condition of the pattern failed on an event and counted as false (a field the event lacks, say); cep_condition_errors_total counts such failures",
				"pattern", p.Name, "version", p.Version, "first", p.FirstConditionError, "failures", p.ConditionErrors)
			seen.condition = p.FirstConditionError
		}
		if p.FirstEmitError != "" && p.FirstEmitError != seen.emit {
			r.log.Warn("an emitted field of the pattern failed and is null in the match; cep_emit_errors_total counts such failures",
				"pattern", p.Name, "version", p.Version, "first", p.FirstEmitError, "failures", p.EmitErrors)
			seen.emit = p.FirstEmitError
		}
		for _, f := range p.AbsentFields {
			if seen.absent[f.Path] {
				continue
			}
			r.log.Warn("the pattern reads a field no event has had so far (misspelt?): a condition reading it is false, a query's column NULL; cep_pattern_absent_field_events_total counts the events without it",
				"pattern", p.Name, "version", p.Version, "field", f.Path, "events", f.Events)
			if seen.absent == nil {
				seen.absent = map[string]bool{}
			}
			seen.absent[f.Path] = true
		}
		if p.Dropped > 0 && !seen.dropped {
			r.log.Warn("a key of the pattern held more partial matches than the bound per key, and the latest-starting were dropped (its partial matches multiply with each event); cep_partial_matches_dropped_total counts them",
				"pattern", p.Name, "version", p.Version, "bound", p.MaxPartialMatches, "dropped", p.Dropped)
			seen.dropped = true
		}
		r.logged[p.Name] = seen
	}
}

// forgetMissingStreams clears what watchStreams found (the leadership has
// gone; the new leader checks for itself). No session runs.
func (r *Leader) forgetMissingStreams() {
	id := strconv.FormatUint(r.sh.ID(), 10)
	for stream := range r.missing {
		r.env.Metrics.StreamMissing.WithLabelValues(id, stream).Set(0)
	}
	clear(r.missing)
	for stream := range r.replaced {
		r.env.Status.ClearUnread(r.sh.ID(), stream)
	}
	clear(r.replaced)
}

// awaitOwnStream returns once the stream rs reads is the one the
// metadata says its source's positions count in (or either is not known:
// reading then reports a stream it cannot find), and while it is not,
// reads nothing (cep_read_paused{reason="stream"}; watchStreams logs it):
// the sequences of a stream created anew start below positions already
// applied. It checks again when the metadata changes and every
// StreamCheckEvery, until ctx ends.
func (r *Leader) awaitOwnStream(ctx context.Context, rs readSpec) error {
	id := strconv.FormatUint(r.sh.ID(), 10)
	paused := false
	defer func() {
		if paused {
			r.env.Metrics.ReadPaused.WithLabelValues(id, rs.stream, "stream").Set(0)
		}
	}()
	for {
		_, changed := r.env.Meta.View()
		want, created, replaced := r.streamReplaced(ctx, rs)
		if !replaced {
			return nil
		}
		if !paused {
			paused = true
			r.env.Metrics.ReadPaused.WithLabelValues(id, rs.stream, "stream").Set(1)
			r.log.Warn("not reading a stream created anew since the shard's positions of it were applied",
				"stream", rs.stream, "source", rs.source, "now", snapshot.StreamIdentity(rs.stream, created), "positions_count_in", snapshot.StreamIdentity(rs.stream, want))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-time.After(r.env.Config.StreamCheckEvery):
		}
	}
}

// streamReplaced reports whether the stream rs reads is known not to be
// the one the metadata says its source's positions count in, with both
// identities.
func (r *Leader) streamReplaced(ctx context.Context, rs readSpec) (want, created int64, replaced bool) {
	m, _ := r.env.Meta.View()
	if s := m.Sources[rs.source]; s != nil && s.Stream == rs.stream {
		want = s.StreamCreated
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	created, err := StreamCreated(cctx, r.env.JetStream(), rs.stream)
	cancel()
	return want, created, err == nil && want != 0 && created != want
}

// StreamCreated returns when JetStream created the stream, in Unix ns: the
// stream's identity (a stream created anew has another).
func StreamCreated(ctx context.Context, js jetstream.JetStream, stream string) (int64, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	return st.CachedInfo().Created.UnixNano(), nil
}
