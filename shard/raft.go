package shard

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/cepcluster/cep/internal/hclogslog"
	"github.com/cepcluster/cep/internal/integrity"
	"github.com/cepcluster/cep/internal/raftlog"
	"github.com/cepcluster/cep/snapshot"
)

// FSM is the raft.FSM of a shard: a thin bridge that decodes log entries
// and hands them to State. Following hashicorp/raft's contract, Apply,
// Snapshot and Restore are called from one goroutine and never concurrently
// with each other; FSMSnapshot.Persist may run concurrently with Apply.
// Readers on other goroutines (the API, the publisher) use View, which
// takes a read lock.
type FSM struct {
	mu      sync.RWMutex
	state   *State
	index   uint64
	cluster string
	applied chan struct{} // signalled (non-blocking) after every apply
	delay   time.Duration // Testing.ApplyDelay

	// the time spent applying and the entries applied since the last
	// snapshot, and what is told of each snapshot (Shard sets it: the
	// snapshot threshold follows the cost of encoding the state). None of
	// it touches the state.
	busy       time.Duration
	entries    uint64
	snapDelay  time.Duration // Testing.SnapshotDelay
	onSnapshot func(encode, busy time.Duration, entries uint64)
	onSplit    func(sp Split, state []byte) // Config.OnSplit
	lastEncode atomic.Int64                 // nanoseconds the last snapshot's encoding took (metrics)

	// corrupt is the first damaged entry met: nothing is applied after
	// it, and no snapshot is taken (raft would compact the log into a
	// state that skipped it)
	corrupt    *raftlog.CorruptError
	onCorrupt  func(*raftlog.CorruptError) // Config.OnCorrupt
	shardID    uint64
	logFile    string
	restoreErr error // the first failed restore (Open fails on one)
}

// NewFSM returns the FSM of an empty shard owning [first, last] of groups.
func NewFSM(first, last, groups int, clusterID string) *FSM {
	return &FSM{state: NewState(first, last, groups), cluster: clusterID, applied: make(chan struct{}, 1)}
}

var _ raft.FSM = (*FSM)(nil)

// Apply applies one log entry. A sealed entry that does not decode is
// skipped on every replica alike (and reported to the proposer). A
// damaged one (its checksum does not match, or an entry written before
// entries were sealed does not decode) is never applied: the replica
// stops applying there and reports it (Config.OnCorrupt).
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	if ce := f.Corrupt(); ce != nil {
		return ce
	}
	start := time.Now()
	if f.delay > 0 {
		time.Sleep(f.delay)
	}
	b, corrupt, err := openBatch(l.Data)
	if corrupt {
		ce := &raftlog.CorruptError{Shard: f.shardID, File: f.logFile, Index: l.Index, Err: err}
		f.mu.Lock()
		f.corrupt = ce
		f.mu.Unlock()
		if f.onCorrupt != nil {
			f.onCorrupt(ce)
		}
		return ce
	}
	f.mu.Lock()
	f.index = l.Index
	if err == nil {
		err = f.state.Apply(b) // an entry refused: its reader reads again
	}
	splits := f.state.TakeSplitOff()
	f.busy += time.Since(start)
	f.entries++
	f.mu.Unlock()
	for _, so := range splits {
		f.handSplit(so)
	}
	select {
	case f.applied <- struct{}{}:
	default:
	}
	return err
}

// handSplit encodes a state split off and gives it to Config.OnSplit,
// before the next entry is applied (a replica that stops meanwhile applies
// the split again when it replays its log).
func (f *FSM) handSplit(so SplitOff) {
	if f.onSplit == nil {
		return
	}
	var buf bytes.Buffer
	h := snapshot.Header{ID: fmt.Sprintf("split-%d", so.Split.Shard), Kind: snapshot.KindRaftSnapshot, ClusterID: f.cluster}
	if err := so.State.WriteSnapshot(&buf, h); err != nil {
		panic(fmt.Sprintf("shard: encoding a split-off state: %v", err))
	}
	f.onSplit(so.Split, buf.Bytes())
}

// Index is the Raft index of the last log entry the state machine has
// applied. Raft's own AppliedIndex counts entries handed to the state
// machine's queue, which can run thousands of entries ahead of it.
func (f *FSM) Index() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.index
}

// Corrupt is the damaged entry this replica stopped at, nil while none.
func (f *FSM) Corrupt() *raftlog.CorruptError {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.corrupt
}

// Applied is signalled after entries are applied (coalesced).
func (f *FSM) Applied() <-chan struct{} { return f.applied }

// View runs fn with the state under a read lock. fn must not keep
// references into the state.
func (f *FSM) View(fn func(s *State, index uint64)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.state, f.index)
}

// PatternsSnapshot lists the deployed patterns (a read-locked View).
func (f *FSM) PatternsSnapshot() []PatternInfo {
	var out []PatternInfo
	f.View(func(s *State, _ uint64) { out = s.Patterns() })
	return out
}

// Snapshot captures the state: it is encoded here, so that Persist, which
// runs concurrently with later applies, only writes bytes.
//
// Applying waits while the state is encoded, so the cost of a snapshot
// grows with the state; Shard lets more entries accumulate between
// snapshots as it grows (see snapshotThreshold).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	start := time.Now()
	// a read lock: readers go on while the state is encoded (busy and
	// entries belong to the state machine's goroutine alone)
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.corrupt != nil {
		return nil, f.corrupt
	}
	if f.snapDelay > 0 {
		time.Sleep(f.snapDelay)
	}
	var buf bytes.Buffer
	h := snapshot.Header{
		ID:           fmt.Sprintf("shard-%d-%d-%d", f.state.first, f.state.last, f.index),
		Kind:         snapshot.KindRaftSnapshot,
		ClusterID:    f.cluster,
		CreatedIndex: f.index,
	}
	if err := f.state.WriteSnapshot(&buf, h); err != nil {
		return nil, err
	}
	encode := time.Since(start)
	f.lastEncode.Store(int64(encode))
	if f.onSnapshot != nil {
		f.onSnapshot(encode, f.busy, f.entries)
	}
	f.busy, f.entries = 0, 0
	return fsmSnapshot(buf.Bytes()), nil
}

// LastSnapshotEncode is how long encoding the state took for the last
// snapshot this replica took (0 before the first).
func (f *FSM) LastSnapshotEncode() time.Duration { return time.Duration(f.lastEncode.Load()) }

// snapshotCostShare bounds the share of the state machine's time spent
// encoding snapshots: the next snapshot waits until applying has taken
// snapshotCostShare times as long as encoding the last one did.
const snapshotCostShare = 5

// maxSnapshotThreshold bounds how many entries may accumulate between
// snapshots however slow the encoding (a restart replays them).
const maxSnapshotThreshold = 1 << 16

// snapshotThreshold returns how many log entries to let accumulate before
// the next snapshot, after one whose encoding took encode while applying
// entries took busy since the one before: enough that applying them takes
// snapshotCostShare times as long as the encoding, so snapshots cost the
// state machine at most about 1/(1+snapshotCostShare) of its time whatever
// the size of the state, and never fewer than min. A restart replays at
// most that many entries after restoring the snapshot: about
// snapshotCostShare times the time the snapshot took; and the log on disk
// holds them until the next snapshot, so it grows with the state too (the
// events of about five encodings' worth of applying).
func snapshotThreshold(encode, busy time.Duration, entries, min uint64) uint64 {
	if entries == 0 || busy <= 0 {
		return min
	}
	perEntry := float64(busy) / float64(entries)
	n := float64(snapshotCostShare) * float64(encode) / perEntry
	switch {
	case n <= float64(min):
		return min
	case n >= maxSnapshotThreshold:
		return max(min, maxSnapshotThreshold)
	}
	return uint64(n)
}

// Restore replaces the state with a snapshot's. A snapshot that does not
// decode (or panics the decoder) fails it, recorded for Open.
func (f *FSM) Restore(rc io.ReadCloser) (err error) {
	defer rc.Close()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("snapshot does not decode: %v", r)
		}
		if err != nil && f.restoreErr == nil {
			f.restoreErr = err
		}
	}()
	data, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	st, h, err := readOwnRange(data)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.state = st
	f.index = h.CreatedIndex
	f.mu.Unlock()
	return nil
}

// readOwnRange restores a snapshot file into its own key-group range: the
// shard may have split since this replica's state was last restored, or
// the state is a split's.
func readOwnRange(data []byte) (*State, snapshot.Header, error) {
	r, err := snapshot.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, snapshot.Header{}, err
	}
	h := r.Header()
	st, err := RestoreState([]*snapshot.Reader{r}, h.FirstKeyGroup, h.LastKeyGroup)
	return st, h, err
}

// load makes data (a snapshot file) the state, at index 0: a shard split
// off another starts from the state the split gave it.
func (f *FSM) load(data []byte) error {
	st, _, err := readOwnRange(data)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.state = st
	f.mu.Unlock()
	return nil
}

type fsmSnapshot []byte

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s fsmSnapshot) Release() {}

// Testing holds the faults tests inject into a shard.
type Testing struct {
	// ApplyDelay: the state machine sleeps this long before applying each
	// log entry (a replica too slow to keep up).
	ApplyDelay time.Duration
	// SnapshotDelay: encoding a snapshot takes this much longer (a large
	// state).
	SnapshotDelay time.Duration
}

// Config configures a Shard.
type Config struct {
	ID           uint64 // shard id, also its Raft group id
	First, Last  int    // key-group range
	Groups       int    // K
	ClusterID    string
	Dir          string // data directory of this shard on this node
	LocalID      string // this node's id
	Transport    raft.Transport
	Bootstrap    []raft.Server // voters to bootstrap with when the shard has no state yet
	Logger       *slog.Logger
	Raft         *raft.Config // optional overrides (timeouts); LocalID is set here
	SnapshotKeep int
	// Testing is for tests only (nil in production; internal/lint keeps
	// other code from naming it).
	Testing *Testing
	// Initial, when set, is the state (a snapshot file) the shard starts
	// from before its log: a shard split off another (OnSplit's state).
	// Its Raft snapshots replace it once taken.
	Initial []byte
	// OnSplit receives, on the state machine's goroutine, the first state
	// of each shard this one splits off (OpSplit), encoded as a snapshot
	// file; it should store it durably before returning.
	OnSplit func(sp Split, state []byte)
	// OnCorrupt is told, on the state machine's goroutine, of the first
	// damaged entry the replica meets once open (it applies nothing
	// after it); it must not block.
	OnCorrupt func(*raftlog.CorruptError)
}

// DefaultRaftConfig is the Raft configuration shards ship with.
func DefaultRaftConfig() *raft.Config {
	c := raft.DefaultConfig()
	// A follower notices a dead leader after 0.2–0.4 s without contact
	// (randomised in [HeartbeatTimeout, 2×HeartbeatTimeout); the leader
	// heartbeats every HeartbeatTimeout/10, as etcd's 100 ms against its
	// 1 s). The other follower still has a leader then and refuses its
	// pre-vote, so the election usually ends when the second follower's
	// timer fires too: under 2×HeartbeatTimeout after the crash. If that
	// follower's log is shorter, it cannot win, and the first one wins on
	// its retry, randomised in [ElectionTimeout, 2×ElectionTimeout): at
	// worst 2×HeartbeatTimeout + 2×ElectionTimeout = 2.4 s, inside the
	// failover bound of 2×ElectionTimeout + 0.5 s only because the
	// heartbeat timeout is at most 0.25 s (it was 0.5 s: a worst case of
	// 3 s).
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 1000 * time.Millisecond
	c.LeaderLeaseTimeout = 200 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	// A restarted replica applies the log from its last snapshot before it
	// is of use as a leader (leadership is handed to it only then), and an
	// entry holds up to IngestBatch (2,000) events: snapshot once 256
	// entries have accumulated, checked every 10 s, so the replay stays
	// near half a million events (about a second) instead of the whole log
	// (4,096 entries checked every 2 minutes, as before: 18 s of replay
	// after 5 million events in the failover benchmark). This is the
	// floor: a shard whose state takes long to encode lets more entries
	// accumulate (snapshotThreshold), since applying waits while it does.
	c.SnapshotThreshold = 256
	c.SnapshotInterval = 10 * time.Second
	c.TrailingLogs = 2048
	c.MaxAppendEntries = 256
	return c
}

// Shard is one shard replica on this node: a Raft group with its log on
// disk (raft-boltdb), file snapshots and the FSM. The Raft library owns its
// goroutines; Close shuts them down and waits.
type Shard struct {
	cfg   Config
	fsm   *FSM
	raft  *raft.Raft
	store *raftboltdb.BoltStore
	once  sync.Once
	write writeVersion // the batch version proposals are written in
}

// ErrNotLeader is returned by Propose on a follower.
var ErrNotLeader = errors.New("shard: not leader")

// Open starts the shard replica, bootstrapping the group on first start.
func Open(cfg Config) (*Shard, error) {
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	rc := cfg.Raft
	if rc == nil {
		rc = DefaultRaftConfig()
	}
	c := *rc
	c.LocalID = raft.ServerID(cfg.LocalID)
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c.Logger = raftLogger(logger.With("shard", cfg.ID))
	logFile := filepath.Join(cfg.Dir, "raft.db")
	store, err := raftlog.OpenLog(logFile)
	if err != nil {
		if raftlog.IsLocked(err) {
			return nil, fmt.Errorf("shard %d: open log: %w", cfg.ID, err)
		}
		return nil, &raftlog.CorruptError{Shard: cfg.ID, File: logFile, Err: err}
	}
	if i, err := raftlog.VerifyLog(store, CheckShardEntry); err != nil {
		store.Close()
		return nil, &raftlog.CorruptError{Shard: cfg.ID, File: logFile, Index: i, Err: err}
	}
	keep := cfg.SnapshotKeep
	if keep == 0 {
		keep = 2
	}
	raftlog.RemoveUnfinishedSnapshots(filepath.Join(cfg.Dir, "snapshots"), logger.With("shard", cfg.ID))
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, keep, c.Logger)
	if err != nil {
		store.Close()
		return nil, err
	}
	if err := raftlog.VerifySnapshots(cfg.Dir, snaps); err != nil {
		store.Close()
		err.Shard = cfg.ID
		return nil, err
	}
	fsm := NewFSM(cfg.First, cfg.Last, cfg.Groups, cfg.ClusterID)
	fsm.shardID, fsm.logFile, fsm.onCorrupt = cfg.ID, logFile, cfg.OnCorrupt
	if cfg.Testing != nil {
		fsm.delay, fsm.snapDelay = cfg.Testing.ApplyDelay, cfg.Testing.SnapshotDelay
	}
	fsm.onSplit = cfg.OnSplit
	if cfg.Initial != nil {
		// before raft restores its latest snapshot (which replaces it)
		if err := fsm.load(cfg.Initial); err != nil {
			store.Close()
			return nil, fmt.Errorf("shard %d: initial state: %w", cfg.ID, err)
		}
	}
	existing, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		store.Close()
		return nil, err
	}
	if !existing && len(cfg.Bootstrap) > 0 {
		if err := raft.BootstrapCluster(&c, store, store, snaps, cfg.Transport, raft.Configuration{Servers: cfg.Bootstrap}); err != nil {
			store.Close()
			return nil, fmt.Errorf("shard %d: bootstrap: %w", cfg.ID, err)
		}
	}
	r, err := raftlog.NewRaft(&c, fsm, store, snaps, cfg.Transport)
	if err == nil && fsm.restoreErr != nil {
		// raft went on with an older snapshot, or none: the log it has
		// may not reach back to it
		err = &raftlog.CorruptError{Shard: cfg.ID, File: filepath.Join(cfg.Dir, "snapshots"), Err: fsm.restoreErr}
		r.Shutdown().Error()
	}
	if err != nil {
		store.Close()
		if ce := (*raftlog.CorruptError)(nil); errors.As(err, &ce) {
			ce.Shard, ce.File = cfg.ID, cmp.Or(ce.File, logFile)
			return nil, ce
		}
		return nil, fmt.Errorf("shard %d: %w", cfg.ID, err)
	}
	sh := &Shard{cfg: cfg, fsm: fsm, raft: r, store: store}
	fsm.mu.Lock()
	fsm.onSnapshot = func(encode, busy time.Duration, entries uint64) {
		sh.adaptSnapshots(encode, busy, entries, c.SnapshotThreshold, logger.With("shard", cfg.ID))
	}
	fsm.mu.Unlock()
	return sh, nil
}

// adaptSnapshots sets Raft's snapshot threshold after a snapshot (see
// snapshotThreshold; min is the configured threshold). It runs on the state
// machine's goroutine; ReloadConfig only stores the new configuration.
func (s *Shard) adaptSnapshots(encode, busy time.Duration, entries, min uint64, log *slog.Logger) {
	rc := s.raft.ReloadableConfig()
	next := snapshotThreshold(encode, busy, entries, min)
	if next == rc.SnapshotThreshold {
		return
	}
	old := rc.SnapshotThreshold
	rc.SnapshotThreshold = next
	if err := s.raft.ReloadConfig(rc); err != nil {
		log.Warn("snapshot threshold not changed", "err", err)
		return
	}
	if next > 2*old || old > 2*next {
		log.Info("snapshot threshold changed", "entries", next, "was", old, "encode", encode.Round(time.Millisecond),
			"apply_per_entry", (busy / time.Duration(max(entries, 1))).Round(time.Microsecond))
	}
}

// ID is the shard id.
func (s *Shard) ID() uint64 { return s.cfg.ID }

// Range is the shard's key-group range, as its state has it (a split
// shrinks it).
func (s *Shard) Range() (first, last int) {
	s.fsm.View(func(st *State, _ uint64) { first, last, _ = st.Range() })
	return first, last
}

// FSM returns the shard's state machine.
func (s *Shard) FSM() *FSM { return s.fsm }

// Raft returns the Raft node (for status and membership).
func (s *Shard) Raft() *raft.Raft { return s.raft }

// IsLeader reports whether this replica leads the shard.
func (s *Shard) IsLeader() bool { return s.raft.State() == raft.Leader }

// LeaderCh reports leadership changes of this replica.
func (s *Shard) LeaderCh() <-chan bool { return s.raft.LeaderCh() }

// Propose appends a batch to the shard's log and waits until it is applied
// here. It fails with ErrNotLeader on a follower.
func (s *Shard) Propose(ctx context.Context, b *Batch) error {
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	return Result(ctx, s.raft.Apply(integrity.Seal(s.encode(b)), timeout))
}

// Result waits for a proposal (see raftlog.Wait) and returns its outcome: the state
// machine's error if it returned one, ErrNotLeader (wrapped) when
// leadership was lost, ctx's error if ctx ended first.
func Result(ctx context.Context, f raft.ApplyFuture) error {
	if err := raftlog.Wait(ctx, f); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return fmt.Errorf("%w: %v", ErrNotLeader, err)
		}
		return err
	}
	if err, ok := f.Response().(error); ok && err != nil {
		return err
	}
	return nil
}

// ProposeAsync appends a batch without waiting; the future reports the
// outcome. Pipelining several keeps the log busy while the leader reads.
func (s *Shard) ProposeAsync(b *Batch) raft.ApplyFuture {
	return s.raft.Apply(integrity.Seal(s.encode(b)), 10*time.Second)
}

// Barrier waits until everything committed before it is applied here (a new
// leader calls it before reading the state), or until ctx ends. It is an
// empty batch rather than Raft's own barrier entry: the state machine sees
// it, so its applied index (Index) reaches the end of the log, past the
// entries it is never shown (a new leader's no-op, configurations).
func (s *Shard) Barrier(ctx context.Context, timeout time.Duration) error {
	return Result(ctx, s.raft.Apply(integrity.Seal(s.encode(&Batch{})), timeout))
}

// Close shuts the replica down and closes its log. Safe to call twice.
func (s *Shard) Close() error {
	var err error
	s.once.Do(func() {
		err = s.raft.Shutdown().Error()
		if cerr := s.store.Close(); err == nil {
			err = cerr
		}
	})
	return err
}

// raftLogger sends raft's logs to slog at their own levels, from warnings
// up (a shard's raft is chatty at info, and a node has many shards).
func raftLogger(l *slog.Logger) hclog.Logger {
	h := hclogslog.New(l).Named("raft")
	h.SetLevel(hclog.Warn)
	return h
}

// Install makes state (a snapshot file of this shard's range) the state of
// every replica through Raft's restore: a snapshot after a gap in the log,
// so that a replica added later is sent it, never the log before it. A
// shard split off starts from a state that is not in its log; its first
// leader installs it.
func (s *Shard) Install(state []byte, timeout time.Duration) error {
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, ID: "install", Size: int64(len(state))}
	return s.raft.Restore(meta, bytes.NewReader(state), timeout)
}

// SnapshotIndex is the index of this replica's last Raft snapshot (0: none).
func (s *Shard) SnapshotIndex() uint64 {
	i, _ := strconv.ParseUint(s.raft.Stats()["last_snapshot_index"], 10, 64)
	return i
}

// RestoreSavepoint replaces the shard's state, on every replica, with the
// state of its key groups in a savepoint (files written under any shard
// layout), recording restoreID in it. It runs on the leader: Raft installs
// the result as a snapshot and sends it to the followers.
//
// mapped, when not nil, changes the restored state before it is installed
// (positions mapped onto other streams): what it sets reaches every
// replica with the state, so it must depend only on the log.
func (s *Shard) RestoreSavepoint(readers []*snapshot.Reader, restoreID string, mapped func(*State), timeout time.Duration) error {
	st, err := RestoreState(readers, s.cfg.First, s.cfg.Last)
	if err != nil {
		return err
	}
	st.SetRestoreID(restoreID)
	if mapped != nil {
		mapped(st)
	}
	var buf bytes.Buffer
	h := snapshot.Header{ID: "restore", Kind: snapshot.KindRaftSnapshot, ClusterID: s.cfg.ClusterID}
	if err := st.WriteSnapshot(&buf, h); err != nil {
		return err
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, ID: "restore", Size: int64(buf.Len())}
	return s.raft.Restore(meta, &buf, timeout)
}
