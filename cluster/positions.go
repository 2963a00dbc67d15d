package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster/leader"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/snapshot"
)

// A position is a JetStream stream sequence, which means something only
// in the stream it was read from: a stream deleted and created again, or
// another cluster's stream of the same name, numbers its messages from 1
// again. The identity of a stream is its name and the time JetStream
// created it (StreamInfo.Created): JetStream sets it, for streams the
// cluster created and for existing ones alike, and it differs for every
// stream created anew, also behind the cluster's back. The metadata holds
// the identity of each source's stream (meta.Source.StreamCreated), a
// savepoint the identity its positions count in (snapshot.Source), and a
// restore onto another stream maps its positions as asked (restorePlan).

// streamCreated returns when JetStream created the stream, in Unix ns.
var streamCreated = leader.StreamCreated

// savepointStreams is what a savepoint records of the sources' streams:
// each source's identity as the metadata holds it, or for a source
// recorded before identities were, the stream's as it is now.
func savepointStreams(ctx context.Context, js jetstream.JetStream, m *meta.Meta) []snapshot.Source {
	var out []snapshot.Source
	for _, name := range m.SourceNames() {
		s := m.Sources[name]
		created := s.StreamCreated
		if created == 0 {
			created, _ = streamCreated(ctx, js, s.Stream) // not known either way when it fails
		}
		out = append(out, snapshot.Source{Name: s.Name, Stream: s.Stream, Subjects: s.Subjects, StreamCreated: created})
	}
	return out
}

// positionMode is what a restore makes of positions in another stream.
type positionMode struct {
	kind cepv1.PositionMapping
	from time.Time // FROM_TIME
}

func (p positionMode) String() string {
	switch p.kind {
	case cepv1.PositionMapping_POSITION_MAPPING_KEEP:
		return "keep"
	case cepv1.PositionMapping_POSITION_MAPPING_FROM_START:
		return "from-start"
	case cepv1.PositionMapping_POSITION_MAPPING_FROM_END:
		return "from-end"
	case cepv1.PositionMapping_POSITION_MAPPING_FROM_TIME:
		return "from-time=" + p.from.UTC().Format(time.RFC3339Nano)
	}
	return "unspecified"
}

func positionModeOf(r *cepv1.RestoreSavepointRequest) (positionMode, error) {
	p := positionMode{kind: r.GetPositions()}
	switch p.kind {
	case cepv1.PositionMapping_POSITION_MAPPING_UNSPECIFIED, cepv1.PositionMapping_POSITION_MAPPING_KEEP,
		cepv1.PositionMapping_POSITION_MAPPING_FROM_START, cepv1.PositionMapping_POSITION_MAPPING_FROM_END:
		if r.PositionsFrom != nil {
			return p, fmt.Errorf("%w: positions_from is for POSITION_MAPPING_FROM_TIME only", api.ErrInvalidArgument)
		}
	case cepv1.PositionMapping_POSITION_MAPPING_FROM_TIME:
		if r.PositionsFrom == nil || r.PositionsFrom.CheckValid() != nil {
			return p, fmt.Errorf("%w: POSITION_MAPPING_FROM_TIME needs a valid positions_from", api.ErrInvalidArgument)
		}
		p.from = r.PositionsFrom.AsTime()
	default:
		return p, fmt.Errorf("%w: positions mapping %d is not known", api.ErrInvalidArgument, p.kind)
	}
	return p, nil
}

// restorePlan is how a restore maps the savepoint's positions.
type restorePlan struct {
	positions map[string]uint64 // source -> position its key groups resume after
	forwarded map[string]uint64 // derived source -> origin position its re-keying resumes after
	streams   map[string]int64  // source -> identity of its stream now (creation, Unix ns)
	current   map[string]string // source -> its stream now
	notes     []string          // what was mapped, for the log
}

// planPositions compares each savepoint source's saved stream identity
// (saved, from the savepoint's header; the source list's own for a
// savepoint that has none) with the stream the source is read from in
// this cluster, and maps the positions of those that differ as mode says.
// Without a mode, a source known to differ fails the restore; one whose
// identity the savepoint does not record (written before it was) keeps
// its positions, as restores always did, unless a mode is given.
func planPositions(ctx context.Context, js jetstream.JetStream, m *meta.Meta, srcs []meta.Source, saved []snapshot.Source, mode positionMode) (*restorePlan, error) {
	plan := &restorePlan{positions: map[string]uint64{}, forwarded: map[string]uint64{}, streams: map[string]int64{}, current: map[string]string{}}
	var mismatches []string
	for _, s := range srcs {
		savedStream, savedCreated := s.Stream, s.StreamCreated
		if i := slices.IndexFunc(saved, func(x snapshot.Source) bool { return x.Name == s.Name }); i >= 0 {
			savedStream, savedCreated = saved[i].Stream, saved[i].StreamCreated
		}
		cur := s.Stream
		if c := m.Sources[s.Name]; c != nil {
			cur = c.Stream // the cluster's source is kept
		}
		created, err := streamCreated(ctx, js, cur)
		if err != nil {
			return nil, fmt.Errorf("%w: source %s (stream %s): %v", api.ErrUnavailable, s.Name, cur, err)
		}
		plan.streams[s.Name], plan.current[s.Name] = created, cur
		same, known := snapshot.SameStream(savedStream, savedCreated, cur, created)
		if same && known || same && mode.kind == cepv1.PositionMapping_POSITION_MAPPING_UNSPECIFIED {
			continue
		}
		if mode.kind == cepv1.PositionMapping_POSITION_MAPPING_UNSPECIFIED {
			mismatches = append(mismatches, fmt.Sprintf("source %q: the savepoint's positions count in stream %s, this cluster reads %s",
				s.Name, snapshot.StreamIdentity(savedStream, savedCreated), snapshot.StreamIdentity(cur, created)))
			continue
		}
		if mode.kind == cepv1.PositionMapping_POSITION_MAPPING_KEEP {
			plan.notes = append(plan.notes, fmt.Sprintf("%s: saved positions kept in %s", s.Name, snapshot.StreamIdentity(cur, created)))
			continue
		}
		var pos uint64
		switch {
		case s.Origin != "":
			// a derived stream holds what its re-keying forwards: what it
			// forwards after the restore (from the origin's mapped position)
			pos, err = lastSeq(ctx, js, cur)
		case mode.kind == cepv1.PositionMapping_POSITION_MAPPING_FROM_START:
			pos = 0
		case mode.kind == cepv1.PositionMapping_POSITION_MAPPING_FROM_END:
			pos, err = lastSeq(ctx, js, cur)
		case mode.kind == cepv1.PositionMapping_POSITION_MAPPING_FROM_TIME:
			pos, err = positionBefore(ctx, js, cur, mode.from)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: source %s (stream %s): %v", api.ErrUnavailable, s.Name, cur, err)
		}
		plan.positions[s.Name] = pos
		plan.notes = append(plan.notes, fmt.Sprintf("%s: read %s after %d (%s)", s.Name, snapshot.StreamIdentity(cur, created), pos, mode))
	}
	if len(mismatches) > 0 {
		return nil, fmt.Errorf("%w: %s; restore with positions keep, from-start, from-end or from-time (cepctl savepoint restore --positions)",
			api.ErrFailedPrecondition, strings.Join(mismatches, "; "))
	}
	for _, s := range srcs {
		if p, ok := plan.positions[s.Origin]; s.Origin != "" && ok {
			plan.forwarded[s.Name] = p
		}
	}
	return plan, nil
}

// apply gives the mapping and the streams' identities to the restore
// command.
func (p *restorePlan) apply(c *meta.RestoreSavepoint) {
	for i := range c.Sources {
		c.Sources[i].StreamCreated = p.streams[c.Sources[i].Name]
	}
	if len(p.positions) > 0 {
		c.Positions = p.positions
	}
	if len(p.forwarded) > 0 {
		c.Forwarded = p.forwarded
	}
}

// sourcePositions lists where each source is read from after the restore:
// the mapped position, or the savepoint's own (saved, the lowest over its
// parts).
func (p *restorePlan) sourcePositions(saved map[string]uint64) []*cepv1.SourcePosition {
	var out []*cepv1.SourcePosition
	for _, name := range slices.Sorted(maps.Keys(p.streams)) {
		seq, ok := p.positions[name]
		if !ok {
			seq = saved[name]
		}
		out = append(out, &cepv1.SourcePosition{Source: name, Stream: p.current[name], Sequence: seq,
			StreamCreated: timestamp(p.streams[name])})
	}
	return out
}

// lastSeq is the stream's last sequence: reading after it reads only
// what is published from now on.
func lastSeq(ctx context.Context, js jetstream.JetStream, stream string) (uint64, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	return st.CachedInfo().State.LastSeq, nil
}

// positionBefore is the position to resume after so that the first
// message read is the first stored at or after t (or, with none yet, the
// next one published).
func positionBefore(ctx context.Context, js jetstream.JetStream, stream string, t time.Time) (uint64, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	last := st.CachedInfo().State.LastSeq
	if last == 0 {
		return 0, nil
	}
	lm, err := st.GetMsg(ctx, last)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		// removed since: the consumer below finds what is there
	case err != nil:
		return 0, err
	case lm.Time.Before(t):
		return last, nil
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &t,
		InactiveThreshold: 10 * time.Second}) // one fetch: gone soon after
	if err != nil {
		return 0, err
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		return 0, err
	}
	if msg, ok := <-batch.Messages(); ok {
		md, err := msg.Metadata()
		if err != nil {
			return 0, err
		}
		return md.Sequence.Stream - 1, nil
	}
	if err := batch.Error(); err != nil {
		return 0, err
	}
	return last, nil
}

// timestamp is a creation time in Unix ns as a Timestamp (nil: not known).
func timestamp(ns int64) *timestamppb.Timestamp {
	if ns == 0 {
		return nil
	}
	return timestamppb.New(time.Unix(0, ns))
}
