package leader

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/plan"
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/shard"
)

// ingest reads a source's key groups of this shard from JetStream and
// proposes them as batches, several in flight. It resumes after the lowest
// position the shard's key groups applied; anything re-read is skipped by
// the state machine.
func (r *Leader) ingest(ctx context.Context, src *meta.Source) error {
	return r.readFromApplied(ctx, func() readSpec {
		var pos uint64
		r.sh.FSM().View(func(s *shard.State, _ uint64) { pos = s.Positions()[src.Name] })
		first, last := r.sh.Range()
		derived := ""
		if src.Origin != "" {
			derived = src.Name
		}
		return readSpec{
			source: src.Name, stream: src.Stream, filters: keygroup.BlockFilters(src.Name, first, last, r.env.KeyGroups()), from: pos, derived: derived,
			op: func(events []shard.Event, after uint64, ingest int64) shard.Op {
				return shard.EventsOp{Source: src.Name, Events: events, After: after, Ingest: ingest}
			},
			paused: func(s *shard.State) bool { return s.Paused(src.Name) },
		}
	})
}

// forward re-keys a source into a derived source: this shard reads the
// whole origin stream in order (it alone, so the derived stream receives the
// events in the origin's order and its readers' watermarks follow it as a
// direct read's would) and forwards each event through its outbox.
func (r *Leader) forward(ctx context.Context, origin *meta.Source, derived string) error {
	return r.readFromApplied(ctx, func() readSpec {
		var pos uint64
		r.sh.FSM().View(func(s *shard.State, _ uint64) { pos = s.Forwarded()[derived] })
		return readSpec{
			source: origin.Name, stream: origin.Stream, filters: origin.Filter, from: pos,
			op: func(events []shard.Event, after uint64, ingest int64) shard.Op {
				return shard.ForwardOp{Source: origin.Name, Target: derived, Events: events, After: after, Ingest: ingest}
			},
			paused: func(*shard.State) bool { return false },
		}
	})
}

// readFromApplied runs read from where the state is (spec reads it) and,
// after an entry refused while this replica still leads, again from
// there: Raft refuses entries during a leadership transfer and takes the
// next ones once it has failed, and the state refuses those that follow
// an entry it never applied (shard.Op.After).
func (r *Leader) readFromApplied(ctx context.Context, spec func() readSpec) error {
	// (a transfer refuses entries until it ends: the reads again wait for
	// it rather than make a consumer each time)
	retry := newRetryDelay()
	for {
		rs := spec()
		retry.started()
		err := r.read(ctx, rs)
		var gap *shard.GapError
		if ctx.Err() != nil || !(errors.As(err, &gap) || errors.Is(err, raft.ErrLeadershipTransferInProgress)) {
			return err
		}
		r.log.Info("an entry was refused: reading again from the applied position", "stream", rs.stream, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry.next()):
		}
		if !r.sh.IsLeader() {
			return shard.ErrNotLeader
		}
	}
}

// consumerInactive is how long the server keeps a reader's consumer that
// nobody pulls from: the backstop for a reader whose consumer could not be
// deleted (NATS unreachable, the node killed). nats.go's default, five
// minutes, kept a consumer for each read a leader change or a refused
// entry ended (the soak counted over a hundred after three minutes of
// faults). A live reader pulls far more often than this.
const consumerInactive = 30 * time.Second

// dropConsumer deletes the server's side of a reader's ordered consumer
// once the read is over (stopping the iterator does not): bounded, and
// left to consumerInactive when the server cannot be reached.
func (r *Leader) dropConsumer(stream string, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := r.env.JetStream().DeleteConsumer(ctx, stream, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		r.log.Debug("reader's consumer not deleted: the server drops it when inactive", "stream", stream, "consumer", info.Name, "err", err)
	}
}

// readSpec is what read reads and how it logs it.
type readSpec struct {
	source  string // whose stream it is (its identity is the source's)
	stream  string
	filters []string
	from    uint64 // the last position applied
	derived string // the source's name when it is derived: events carry their origin position
	op      func(events []shard.Event, after uint64, ingest int64) shard.Op
	paused  func(s *shard.State) bool
}

// read consumes a stream from JetStream and proposes it as batches, several
// in flight.
func (r *Leader) read(ctx context.Context, rs readSpec) error {
	pos := rs.from
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects:    rs.filters,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: consumerInactive,
	}
	if pos > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = pos + 1
	}
	if err := r.awaitOwnStream(ctx, rs); err != nil || ctx.Err() != nil {
		return err
	}
	began := time.Now()
	r.warnIfRemoved(ctx, rs.stream, pos)
	cons, err := r.env.JetStream().OrderedConsumer(ctx, rs.stream, cfg)
	if err != nil {
		return err
	}
	// runs after the reader stops (deferred before it)
	defer r.dropConsumer(rs.stream, cons)
	it, err := cons.Messages(jetstream.PullMaxMessages(r.env.Config.IngestBatch))
	if err != nil {
		return err
	}
	r.log.Info("reading", "stream", rs.stream, "after", pos, "filters", len(rs.filters), "consumer_in", time.Since(began).Round(time.Millisecond))
	// the reader stops as read returns, after the proposals in flight are
	// checked (deferred before that check, it runs after it)
	msgs, stopReading := readMessages(ctx, it, r.env.Config.IngestBatch)
	defer stopReading()

	// proposals are pipelined: up to 4 batches in flight, checked in order.
	// The first that fails ends the read (refused stops it): the ones
	// after it would leave a gap, and the state refuses them.
	type proposal struct {
		f     raft.ApplyFuture
		start time.Time
	}
	refusedCtx, refused := context.WithCancelCause(ctx)
	defer refused(nil)
	pending := make(chan proposal, 4)
	checkDone := make(chan struct{})
	go func() {
		defer close(checkDone)
		for p := range pending {
			// (waited for whatever the read does: once read returns, what
			// it proposed is applied or refused)
			err := shard.Result(ctx, p.f)
			r.env.Metrics.ApplyLatency.Observe(time.Since(p.start).Seconds())
			if err != nil {
				refused(err)
			}
		}
	}()
	defer func() {
		close(pending)
		<-checkDone
	}()
	// after is where the next entry's events follow on (shard.Op.After)
	after := pos

	linger := r.env.Config.IngestLinger
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var events []shard.Event
	var consumerSeq uint64 // of the last message: it starts again when the consumer is created anew
	flush := func() error {
		if len(events) == 0 {
			return nil
		}
		if refusedCtx.Err() != nil {
			return context.Cause(refusedCtx) // nothing after an entry that failed
		}
		// no entry while the outbox is over its limit (each new session
		// would otherwise add one before its first check)
		if err := r.waitToRead(ctx, rs, false); err != nil {
			return err
		}
		// the wall time the events are read at: the bound on how far
		// ahead they may be, which no event can move (nfa.CheckTimeAt)
		op := rs.op(events, after, r.env.Config.Now().UnixMilli())
		b := &shard.Batch{Ops: []shard.Op{op}}
		first, last := events[0].Pos, events[len(events)-1].Pos
		after = plan.NextAfter(after, op.Kind() == shard.OpForward, events, eventAt)
		events = nil
		if !r.sh.IsLeader() {
			return shard.ErrNotLeader
		}
		f := r.env.ProposeRead(r.sh, rs.stream, b, first, last)
		select {
		case pending <- proposal{f, time.Now()}:
		case <-refusedCtx.Done():
			return context.Cause(refusedCtx)
		}
		// watermark alignment: while this source runs too far ahead of the
		// others a pattern aligns, stop reading it (the consumer's buffer
		// fills and JetStream holds the rest)
		return r.waitToRead(ctx, rs, true)
	}
	for {
		select {
		case <-refusedCtx.Done():
			if ctx.Err() != nil {
				return nil
			}
			return context.Cause(refusedCtx)
		case m, ok := <-msgs:
			if !ok {
				return flush()
			}
			if began != (time.Time{}) {
				r.log.Info("first message read", "stream", rs.stream, "after", time.Since(began).Round(time.Millisecond))
				began = time.Time{}
			}
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			if consumerSeq == 0 || md.Sequence.Consumer <= consumerSeq {
				// the first message, or the ordered consumer was created
				// again (a reconnect, or its stream deleted): the stream
				// must still be the one the positions count in, or its
				// sequences mean something else
				if err := flush(); err != nil {
					return err
				}
				if _, _, replaced := r.streamReplaced(ctx, rs); replaced {
					return fmt.Errorf("stream %s was created anew while it was read", rs.stream)
				}
			}
			consumerSeq = md.Sequence.Consumer
			block, ok := keygroup.BlockOfSubject(m.Subject(), r.env.KeyGroups())
			if !ok {
				block = -1 // not partitioned as expected: counted as misrouted
			}
			if len(events) == 0 {
				timer.Reset(linger)
			}
			// the client gives every message its own payload slice: kept, not copied
			ev := shard.Event{Pos: md.Sequence.Stream, Block: block, Data: m.Data()}
			if rs.derived != "" {
				ev.OriginPos, _ = shard.ForwardedPos(rs.derived, m.Headers().Get(forwardHeader))
			}
			events = append(events, ev)
			if len(events) >= r.env.Config.IngestBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		case <-timer.C:
			if err := flush(); err != nil {
				return err
			}
		}
	}
}

// eventAt is what plan.NextAfter needs of an event.
func eventAt(e shard.Event) (uint64, int) { return e.Pos, e.Block }

// messageIter is what readMessages uses of a jetstream.MessagesContext.
type messageIter interface {
	Next(...jetstream.NextOpt) (jetstream.Msg, error)
	Stop()
}

// readMessages passes on the iterator's messages, buffering up to buf,
// until Next fails (msgs is then closed), ctx ends or stop is called.
// stop returns once its goroutines have, whatever ctx does: read returns
// on errors of its own (not leader) while its caller goes on, and must
// not wait for the caller to stop its reader.
func readMessages(ctx context.Context, it messageIter, buf int) (msgs <-chan jetstream.Msg, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan jetstream.Msg, buf)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		it.Stop() // ends a Next that waits
	}()
	go func() {
		defer wg.Done()
		defer close(out)
		for {
			m, err := it.Next()
			if err != nil {
				return
			}
			select {
			case out <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, func() { cancel(); wg.Wait() }
}

// waitToRead returns once the shard may read on: its outbox holds fewer
// unpublished records than the limit (JetStream does not take the output:
// the replicated state must not grow with what is read meanwhile) and,
// with aligned, the source is not paused by watermark alignment.
func (r *Leader) waitToRead(ctx context.Context, rs readSpec, aligned bool) error {
	id := strconv.FormatUint(r.sh.ID(), 10)
	full, behind := false, false
	gauge := func(reason string, on bool) {
		v := 0.0
		if on {
			v = 1
		}
		r.env.Metrics.ReadPaused.WithLabelValues(id, rs.stream, reason).Set(v)
	}
	defer func() {
		if full {
			gauge("outbox", false)
		}
		if behind {
			gauge("alignment", false)
		}
	}()
	for {
		paused, outbox := false, 0
		r.sh.FSM().View(func(s *shard.State, _ uint64) {
			paused, outbox = aligned && rs.paused(s), len(s.Outbox())
		})
		if outbox >= r.env.Config.OutboxLimit && !full {
			full = true
			gauge("outbox", true)
			r.log.Warn("reading paused: the outbox holds more unpublished records than its limit", "stream", rs.stream, "records", outbox, "limit", r.env.Config.OutboxLimit)
		}
		if paused && !behind {
			behind = true
			gauge("alignment", true)
		}
		if !paused && outbox < r.env.Config.OutboxLimit {
			if full {
				r.log.Info("reading resumes: the outbox is below its limit", "stream", rs.stream, "records", outbox)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// forwardHeader carries a forwarded event's id (shard.ForwardID).
const forwardHeader = "Cep-Forward-Id"

// ForwarderOf is the shard that re-keys a derived source: spread over the
// shards by the source's name.
func ForwarderOf(m *meta.Meta, derived string) uint64 {
	h := fnv.New32a()
	h.Write([]byte(derived))
	// among the shards the cluster was created with (a split leaves the
	// shard split in place, under its id), so that a split does not move
	// the re-keying to a shard without its forwarded positions
	var base []uint64
	for _, s := range m.Shards {
		if s.Parent == 0 {
			base = append(base, s.ID)
		}
	}
	return base[h.Sum32()%uint32(len(base))]
}
