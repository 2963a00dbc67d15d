package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/raft"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/snapshot"
)

// runner drives one shard replica: while this replica leads the shard it
// runs a leader session — reconcile the deployed patterns with the
// metadata, read the sources into logged batches, publish the outbox,
// tick processing time. Everything it proposes goes through the log, so
// followers apply the same thing; the session ends when leadership does.
type runner struct {
	n   *Node
	sh  *shard.Shard
	ctx context.Context // ends when the node closes the replica
	log *slog.Logger
	// missing are the streams this leader found gone (watchStreams)
	missing map[string]bool
	// logged is what logPatternErrors has logged of each pattern, by name
	logged map[string]loggedFailures
}

// loggedFailures is what has been logged of a pattern's failures: its first
// failed condition and emitted field, and whether it dropped partial
// matches.
type loggedFailures struct {
	condition, emit string
	dropped         bool
}

func (r *runner) run() {
	r.log = r.n.log.With("shard", r.sh.ID())
	r.missing = map[string]bool{}
	r.logged = map[string]loggedFailures{}
	leaderCh := r.sh.LeaderCh()
	var cancel context.CancelFunc
	var done chan struct{}
	stop := func() {
		if cancel != nil {
			cancel()
			<-done
			cancel = nil
		}
	}
	defer stop()
	// a session that keeps ending by itself (its barrier fails on a full
	// disk, say) is started again after a growing delay, so the node does
	// not spin and log at the rate of the failure
	var retry backoff
	start := func() {
		ctx, c := context.WithCancel(r.ctx)
		cancel, done = c, make(chan struct{})
		retry.started()
		go func() {
			defer close(done)
			r.session(ctx)
		}()
	}
	if r.sh.IsLeader() {
		start()
	}
	for {
		var ended <-chan struct{}
		if cancel != nil {
			ended = done
		}
		select {
		case <-r.ctx.Done():
			return
		case leader := <-leaderCh:
			stop()
			if leader {
				start()
			} else {
				r.forgetMissingStreams()
			}
		case <-ended:
			// the session ended by itself (after a restore, or an error):
			// start another if this replica still leads
			cancel()
			cancel = nil
			select {
			case <-r.ctx.Done():
				return
			case <-time.After(retry.next()):
			}
			if r.sh.IsLeader() {
				start()
			}
		}
	}
}

// session is one leadership term's work.
func (r *runner) session(ctx context.Context) {
	began := time.Now()
	if r.handOffIfBehind(ctx) {
		return
	}
	if err := r.sh.Barrier(ctx, 10*time.Second); err != nil {
		r.log.Warn("barrier failed", "err", err)
		return
	}
	if err := r.installSplitState(); err != nil {
		r.log.Warn("installing the state of a shard split off", "err", err)
		return
	}
	r.log.Info("leading shard", "caught_up_in", time.Since(began).Round(time.Millisecond))
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := func(err error) {
		if err != nil && ctx.Err() == nil {
			if !errors.Is(err, shard.ErrNotLeader) {
				r.log.Warn("leader session ends", "err", err)
			}
			cancel()
		}
	}
	wg.Add(5)
	go func() { defer wg.Done(); r.manageMembers(ctx) }()
	go func() { defer wg.Done(); r.watchStreams(ctx) }()
	go func() { defer wg.Done(); fail(r.publishRetrying(ctx)) }()
	go func() { defer wg.Done(); fail(r.tick(ctx)) }()
	// leadership moves to the preferred replica only after this session has
	// started, so a failover is not slowed by it
	go func() { defer wg.Done(); r.handOver(ctx) }()

	ingests := map[string]context.CancelFunc{}
	var iwg sync.WaitGroup // the ingest and forward loops
	defer func() {
		for _, c := range ingests {
			c()
		}
		iwg.Wait()
	}()
	for {
		m, changed := r.n.meta.fsm.View()
		if m.Restore != nil {
			var have string
			r.sh.FSM().View(func(s *shard.State, _ uint64) { have = s.RestoreID() })
			if have != m.Restore.ID {
				// nothing more is read into the state the restore replaces
				for _, c := range ingests {
					c()
				}
				iwg.Wait()
				if err := r.restore(ctx, m.Restore); err != nil {
					r.log.Error("restore failed; retrying", "savepoint", m.Restore.Savepoint, "err", err)
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
				return // a new session reads the restored state
			}
		}
		if split, err := r.splitIfAsked(ctx, m); err != nil || split {
			fail(err)
			return // a new session reads the shard's new range
		}
		if err := r.reconcile(ctx, m); err != nil {
			fail(err)
			return
		}
		want := map[string]bool{}
		for _, s := range sourcesOf(m) {
			want[s] = true
			if _, ok := ingests[s]; !ok && m.Sources[s] != nil {
				ictx, icancel := context.WithCancel(ctx)
				ingests[s] = icancel
				src := m.Sources[s]
				iwg.Add(1)
				go func() { defer iwg.Done(); fail(r.ingest(ictx, src)) }()
			}
			// one shard re-keys each derived source
			d := m.Sources[s]
			if d == nil || d.Origin == "" || m.Sources[d.Origin] == nil || forwarderOf(m, s) != r.sh.ID() {
				continue
			}
			fk := "forward " + s
			want[fk] = true
			if _, ok := ingests[fk]; !ok {
				ictx, icancel := context.WithCancel(ctx)
				ingests[fk] = icancel
				origin := m.Sources[d.Origin]
				iwg.Add(1)
				go func() { defer iwg.Done(); fail(r.forward(ictx, origin, s)) }()
			}
		}
		for s, c := range ingests {
			if !want[s] {
				c()
				delete(ingests, s)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// restore replaces the shard's state with its part of a savepoint.
func (r *runner) restore(ctx context.Context, rm *meta.Restore) error {
	store, err := snapshot.OpenStore(ctx, rm.Location, r.n.js)
	if err != nil {
		return err
	}
	readers, closeAll, err := openSavepoint(ctx, store, rm.Savepoint)
	if err != nil {
		return err
	}
	defer closeAll()
	r.log.Info("restoring savepoint", "savepoint", rm.Savepoint, "files", len(readers))
	return r.sh.RestoreSavepoint(readers, rm.ID, time.Minute)
}

// handOver spreads leadership: each shard prefers the first replica of its
// replica list (the lists are rotated, so each node is preferred for some
// shards). A replica that is not the preferred one leads for a moment and
// then transfers leadership to it, once the preferred replica has applied
// the log up to about where this one has: a replica restarted a moment ago
// may hold the whole log and still be applying it, and as leader it would
// read and publish nothing until it had caught up (seconds under load).
// While the preferred replica is down or behind, this one keeps leading and
// asks again every HandOverAfter. Losing leadership ends the session
// through the leadership channel.
func (r *runner) handOver(ctx context.Context) bool {
	for {
		select {
		case <-ctx.Done():
			return true
		case <-time.After(r.n.cfg.HandOverAfter):
		}
		preferred := r.preferred()
		if preferred == "" || preferred == r.n.cfg.NodeID {
			continue
		}
		p, ok := r.n.peer(preferred)
		if !ok || !r.isVoter(preferred) {
			continue
		}
		addr := p.RaftAddr
		// a transfer blocks new proposals until it ends: only try it when
		// the preferred replica answers and has caught up
		applied, err := r.n.appliedAt(ctx, p.APIAddr, r.sh.ID())
		if err != nil {
			r.log.Debug("leadership stays here", "preferred", preferred, "err", err)
			continue
		}
		if mine := r.sh.FSM().Index(); applied+handOverLag < mine {
			r.log.Debug("leadership stays here", "preferred", preferred, "its_applied_index", applied, "applied_index", mine)
			continue
		}
		if err := shard.Wait(ctx, r.sh.Raft().LeadershipTransferToServer(raft.ServerID(preferred), raft.ServerAddress(addr))); err != nil {
			r.log.Debug("leadership stays here", "preferred", preferred, "err", err)
			continue
		}
		r.log.Info("leadership handed to the preferred replica", "to", preferred)
		return true
	}
}

// handOverLag is how many log entries the preferred replica may still have
// to apply when leadership moves to it: a few batches, milliseconds of work.
const handOverLag = 8

// shardsAt asks the node serving the API at apiAddr about its shard
// replicas (ListShards), waiting a second at most.
func (n *Node) shardsAt(ctx context.Context, apiAddr string) ([]*cepv1.Shard, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	s := NewService(n)
	res, err := cepv1connect.NewClusterServiceClient(s.client, n.apiURL(apiAddr), s.clientOpts()...).ListShards(ctx, connect.NewRequest(&cepv1.ListShardsRequest{}))
	if err != nil {
		return nil, err
	}
	return res.Msg.Shards, nil
}

// appliedAt asks the node serving the API at apiAddr how far its replica
// of shard id has applied the log.
func (n *Node) appliedAt(ctx context.Context, apiAddr string, id uint64) (uint64, error) {
	shards, err := n.shardsAt(ctx, apiAddr)
	if err != nil {
		return 0, err
	}
	for _, sh := range shards {
		if uint64(sh.Id) == id {
			return sh.LastAppliedIndex, nil
		}
	}
	return 0, fmt.Errorf("node at %s has no replica of shard %d", apiAddr, id)
}

// mostApplied finds, among the other voters of shard sh, the one whose
// replica has applied the most of the log (asking their nodes' APIs);
// ok is false when none answers.
func (n *Node) mostApplied(ctx context.Context, sh *shard.Shard) (peer Peer, applied uint64, ok bool) {
	f := sh.Raft().GetConfiguration()
	if f.Error() != nil {
		return Peer{}, 0, false
	}
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage != raft.Voter || string(srv.ID) == n.cfg.NodeID {
			continue
		}
		if p, found := n.peer(string(srv.ID)); found {
			if a, err := n.appliedAt(ctx, p.APIAddr, sh.ID()); err == nil && (!ok || a > applied) {
				peer, applied, ok = p, a, true
			}
		}
	}
	return peer, applied, ok
}

// behindHandOff is how many log entries a new leader may have left to
// apply before it hands leadership to a voter that has applied more.
const behindHandOff = 64

// handOffIfBehind runs when a session starts: a replica elected while it
// still has much of the log to apply (restarted a moment ago, replaying
// from its snapshot) would read and publish nothing until it had caught
// up, so it hands leadership to the voter that has applied the most, if
// that one has nearly caught up (when every replica is replaying, after a
// restart of the whole cluster, none qualifies and leadership stays, rather
// than moving from one to the next). It reports whether leadership moved.
func (r *runner) handOffIfBehind(ctx context.Context) bool {
	mine, last := r.sh.FSM().Index(), r.sh.Raft().LastIndex()
	if last < mine+behindHandOff {
		return false
	}
	peer, applied, ok := r.n.mostApplied(ctx, r.sh)
	if !ok || applied+behindHandOff/2 < last {
		return false
	}
	if err := shard.Wait(ctx, r.sh.Raft().LeadershipTransferToServer(raft.ServerID(peer.ID), raft.ServerAddress(peer.RaftAddr))); err != nil {
		r.log.Debug("leadership stays here while catching up", "to", peer.ID, "err", err)
		return false
	}
	r.log.Info("leadership handed to a replica that has applied more", "to", peer.ID, "its_applied_index", applied, "applied_index", mine)
	return true
}

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
func (r *runner) reconcile(ctx context.Context, m *meta.Meta) error {
	if d := r.n.cfg.knobs().ReconcileDelay; d > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
		m = r.n.Meta() // with what changed meanwhile
	}
	have := map[string]uint64{}
	unread := map[string]bool{}
	r.sh.FSM().View(func(s *shard.State, _ uint64) {
		for _, p := range s.Patterns() {
			have[p.Name] = p.Version
		}
		// read by none of the patterns that stay (those this batch deletes
		// do not count)
		for _, name := range sourcesOf(m) {
			unread[name] = !slices.ContainsFunc(s.Readers(name), func(p string) bool { return m.Patterns[p] != nil && !m.Patterns[p].Deleted })
		}
	})
	// deletions, then the skips (applied once the deleted patterns no
	// longer read their sources), then deployments
	var dels, skips, deps []shard.Op
	for _, name := range sortedKeys(m.Patterns) {
		p := m.Patterns[name]
		v, ok := have[name]
		switch {
		case p.Deleted && ok:
			dels = append(dels, shard.Op{Kind: shard.OpDelete, Pattern: name})
		case !p.Deleted && v != p.Version:
			deps = append(deps, shard.Op{Kind: shard.OpDeploy, Deploy: &shard.Deploy{
				Name: name, Version: p.Version, Spec: []byte(p.Spec), Sources: p.Sources, Reads: p.Reads,
				Subject: p.OutputSubject, Policy: shard.UpdatePolicy(p.Policy),
				MaxPartialMatches: p.MaxPartialMatches, Records: shard.RecordTypesOf(p.Records),
			}})
			for _, src := range p.ReadsOf() {
				if unread[src] {
					unread[src] = false
					skips = append(skips, r.skipHistory(ctx, m, src, p.FromStart && !ok)...)
				}
			}
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
func (r *runner) skipHistory(ctx context.Context, m *meta.Meta, src string, fromStart bool) []shard.Op {
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
	if origin := m.Sources[sm.Origin]; origin != nil && forwarderOf(m, src) == r.sh.ID() {
		if seq, ok := end(origin.Stream, origin.Name); ok {
			ops = append(ops, shard.Op{Kind: shard.OpSkip, Source: origin.Name, Target: src, Seq: seq})
		}
	}
	return ops
}

// streamEnd returns the last sequence number of a source's stream.
func (r *runner) streamEnd(ctx context.Context, stream, src string) (uint64, bool) {
	st, err := r.n.js.Stream(ctx, stream)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("a new pattern reads the source from where its reading last stopped: its stream's end is unknown", "source", src, "stream", stream, "err", err)
		}
		return 0, false
	}
	return st.CachedInfo().State.LastSeq, true
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ingest reads a source's key groups of this shard from JetStream and
// proposes them as batches, several in flight. It resumes after the lowest
// position the shard's key groups applied; anything re-read is skipped by
// the state machine.
func (r *runner) ingest(ctx context.Context, src *meta.Source) error {
	var pos uint64
	r.sh.FSM().View(func(s *shard.State, _ uint64) { pos = s.Positions()[src.Name] })
	first, last := r.sh.Range()
	derived := ""
	if src.Origin != "" {
		derived = src.Name
	}
	return r.read(ctx, readSpec{
		stream: src.Stream, filters: keygroup.BlockFilters(src.Name, first, last, r.n.keyGroups()), from: pos, derived: derived,
		op: func(events []shard.Event) shard.Op {
			return shard.Op{Kind: shard.OpEvents, Source: src.Name, Events: events}
		},
		paused: func(s *shard.State) bool { return s.Paused(src.Name) },
	})
}

// forward re-keys a source into a derived source: this shard reads the
// whole origin stream in order (it alone, so the derived stream receives the
// events in the origin's order and its readers' watermarks follow it as a
// direct read's would) and forwards each event through its outbox.
func (r *runner) forward(ctx context.Context, origin *meta.Source, derived string) error {
	var pos uint64
	r.sh.FSM().View(func(s *shard.State, _ uint64) { pos = s.Forwarded()[derived] })
	return r.read(ctx, readSpec{
		stream: origin.Stream, filters: origin.Filter, from: pos,
		op: func(events []shard.Event) shard.Op {
			return shard.Op{Kind: shard.OpForward, Source: origin.Name, Target: derived, Events: events}
		},
		paused: func(*shard.State) bool { return false },
	})
}

// warnIfRemoved warns when the stream no longer holds the events after
// pos that reading is about to resume at: its retention limits (or a
// purge) removed them before the shard read them — after a long outage, or
// when restoring an old savepoint — and reading goes on from the first
// event it still holds.
func (r *runner) warnIfRemoved(ctx context.Context, stream string, pos uint64) {
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

// readSpec is what read reads and how it logs it.
type readSpec struct {
	stream  string
	filters []string
	from    uint64 // the last position applied
	derived string // the source's name when it is derived: events carry their origin position
	op      func(events []shard.Event) shard.Op
	paused  func(s *shard.State) bool
}

// read consumes a stream from JetStream and proposes it as batches, several
// in flight.
func (r *runner) read(ctx context.Context, rs readSpec) error {
	pos := rs.from
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: rs.filters,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
	if pos > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = pos + 1
	}
	began := time.Now()
	r.warnIfRemoved(ctx, rs.stream, pos)
	cons, err := r.n.js.OrderedConsumer(ctx, rs.stream, cfg)
	if err != nil {
		return err
	}
	msgs := make(chan jetstream.Msg, r.n.cfg.IngestBatch)
	it, err := cons.Messages(jetstream.PullMaxMessages(r.n.cfg.IngestBatch))
	if err != nil {
		return err
	}
	r.log.Info("reading", "stream", rs.stream, "after", pos, "filters", len(rs.filters), "consumer_in", time.Since(began).Round(time.Millisecond))
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(msgs)
		for {
			m, err := it.Next()
			if err != nil {
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	defer func() { <-readDone }()

	// proposals are pipelined: up to 4 batches in flight, checked in order
	type proposal struct {
		f     raft.ApplyFuture
		start time.Time
	}
	pending := make(chan proposal, 4)
	checkDone := make(chan error, 1)
	go func() {
		var firstErr error
		for p := range pending {
			err := shard.Result(ctx, p.f)
			r.n.applyLatency.Observe(time.Since(p.start).Seconds())
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}
		checkDone <- firstErr
	}()
	defer func() {
		close(pending)
		<-checkDone
	}()

	linger := r.n.cfg.IngestLinger
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var events []shard.Event
	flush := func() error {
		if len(events) == 0 {
			return nil
		}
		// no entry while the outbox is over its limit (each new session
		// would otherwise add one before its first check)
		if err := r.waitToRead(ctx, rs, false); err != nil {
			return err
		}
		b := &shard.Batch{Ops: []shard.Op{rs.op(events)}}
		events = nil
		if !r.sh.IsLeader() {
			return shard.ErrNotLeader
		}
		select {
		case pending <- proposal{r.sh.ProposeAsync(b), time.Now()}:
		case <-ctx.Done():
			return ctx.Err()
		}
		// watermark alignment: while this source runs too far ahead of the
		// others a pattern aligns, stop reading it (the consumer's buffer
		// fills and JetStream holds the rest)
		return r.waitToRead(ctx, rs, true)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
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
			block, ok := keygroup.BlockOfSubject(m.Subject(), r.n.keyGroups())
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
			if len(events) >= r.n.cfg.IngestBatch {
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

// watchStreams checks, when the session starts and every StreamCheckEvery
// after, that the streams this leader reads exist. A stream deleted behind
// the cluster's back leaves its consumer waiting in silence (or sessions
// that end as they start), and publishers without a stream: this says so,
// once, in the log and in cep_source_stream_missing until it is back.
// What it found outlives the session (r.missing); run clears it when the
// leadership goes.
func (r *runner) watchStreams(ctx context.Context) {
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
func (r *runner) logPatternErrors() {
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
func (r *runner) forgetMissingStreams() {
	id := strconv.FormatUint(r.sh.ID(), 10)
	for stream := range r.missing {
		r.n.streamMissing.WithLabelValues(id, stream).Set(0)
	}
	clear(r.missing)
}

// waitToRead returns once the shard may read on: its outbox holds fewer
// unpublished records than the limit (JetStream does not take the output:
// the replicated state must not grow with what is read meanwhile) and,
// with aligned, the source is not paused by watermark alignment.
func (r *runner) waitToRead(ctx context.Context, rs readSpec, aligned bool) error {
	id := strconv.FormatUint(r.sh.ID(), 10)
	full, behind := false, false
	gauge := func(reason string, on bool) {
		v := 0.0
		if on {
			v = 1
		}
		r.n.readPaused.WithLabelValues(id, rs.stream, reason).Set(v)
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
		if outbox >= r.n.cfg.OutboxLimit && !full {
			full = true
			gauge("outbox", true)
			r.log.Warn("reading paused: the outbox holds more unpublished records than its limit", "stream", rs.stream, "records", outbox, "limit", r.n.cfg.OutboxLimit)
		}
		if paused && !behind {
			behind = true
			gauge("alignment", true)
		}
		if !paused && outbox < r.n.cfg.OutboxLimit {
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

// headerRoom is what a published record's headers (message id) may take
// of the server's max payload.
const headerRoom = 1024

// oversized is what is published instead of a record larger than the NATS
// server's max payload: on keygroup.DeadLetterRoot + "output.<rest of the
// record's subject>", the record's subject, id, type, pattern, key and
// times, its events counted by stage, and the reason. Forwarded events
// and dead letters of input events are never larger than the input they
// carry, so in practice this is a match or timeout with many events.
func oversized(o shard.OutRecord, max int64) (subject string, data []byte) {
	type about struct {
		Type      string `json:"type,omitempty"`
		Pattern   string `json:"pattern,omitempty"`
		Key       string `json:"key,omitempty"`
		Start     *int64 `json:"start,omitempty"`
		End       *int64 `json:"end,omitempty"`
		TimeoutAt *int64 `json:"timeoutAt,omitempty"`
	}
	var rec struct {
		about
		Events map[string][]json.RawMessage `json:"events"`
	}
	_ = json.Unmarshal(o.Payload, &rec) // what it holds is kept; a record is JSON
	out := struct {
		Subject string `json:"subject"`
		ID      string `json:"id"`
		Reason  string `json:"reason"`
		about
		Events map[string]int `json:"events,omitempty"`
	}{Subject: o.Subject, ID: o.ID, about: rec.about, Events: map[string]int{},
		Reason: fmt.Sprintf("the record's %d bytes exceed the NATS server's max payload of %d", len(o.Payload), max)}
	for stage, evs := range rec.Events {
		out.Events[stage] = len(evs)
	}
	data, _ = json.Marshal(out)
	rest := strings.TrimPrefix(strings.TrimPrefix(o.Subject, keygroup.OutputSubjectRoot), keygroup.DeadLetterRoot)
	return keygroup.DeadLetterRoot + "output." + rest, data
}

// publishRetrying runs publish until the session ends, starting it again
// after an error (JetStream not taking the output: the stream gone, full,
// unreachable) with a delay that doubles up to 5 s, so that the session
// and its reading stay up — reading pauses by itself once the outbox
// holds its limit — and the node does not spin at the rate of the failure.
// Losing the leadership ends it.
func (r *runner) publishRetrying(ctx context.Context) error {
	var retry backoff
	for {
		retry.started()
		err := r.publish(ctx)
		if err == nil || ctx.Err() != nil || errors.Is(err, shard.ErrNotLeader) || !r.sh.IsLeader() {
			return err
		}
		d := retry.next()
		r.log.Warn("publishing the outbox failed; retrying", "err", err, "in", d)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
	}
}

// backoff spaces out the attempts of something that keeps failing: the
// first retry after 100 ms, each next one after twice the delay, up to
// 5 s, and after 100 ms again once an attempt lasted 10 s.
type backoff struct {
	delay time.Duration
	began time.Time
}

// started records the start of an attempt.
func (b *backoff) started() { b.began = time.Now() }

// next is the delay before the attempt after the one that just failed.
func (b *backoff) next() time.Duration {
	const first, most, settled = 100 * time.Millisecond, 5 * time.Second, 10 * time.Second
	if b.delay == 0 || time.Since(b.began) > settled {
		b.delay = first
	} else {
		b.delay = min(2*b.delay, most)
	}
	return b.delay
}

// publish sends the outbox to JetStream, each record with its id as the
// message id (so a re-publish after failover is de-duplicated), and logs
// an acknowledgement once JetStream has stored them.
func (r *runner) publish(ctx context.Context) error {
	// records per round: bounds the publishes awaiting their acks
	const round = 4096
	applied := r.sh.FSM().Applied()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var sent uint64 // highest outbox seq published in this term
	// the acknowledgement of the previous round is logged while the next
	// round is published (one in flight)
	var acking raft.ApplyFuture
	waitAck := func() error {
		if acking == nil {
			return nil
		}
		f := acking
		acking = nil
		return shard.Result(ctx, f)
	}
	defer waitAck()
	for {
		var recs []shard.OutRecord
		r.sh.FSM().View(func(s *shard.State, _ uint64) {
			ob := s.Outbox()
			i := sort.Search(len(ob), func(i int) bool { return ob[i].Seq > sent })
			recs = append(recs, ob[i:min(len(ob), i+round)]...)
		})
		if len(recs) > 0 {
			futures := make([]jetstream.PubAckFuture, 0, len(recs))
			max := r.n.nc.MaxPayload() // the server's, known once connected
			for _, o := range recs {
				msg := &nats.Msg{Subject: o.Subject, Data: o.Payload, Header: nats.Header{}}
				if int64(len(o.Payload)) > max-headerRoom {
					// the server would refuse it at every try and the shard
					// would never publish past it
					msg.Subject, msg.Data = oversized(o, max)
					r.log.Warn("an output record exceeds the NATS max payload: its summary goes to the dead-letter subject",
						"id", o.ID, "subject", o.Subject, "bytes", len(o.Payload), "max_payload", max, "dead_letter", msg.Subject)
				}
				if strings.HasPrefix(o.ID, "fw-") {
					// a forwarded event: its readers skip a second copy by
					// its origin position, so the server need not track it
					msg.Header.Set(forwardHeader, o.ID)
				} else {
					msg.Header.Set(jetstream.MsgIDHeader, o.ID)
				}
				f, err := r.n.js.PublishMsgAsync(msg)
				if err != nil {
					return err
				}
				futures = append(futures, f)
			}
			for _, f := range futures {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					return err
				case <-ctx.Done():
					return nil
				}
			}
			sent = recs[len(recs)-1].Seq
			if err := waitAck(); err != nil {
				return err
			}
			if !r.sh.IsLeader() {
				return shard.ErrNotLeader
			}
			acking = r.sh.ProposeAsync(&shard.Batch{Ops: []shard.Op{{Kind: shard.OpAck, Seq: sent}}})
			continue
		}
		if err := waitAck(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-applied:
		case <-tick.C:
		}
	}
}

// tick logs processing time while some pattern runs on it.
func (r *runner) tick(ctx context.Context) error {
	t := time.NewTicker(r.n.cfg.TickEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		needs := false
		r.sh.FSM().View(func(s *shard.State, _ uint64) { needs = s.NeedsTicks() })
		if !needs {
			continue
		}
		now := r.n.cfg.Now().UnixMilli()
		if err := r.sh.Propose(ctx, &shard.Batch{Ops: []shard.Op{{Kind: shard.OpTick, Time: now}}}); err != nil {
			return err
		}
	}
}

// forwardHeader carries a forwarded event's id (shard.ForwardID).
const forwardHeader = "Cep-Forward-Id"

// forwarderOf is the shard that re-keys a derived source: spread over the
// shards by the source's name.
func forwarderOf(m *meta.Meta, derived string) uint64 {
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
