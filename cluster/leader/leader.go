// Package leader is a shard's leader: while a replica leads its shard, it
// reads the sources into logged batches, publishes the outbox, logs the
// clocks and processing time, reconciles the deployed patterns with the
// metadata and makes the shard's configuration follow the shard map. What
// it decides is in package plan (and watermark); what it uses of the node
// comes through an Env, so it runs without one (leader tests).
package leader

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/shard"
)

// The goroutines of a leader, each with what stops it and who waits for it
// (every one is waited for, so a closed replica leaves nothing running):
//
//   - Run: started by the node as it opens the replica (cluster's
//     openReplica); stops when the context New was given (Leader.ctx)
//     ends, which the node cancels as it closes the replica, and then
//     waits on.
//   - the session: started by run while the replica leads; run cancels
//     it when leadership goes or Leader.ctx ends, and waits for it; a
//     session that ends by itself is waited for before the next starts.
//   - manageMembers, watchStreams, publishRetrying, tick, clock, handOver,
//     leaveIfCutOffFromNATS: one
//     each per session, under the session's context; the session cancels
//     it as it returns (or as one of them fails) and waits for them.
//   - ingest and forward: one per source read (or derived source
//     forwarded), under a child of the session's context; cancelled when
//     the metadata no longer has it read, before a restore, and when the
//     session returns, which waits for them.
//   - in each read: the reader and what stops its iterator
//     (readMessages), and the checker of the proposals in flight; read
//     stops them as it returns and waits for them, whatever its caller's
//     context does.

// Leader is a shard's leader: the loop of one shard replica that, while
// the replica leads its shard, runs a leader session — reconcile the
// deployed patterns with the metadata, read the sources into logged
// batches, publish the outbox, tick processing time, make the shard's
// configuration follow the shard map. Everything it proposes goes
// through the log, so followers apply the same thing; the session ends
// when leadership does. (Not nfa.Runner, which matches the events.)
type Leader struct {
	env Env
	sh  *shard.Shard
	ctx context.Context // ends when the node closes the replica
	log *slog.Logger
	// missing are the streams this leader found gone, replaced those it
	// found created anew (watchStreams)
	missing  map[string]bool
	replaced map[string]bool
	// logged is what logPatternErrors has logged of each pattern, by name
	logged map[string]loggedFailures
}

// loggedFailures is what has been logged of a pattern's failures: its first
// failed condition and emitted field, and whether it dropped partial
// matches.
type loggedFailures struct {
	condition, emit string
	dropped         bool
	absent          map[string]bool // fields no event had, by path
}

func (r *Leader) run() {
	r.log = r.env.Log.With("shard", r.sh.ID())
	r.missing = map[string]bool{}
	r.replaced = map[string]bool{}
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
	retry := newRetryDelay()
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
		case leads := <-leaderCh:
			stop()
			if leads {
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

// errNATSRedialed ends a leader session whose NATS connection was
// replaced.
var errNATSRedialed = errors.New("connected to NATS anew")

// session is one leadership term's work.
func (r *Leader) session(ctx context.Context) {
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
	// the reads, publishes and subscriptions below hang on the node's NATS
	// connection of the moment: a new one (redialNATS) starts a new session
	redialed := r.env.NATSRedialed()
	wg.Add(8)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
		case <-redialed:
			fail(errNATSRedialed)
		}
	}()
	go func() { defer wg.Done(); fail(r.clock(ctx)) }()
	go func() { defer wg.Done(); r.manageMembers(ctx) }()
	go func() { defer wg.Done(); r.watchStreams(ctx, fail) }()
	go func() { defer wg.Done(); fail(r.publishRetrying(ctx)) }()
	go func() { defer wg.Done(); fail(r.tick(ctx)) }()
	// leadership moves to the preferred replica only after this session has
	// started, so a failover is not slowed by it
	go func() { defer wg.Done(); r.handOver(ctx) }()
	// a leader cut off from NATS serves nobody: a replica that reaches
	// NATS takes over
	go func() { defer wg.Done(); r.leaveIfCutOffFromNATS(ctx) }()

	ingests := map[string]context.CancelFunc{}
	var iwg sync.WaitGroup // the ingest and forward loops
	defer func() {
		for _, c := range ingests {
			c()
		}
		iwg.Wait()
	}()
	for {
		m, changed := r.env.Meta.View()
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
		for _, s := range SourcesOf(m) {
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
			if d == nil || d.Origin == "" || m.Sources[d.Origin] == nil || ForwarderOf(m, s) != r.sh.ID() {
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
func (r *Leader) restore(ctx context.Context, rm *meta.Restore) error {
	readers, closeAll, err := r.env.OpenSavepoint(ctx, rm)
	if err != nil {
		return err
	}
	defer closeAll()
	r.log.Info("restoring savepoint", "savepoint", rm.Savepoint, "files", len(readers))
	// positions in streams other than the saved ones, as the metadata log
	// maps them: the installed state carries them to every replica
	mapped := func(st *shard.State) {
		for _, src := range slices.Sorted(maps.Keys(rm.Positions)) {
			st.MapPositions(src, rm.Positions[src])
			r.log.Info("savepoint positions mapped onto the source's stream", "savepoint", rm.Savepoint, "source", src, "after", rm.Positions[src])
		}
		for _, d := range slices.Sorted(maps.Keys(rm.Forwarded)) {
			st.MapForwarded(d, rm.Forwarded[d])
			r.log.Info("savepoint re-keying position mapped onto the origin's stream", "savepoint", rm.Savepoint, "source", d, "after", rm.Forwarded[d])
		}
	}
	return r.sh.RestoreSavepoint(readers, rm.ID, mapped, time.Minute)
}

// SourcesOf lists the sources read by the live patterns (derived sources
// for re-keyed ones), sorted.
func SourcesOf(m *meta.Meta) []string {
	set := map[string]bool{}
	for _, name := range m.PatternNames() {
		for _, s := range m.Patterns[name].ReadsOf() {
			set[s] = true
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
