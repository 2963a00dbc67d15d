package cluster

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/shard"
)

// warnIfRemoved warns when the stream no longer holds the events after
// pos that reading is about to resume at: its retention limits (or a
// purge) removed them before the shard read them — after a long outage, or
// when restoring an old savepoint — and reading goes on from the first
// event it still holds.
func (r *leader) warnIfRemoved(ctx context.Context, stream string, pos uint64) {
	st, err := r.n.js.Stream(ctx, stream)
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
// What it found outlives the session (r.missing); run clears it when the
// leadership goes.
func (r *leader) watchStreams(ctx context.Context) {
	id := strconv.FormatUint(r.sh.ID(), 10)
	t := time.NewTicker(r.n.cfg.StreamCheckEvery)
	defer t.Stop()
	for {
		m, _ := r.n.meta.fsm.View()
		streams := map[string]string{} // stream -> a source read from it
		for _, name := range sourcesOf(m) {
			if src := m.Sources[name]; src != nil {
				streams[src.Stream] = name
				if o := m.Sources[src.Origin]; src.Origin != "" && o != nil && forwarderOf(m, name) == r.sh.ID() {
					streams[o.Stream] = o.Name
				}
			}
		}
		for stream, source := range streams {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := r.n.js.Stream(cctx, stream)
			cancel()
			switch {
			case errors.Is(err, jetstream.ErrStreamNotFound) && !r.missing[stream]:
				r.missing[stream] = true
				r.n.streamMissing.WithLabelValues(id, stream).Set(1)
				r.log.Warn("a stream this shard reads is gone: nothing more of it is read until it is back, and a stream created anew numbers its events from 1, at or below positions already applied, which are skipped as re-reads",
					"stream", stream, "source", source)
			case err == nil && r.missing[stream]:
				delete(r.missing, stream)
				r.n.streamMissing.WithLabelValues(id, stream).Set(0)
				r.log.Info("the stream is back", "stream", stream, "source", source)
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
func (r *leader) logPatternErrors() {
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
func (r *leader) forgetMissingStreams() {
	id := strconv.FormatUint(r.sh.ID(), 10)
	for stream := range r.missing {
		r.n.streamMissing.WithLabelValues(id, stream).Set(0)
	}
	clear(r.missing)
}
