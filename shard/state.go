package shard

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cepcluster/cep/internal/schema"
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/nfa/expr"
	"github.com/cepcluster/cep/snapshot"
)

// OutRecord is one record waiting in the outbox to be published.
type OutRecord struct {
	Seq     uint64 // outbox sequence, increasing
	ID      string // deterministic id: the publish's de-duplication id
	Subject string
	Payload []byte // pattern-v1 JSON record, or a dead-letter record
	// KeyGroup is the key group the record belongs to: on rescaling, the
	// shard that takes the key group over publishes it.
	KeyGroup int
}

// Counters are a State's statistics. They are derived from the log, so
// replicas agree on them, and they are part of the snapshot.
type Counters struct {
	Events       uint64 // events applied
	Duplicates   uint64 // events skipped as already applied
	DeadLetters  uint64
	Misrouted    uint64 // events of a block the shard does not own, or published on another key's subject
	Matches      uint64
	Timeouts     uint64
	Late         uint64
	PatternFails uint64 // deploys whose spec did not compile
}

// State is the replicated state of one shard: the matchers of every pattern
// for the shard's key groups, the last source position each key group
// applied, and the outbox of produced records.
//
// Apply is a deterministic function of the state and the batch: it reads no
// clock and iterates patterns and keys in sorted order, so every replica
// that applies the same log holds the same state. (Its only goroutine
// decodes half of a large batch's events and is waited for before any is
// applied: decodeAll.)
// State is not safe for concurrent use; under Raft, Apply, Snapshot and
// Restore are called from one goroutine.
type State struct {
	first, last, groups int

	patterns []*patternRT // sorted by name
	// strict are the fields the events of each strict source must fit
	// (StrictOp)
	strict map[string]schema.Schema
	// positions[kg-first][source] is the last source position applied for
	// that key group.
	positions []map[string]uint64
	// forwarded[derived] is the last origin position this shard re-keyed
	// into a derived source
	forwarded map[string]uint64
	outbox    []OutRecord
	nextSeq   uint64
	counters  Counters
	// restoreID names the savepoint restore this state came from (the
	// cluster asks each shard to restore once).
	restoreID string
	// splitOff holds the states split off by the batch being applied, for
	// the FSM to hand over (not part of the state)
	splitOff []SplitOff
	// injectFault, set by tests only, makes the engine fail on the event
	// of pattern and key it reports true for (not part of the state)
	injectFault func(pattern, key string) bool
	// refused collects the refusals of the event being applied (scratch,
	// not part of the state)
	refused []refusal
}

// SplitOff is the first state of a shard split off this one (OpSplit).
type SplitOff struct {
	Split Split
	State *State
}

// RestoreID is the id of the savepoint restore that produced this state, if any.
func (s *State) RestoreID() string { return s.restoreID }

// SetRestoreID records the restore that produced this state.
func (s *State) SetRestoreID(id string) { s.restoreID = id }

type patternRT struct {
	deploy  Deploy
	pattern *nfa.Pattern
	m       *nfa.Matcher
	// draining holds previous versions that finish their partial matches
	// (PolicyDrain), oldest first.
	draining []*drainingRT
	// keysRefused counts the events dead-lettered at the bound on keys
	// since this replica built or restored the pattern (not part of the
	// state; the dead letters are)
	keysRefused uint64
	// bytesRefused likewise counts the events dead-lettered at the bound
	// on bytes held
	bytesRefused uint64
	counts       PatternCounters // replicated (pattern_counters.go)
	// absent watches the fields the pattern reads that no event had yet
	// (absentfields.go); made at the first event
	absent *absentFields
}

type drainingRT struct {
	version uint64
	m       *nfa.Matcher
}

// NewState returns the empty state of a shard owning key groups
// [first, last] out of groups.
func NewState(first, last, groups int) *State {
	s := &State{first: first, last: last, groups: groups, nextSeq: 1, forwarded: map[string]uint64{}}
	s.positions = make([]map[string]uint64, last-first+1)
	for i := range s.positions {
		s.positions[i] = map[string]uint64{}
	}
	return s
}

// Range returns the shard's key groups.
func (s *State) Range() (first, last, groups int) { return s.first, s.last, s.groups }

// Counters returns the statistics.
func (s *State) Counters() Counters { return s.counters }

// Outbox returns the records not yet acknowledged, oldest first. The slice
// is the state's own: callers must not modify it.
func (s *State) Outbox() []OutRecord { return s.outbox }

// Position returns the last applied position of source for key group kg.
func (s *State) Position(kg int, source string) uint64 {
	if kg < s.first || kg > s.last {
		return 0
	}
	return s.positions[kg-s.first][source]
}

// Positions returns, per source, the lowest applied position over the key
// groups of the shard: reading can safely resume after it (events at or
// below a key group's own position are skipped as duplicates).
func (s *State) Positions() map[string]uint64 {
	out := map[string]uint64{}
	seen := map[string]int{}
	for _, m := range s.positions {
		for src, p := range m {
			if strings.HasSuffix(src, "#origin") {
				continue
			}
			if cur, ok := out[src]; !ok || p < cur {
				out[src] = p
			}
			seen[src]++
		}
	}
	for src, n := range seen {
		if n < len(s.positions) {
			out[src] = 0 // some key group has applied nothing from it yet
		}
	}
	return out
}

// NeedsTicks reports whether some pattern runs on processing time, so
// that the leader must log ticks.
func (s *State) NeedsTicks() bool {
	for _, p := range s.patterns {
		if !p.pattern.EventTime() || p.m.MultiSource() {
			return true
		}
	}
	return false
}

// Paused reports whether reading source should pause: some pattern aligns
// several sources and this one's watermark runs more than maxDrift ahead.
func (s *State) Paused(source string) bool {
	for _, p := range s.patterns {
		if !p.m.MultiSource() {
			continue
		}
		// the matcher knows the source by the pattern's name for it (a
		// derived source stands for the source it re-keys)
		if logical, ok := s.reads(p, source); ok && p.m.Paused(logical) {
			return true
		}
	}
	return false
}

// PatternInfo describes a deployed pattern on this shard.
type PatternInfo struct {
	Name           string
	Version        uint64
	Draining       int // previous versions still finishing partial matches
	Keys           int
	PartialMatches int
	BufferedEvents int
	Watermark      int64
	// OldestPartialStart is the start time of its oldest partial match
	// holding events (nfa.Matcher.OldestPartialStart), when HasPartial.
	OldestPartialStart int64
	HasPartial         bool
	// MaxPartialMatches is the bound per key its matchers keep (0: none).
	MaxPartialMatches int
	// MaxKeys is its bound on keys on this shard (0: none), and
	// KeysRefused the events of new keys dead-lettered at it since this
	// replica built or restored the pattern.
	MaxKeys     int
	KeysRefused uint64
	// StateBytes is the raw bytes of the events its matchers hold
	// (nfa.Matcher.StateBytes), MaxStateBytes its bound on them on this
	// shard (0: none), and StateBytesRefused the events dead-lettered at
	// it since this replica built or restored the pattern.
	StateBytes        int64
	MaxStateBytes     int64
	StateBytesRefused uint64
	// Since this replica built or restored the pattern's matchers (these
	// are not part of the replicated state): partial matches discarded at
	// nfa's bound per key (Config.MaxPartialMatches), condition
	// evaluations that failed and counted as false, emitted fields that
	// failed and are null, and the first failure of each
	// (Matcher.FirstErrors).
	Dropped                     uint64
	StepCapped                  uint64 // events whose step on their key reached nfa's MaxStepsPerEvent
	ConditionErrors, EmitErrors uint64
	FirstConditionError         string
	FirstEmitError              string
	// AbsentFields are the fields the pattern reads that no event has
	// had since this replica built it, with the events without them.
	AbsentFields []AbsentField
}

// Patterns lists the deployed patterns, sorted by name.
func (s *State) Patterns() []PatternInfo {
	out := make([]PatternInfo, 0, len(s.patterns))
	for _, p := range s.patterns {
		pm, be := p.m.Totals()
		info := PatternInfo{Name: p.deploy.Name, Version: p.deploy.Version, Draining: len(p.draining), Keys: p.m.Keys(), PartialMatches: pm, BufferedEvents: be, Watermark: p.m.CurrentWatermark(),
			MaxPartialMatches: p.m.Config().MaxPartialMatches, MaxKeys: p.deploy.maxKeys(), KeysRefused: p.keysRefused,
			StateBytes: p.stateBytes(), MaxStateBytes: p.deploy.maxStateBytes(), StateBytesRefused: p.bytesRefused}
		info.addStats(p.m)
		info.OldestPartialStart, info.HasPartial = p.m.OldestPartialStart()
		for _, d := range p.draining {
			if ts, ok := d.m.OldestPartialStart(); ok && (!info.HasPartial || ts < info.OldestPartialStart) {
				info.OldestPartialStart, info.HasPartial = ts, true
			}
			dp, db := d.m.Totals()
			info.PartialMatches += dp
			info.BufferedEvents += db
			info.addStats(d.m)
		}
		out = append(out, info)
	}
	return out
}

// PatternFailures lists, per deployed pattern, only what PatternInfo says
// of failed conditions and emitted fields: without Patterns' walk over
// every key for the state's size, for a caller that looks often.
func (s *State) PatternFailures() []PatternInfo {
	out := make([]PatternInfo, 0, len(s.patterns))
	for _, p := range s.patterns {
		info := PatternInfo{Name: p.deploy.Name, Version: p.deploy.Version, MaxPartialMatches: p.m.Config().MaxPartialMatches, MaxKeys: p.deploy.maxKeys(), KeysRefused: p.keysRefused,
			StateBytes: p.stateBytes(), MaxStateBytes: p.deploy.maxStateBytes(), StateBytesRefused: p.bytesRefused}
		info.addStats(p.m)
		for _, d := range p.draining {
			info.addStats(d.m)
		}
		info.AbsentFields = p.absent.list()
		out = append(out, info)
	}
	return out
}

func (info *PatternInfo) addStats(m *nfa.Matcher) {
	st := m.Stats()
	info.Dropped += st.Dropped
	info.StepCapped += st.StepCapped
	info.ConditionErrors += st.ConditionErrors
	info.EmitErrors += st.EmitErrors
	cond, emit := m.FirstErrors()
	if info.FirstConditionError == "" {
		info.FirstConditionError = cond
	}
	if info.FirstEmitError == "" {
		info.FirstEmitError = emit
	}
}

// skip applies OpSkip. While no pattern reads the source (the case it is
// proposed for), its positions are set to seq, lower ones too: a stream
// deleted and created again numbers its events from 1 again, and
// positions of the old one would skip them as re-reads; the origin
// positions of a derived source's copies start again too. Should a pattern
// read it by then, positions only move up.
func (s *State) skip(source, target string, seq uint64) {
	if target != "" {
		if s.Reads(target) {
			seq = max(seq, s.forwarded[target])
		}
		s.forwarded[target] = seq
		return
	}
	read := s.Reads(source)
	for _, pos := range s.positions {
		if read {
			pos[source] = max(pos[source], seq)
			continue
		}
		pos[source] = seq
		delete(pos, originKey(source))
	}
}

// MapPositions makes every key group resume source after seq, whatever it
// had applied (lower or higher): its positions counted in another stream
// than the one it is read from now. The origin positions of a derived
// source's copies are forgotten with them.
func (s *State) MapPositions(source string, seq uint64) {
	for _, pos := range s.positions {
		pos[source] = seq
		delete(pos, originKey(source))
	}
}

// MapForwarded makes the re-keying of the derived source resume after
// origin position seq (the origin's stream is another than the one its
// position counted in); the origin positions its readers skip copies by
// are forgotten, as they counted in that other stream.
func (s *State) MapForwarded(derived string, seq uint64) {
	s.forwarded[derived] = seq
	for _, pos := range s.positions {
		delete(pos, originKey(derived))
	}
}

// Reads reports whether a deployed pattern reads source, by its name or as
// the derived source it reads instead of one.
func (s *State) Reads(source string) bool { return len(s.Readers(source)) > 0 }

// Readers lists the deployed patterns that read source, by name.
func (s *State) Readers(source string) []string {
	var out []string
	for _, p := range s.patterns {
		if _, ok := s.reads(p, source); ok {
			out = append(out, p.deploy.Name)
		}
	}
	return out
}

// Version returns the version of the named pattern this state runs (a
// draining older version does not count); ok is false when it runs none.
func (s *State) Version(name string) (version uint64, ok bool) {
	if _, p := s.find(name); p != nil {
		return p.deploy.Version, true
	}
	return 0, false
}

func (s *State) find(name string) (int, *patternRT) {
	i := sort.Search(len(s.patterns), func(i int) bool { return s.patterns[i].deploy.Name >= name })
	if i < len(s.patterns) && s.patterns[i].deploy.Name == name {
		return i, s.patterns[i]
	}
	return i, nil
}

// GapError is an entry of events refused (EventsOp.After,
// ForwardOp.After): the shard has applied its source only up to Applied,
// the entry continues after After. Its reader reads again from where the
// shard is.
type GapError struct {
	Source         string
	After, Applied uint64
}

func (e *GapError) Error() string {
	return fmt.Sprintf("shard: an entry of %s read after position %d refused: the shard applied it up to %d only (an entry before it was not applied)",
		e.Source, e.After, e.Applied)
}

// Apply applies one batch, each op by its kind's row of the op table
// (ops.go). The error is that of an operation refused (a GapError, the
// last if several); the others are applied.
func (s *State) Apply(b *Batch) error {
	var refused error
	for _, op := range b.Ops {
		if err := opTypeOf(op).apply(s, op); err != nil {
			refused = err
		}
	}
	return refused
}

// appliedAll is the position up to which every key group of the shard has
// applied source (Positions).
func (s *State) appliedAll(source string) uint64 {
	var low uint64
	for i, pos := range s.positions {
		if p := pos[source]; i == 0 || p < low {
			low = p
		}
	}
	return low
}

// split hands key groups [sp.At, last] to a new shard: their positions,
// keys and outbox records go to the state it returns in splitOff, which
// shares the rest (deployments, watermarks, forwarded positions) and counts
// from zero; this state keeps [first, sp.At-1]. Both are what restoring a
// snapshot of this state into the two ranges gives, so a replica restored
// from either shard's snapshots later agrees with one that applied the
// split. A split point outside (first, last] changes nothing.
func (s *State) split(sp Split) {
	if sp.At <= s.first || sp.At > s.last {
		return
	}
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf, snapshot.Header{ID: "split", Kind: snapshot.KindRaftSnapshot}); err != nil {
		panic(fmt.Sprintf("shard: encoding the state to split it: %v", err)) // encoding an applied state cannot fail
	}
	part := func(first, last int) *State {
		r, err := snapshot.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			panic(fmt.Sprintf("shard: reading the state to split it: %v", err))
		}
		st, err := RestoreState([]*snapshot.Reader{r}, first, last)
		if err != nil {
			panic(fmt.Sprintf("shard: splitting the state: %v", err))
		}
		return st
	}
	right := part(sp.At, s.last)
	right.counters = Counters{}
	right.zeroPatternCounters()
	left := part(s.first, sp.At-1)
	left.splitOff = append(s.splitOff, SplitOff{Split: sp, State: right})
	*s = *left
}

// TakeSplitOff returns the states split off by the last batch applied and
// forgets them.
func (s *State) TakeSplitOff() []SplitOff {
	out := s.splitOff
	s.splitOff = nil
	return out
}

func (s *State) deploy(d *Deploy) {
	p, err := nfa.CompileNamed(d.Spec, d.Name)
	if err != nil {
		// validated before it was proposed; a spec that no longer compiles
		// (e.g. after an upgrade) is skipped the same way on every replica
		s.counters.PatternFails++
		return
	}
	m := d.configure(nfa.NewMatcher(p))
	i, old := s.find(d.Name)
	rt := &patternRT{deploy: *d, pattern: p, m: m}
	if old == nil {
		s.patterns = append(s.patterns, nil)
		copy(s.patterns[i+1:], s.patterns[i:])
		s.patterns[i] = rt
		return
	}
	rt.draining = old.draining
	rt.counts = old.counts
	switch d.Policy {
	case PolicyDrain:
		old.m.StopStarting()
		if old.m.Keys() > 0 {
			rt.draining = append(rt.draining, &drainingRT{version: old.deploy.Version, m: old.m})
		}
	case PolicyMigrate:
		migrated, _ := nfa.Migrate(old.m, p)
		rt.m = d.configure(migrated)
	}
	for _, dr := range rt.draining { // as a snapshot restores them
		d.configure(dr.m)
	}
	s.patterns[i] = rt
}

// reads reports whether the pattern reads the stream of source, and under
// which of its source names (a derived source stands for the source it
// re-keys).
func (s *State) reads(p *patternRT, source string) (logical string, ok bool) {
	for i, src := range p.deploy.Sources {
		phys := src
		if i < len(p.deploy.Reads) && p.deploy.Reads[i] != "" {
			phys = p.deploy.Reads[i]
		}
		if phys == source {
			return src, true
		}
	}
	return "", false
}

// originKey names the per-key-group position of the origin stream of a
// derived source's events.
func originKey(derived string) string { return derived + "#origin" }

// applyForward re-keys events of source into the derived source: each is
// put in the outbox under the derived stream's subject for its key (by the
// first pattern reading that source, in name order), with an id from its
// origin position, by which the derived source's readers skip a copy.
func (s *State) applyForward(source, derived string, events []Event) {
	var by *patternRT
	for _, p := range s.patterns {
		if _, ok := s.reads(p, derived); ok {
			by = p
			break
		}
	}
	decoded := decodeAll(events)
	for i, e := range events {
		if e.Pos <= s.forwarded[derived] {
			s.counters.Duplicates++
			continue
		}
		s.forwarded[derived] = e.Pos
		if by == nil {
			continue // no pattern reads it any more
		}
		if decoded[i].err != nil {
			s.deadLetter(source, "", e, s.first, decoded[i].err.Error())
			continue
		}
		if err := s.strict[source].Check(decoded[i].ev); err != nil {
			s.deadLetter(source, "", e, s.first, strictReason(source, err))
			continue
		}
		in, keep, err := by.m.Project(nfa.Input{Data: decoded[i].ev, Raw: e.Data, Pos: e.Pos})
		if err != nil {
			s.deadLetter(source, by.deploy.Name, e, s.first, err.Error())
			continue
		}
		if !keep {
			continue
		}
		key, err := by.m.KeyOf(in)
		if err == nil {
			// the derived source's subject is built from the key: one too
			// long for NATS would cut the publishing node off it
			err = keygroup.CheckKeyToken(key)
		}
		if err != nil {
			s.deadLetter(source, by.deploy.Name, e, s.first, err.Error())
			continue
		}
		s.push(ForwardID(derived, e.Pos), derived+"."+keygroup.KeyToken(key), e.Data, s.first)
	}
}

// ForwardID is the id of an event forwarded into a derived source (sent in
// a header): the ingest of the derived source reads the origin position
// back from it.
func ForwardID(derived string, pos uint64) string {
	return "fw-" + derived + "-" + strconv.FormatUint(pos, 10)
}

// ForwardedPos parses ForwardID; ok is false for another id.
func ForwardedPos(derived, id string) (uint64, bool) {
	rest, ok := strings.CutPrefix(id, "fw-"+derived+"-")
	if !ok {
		return 0, false
	}
	p, err := strconv.ParseUint(rest, 10, 64)
	return p, err == nil
}

// Forwarded returns, per derived source, the last origin position this
// shard forwarded (re-keyed).
func (s *State) Forwarded() map[string]uint64 {
	out := make(map[string]uint64, len(s.forwarded))
	for k, v := range s.forwarded {
		out[k] = v
	}
	return out
}

// blockRange returns the key groups of block b that the shard owns, or
// ok = false when it owns none.
func (s *State) blockRange(b int) (first, last int, ok bool) {
	if b < 0 || b >= keygroup.Blocks(s.groups) {
		return 0, 0, false
	}
	first, last = keygroup.BlockKeyGroups(b, s.groups)
	first, last = max(first, s.first), min(last, s.last)
	return first, last, first <= last
}

type decodedEvent struct {
	ev  expr.Event
	err error
}

// decodeAll decodes a batch's events, a large batch on two goroutines:
// decoding is a pure function of each event's bytes, so the result does
// not depend on their timing, and the leader's NATS reads leave part of a
// second core idle while the state machine runs.
// Bounds on one event's bytes. The embedded NATS server takes messages
// of up to 8 MiB, which matches (carrying their events) need; an event
// that large would make a pattern's state grow by megabytes at a time.
const (
	// MaxEventBytes bounds an event: a larger one is dead-lettered
	// naming the bound, and no pattern sees it (nfa.DecodeInput).
	MaxEventBytes = nfa.MaxEventBytes
	// MaxDeadLetterData bounds the part of an event a dead letter
	// carries: a larger event's dead letter has its first bytes as
	// text and its size in "truncated".
	MaxDeadLetterData = 64 << 10
)

func decodeAll(events []Event) []decodedEvent {
	out := make([]decodedEvent, len(events))
	decode := func(from, to int) {
		for i := from; i < to; i++ {
			ev, ref := nfa.DecodeInput(events[i].Data, MaxEventBytes)
			if ref != nil {
				out[i].err = ref
				continue
			}
			out[i].ev = ev
		}
	}
	if len(events) < 64 {
		decode(0, len(events))
		return out
	}
	half := len(events) / 2
	done := make(chan struct{})
	go func() {
		defer close(done)
		decode(half, len(events))
	}()
	decode(0, half)
	<-done
	return out
}

func (s *State) applyEvents(source string, events []Event, ingest int64) {
	// The leader reads the shard's blocks of a source in stream order, so
	// once a batch is applied every key group of the shard has seen all of
	// its events up to the batch's last position, whether it had any: every
	// key group's position advances to it. (Otherwise a key group without
	// events would hold the resume position at the start.)
	defer func() {
		var last uint64
		for _, e := range events {
			if _, _, ok := s.blockRange(e.Block); ok {
				last = max(last, e.Pos)
			}
		}
		if last == 0 {
			return
		}
		for _, pos := range s.positions {
			if pos[source] < last {
				pos[source] = last
			}
		}
	}()
	decoded := decodeAll(events)
	// the ingest time the leader logged bounds how far ahead an event may
	// be; an entry that logged none (before batch version 8) has only the
	// bound against the event time
	arr := nfa.Arrival{Ingest: nfa.NoIngestTime}
	if ingest != 0 {
		arr.Ingest = ingest
	}
	// The block's key groups have applied the source up to different
	// positions only after a restore into another layout; an event at or
	// below all of them is a re-read, one above some of them is checked
	// against its own key group's once its key is known. Positions of the
	// source move only after the batch, so each block's minimum is looked
	// up once per batch.
	var blockSeen [keygroup.MaxBlocks]uint64
	var blockDone uint64 // bit b: blockSeen[b] is known
	var e *Event
	// a forwarded copy is recognised once per event: every pattern
	// reading a derived source has the key it was re-keyed by
	var originKG int
	var originDup bool
	arr.Owns = func(key string) (bool, string) { return s.owns(source, e, key, &originKG, &originDup) }
	strict := s.strict[source]
	for i := range events {
		e = &events[i]
		bf, bl, ok := s.blockRange(e.Block) // ok: 0 <= e.Block < keygroup.MaxBlocks
		if !ok {
			s.counters.Misrouted++
			continue
		}
		seen := blockSeen[e.Block]
		if blockDone&(1<<e.Block) == 0 {
			seen = s.positions[bf-s.first][source]
			for kg := bf + 1; kg <= bl; kg++ {
				seen = min(seen, s.positions[kg-s.first][source])
			}
			blockSeen[e.Block], blockDone = seen, blockDone|1<<e.Block
		}
		if e.Pos <= seen {
			s.counters.Duplicates++
			continue
		}
		s.counters.Events++
		if err := decoded[i].err; err != nil {
			s.deadLetter(source, "", *e, bf, err.Error())
			continue
		}
		if err := strict.Check(decoded[i].ev); err != nil {
			s.deadLetter(source, "", *e, bf, strictReason(source, err))
			continue
		}
		arr.In = nfa.Input{Data: decoded[i].ev, Raw: e.Data, Pos: e.Pos}
		originKG, originDup = -1, false
		s.refused = s.refused[:0]
		for _, p := range s.patterns {
			logical, ok := s.reads(p, source)
			if !ok {
				continue
			}
			arr.Source = logical
			arr.Held = p.stateBytes() - p.m.StateBytes() // its draining versions'
			if p.absent == nil {
				p.absent = newAbsentFields(p.pattern.FieldsRead())
			}
			p.absent.observe(arr.In.Data)
			a, ref := p.m.Admit(&arr)
			if ref != nil {
				switch ref.Kind {
				case nfa.RefusedKeys:
					p.keysRefused++
				case nfa.RefusedStateBytes:
					p.bytesRefused++
				}
				s.refuse(p.deploy.Name, ref.Reason)
			}
			if !a.Moves() {
				continue
			}
			// the pattern's draining versions take what its matcher admitted
			failure := s.emitAll(p, func(m *nfa.Matcher) []nfa.Record {
				if a.Taken() && s.injectFault != nil && s.injectFault(p.deploy.Name, a.Key) {
					panic("injected fault")
				}
				return m.Take(&a)
			})
			if failure != "" {
				s.refuse(p.deploy.Name, failure)
			}
		}
		if len(s.refused) > 0 {
			s.deadLetterAll(source, *e, bf, s.refused)
		}
	}
}

// owns is applyEvents' check of an event's key (nfa.Arrival.Owns): the
// shard takes an event of a key group it owns that it has not applied
// yet, skips one of a neighbour shard's key group in a block they share,
// and refuses one whose key group is in another block (published on
// another key's subject). originKG and originDup carry, across the
// patterns of one event, whether its origin position (a forwarded copy)
// was seen before by its key group.
func (s *State) owns(source string, e *Event, key string, originKG *int, originDup *bool) (take bool, reason string) {
	kg := keygroup.OfKey(key, s.groups)
	if kg < s.first || kg > s.last {
		if keygroup.BlockOf(kg, s.groups) != e.Block {
			// the shard owning the key never reads this block
			s.counters.Misrouted++
			return false, fmt.Sprintf(
				"key %q was published on another key's subject: publish it on %s.%s", key, source, keygroup.KeyToken(key))
		}
		return false, "" // a block shared with a neighbour shard, its event
	}
	if e.Pos <= s.positions[kg-s.first][source] {
		return false, "" // applied before a restore
	}
	if e.OriginPos > 0 {
		// forwarded again (a re-keying shard that lost its place)
		if *originKG != kg {
			pos := s.positions[kg-s.first]
			*originKG, *originDup = kg, e.OriginPos <= pos[originKey(source)]
			if !*originDup {
				pos[originKey(source)] = e.OriginPos
			}
		}
		if *originDup {
			return false, ""
		}
	}
	return true, ""
}

// stateBytes is the raw bytes of the events the pattern's matchers hold,
// its draining versions' too.
func (p *patternRT) stateBytes() int64 {
	n := p.m.StateBytes()
	for _, d := range p.draining {
		n += d.m.StateBytes()
	}
	return n
}

// emitAll runs f on the pattern's matcher and on its draining versions, and
// moves what they produce into the outbox. Should the engine fail (a
// panic: a defect, never an input's fault), every replica fails alike on
// the same entry, and would again on each replay: the pattern's state is
// dropped instead, on every replica alike (a fresh matcher at the same
// watermark, no draining versions), and failure says why for the caller
// to dead-letter; the shard and its other patterns go on.
func (s *State) emitAll(p *patternRT, f func(*nfa.Matcher) []nfa.Record) (failure string) {
	defer func() {
		if r := recover(); r != nil {
			wm := p.m.CurrentWatermark()
			p.m = p.deploy.configure(nfa.NewMatcher(p.pattern))
			p.m.Watermark(wm)
			p.draining = nil
			failure = fmt.Sprintf("pattern %s failed on this entry and its state was dropped: %v", p.deploy.Name, r)
		}
	}()
	s.emit(p, p.deploy.Version, p.run(p.m, f))
	kept := p.draining[:0]
	for _, d := range p.draining {
		s.emit(p, d.version, p.run(d.m, f))
		if d.m.Keys() > 0 {
			kept = append(kept, d)
		}
	}
	p.draining = kept
	return ""
}

// engineFailed dead-letters a pattern's failure (emitAll) on an entry
// that carried no event of it: a watermark or a tick.
func (s *State) engineFailed(p *patternRT, failure string) {
	if failure == "" || len(p.deploy.Sources) == 0 {
		return
	}
	s.counters.DeadLetters++
	p.counts.DeadLetters++
	payload, _ := json.Marshal(struct {
		Source  string `json:"source"`
		Pattern string `json:"pattern"`
		Reason  string `json:"reason"`
	}{p.deploy.Sources[0], p.deploy.Name, failure})
	s.push("fail-"+p.deploy.Name+"-"+strconv.FormatUint(s.nextSeq, 10), DeadLetterSubject(p.deploy.Sources[0]), payload, s.first)
}

func (s *State) emit(p *patternRT, version uint64, recs []nfa.Record) {
	for i := range recs {
		r := &recs[i]
		switch r.Type {
		case "match":
			s.counters.Matches++
		case "timeout":
			s.counters.Timeouts++
		case "late":
			s.counters.Late++
		}
		p.countRecord(r.Type)
		if !p.deploy.Records.has(r.Type) {
			continue
		}
		r.ID = RecordID(p.deploy.Name, version, r)
		payload, _ := r.AppendJSON(nil)
		s.push(r.ID, p.deploy.Subject, payload, keygroup.OfKey(r.Key, s.groups))
	}
}

func (s *State) push(id, subject string, payload []byte, kg int) {
	s.outbox = append(s.outbox, OutRecord{Seq: s.nextSeq, ID: id, Subject: subject, Payload: payload, KeyGroup: kg})
	s.nextSeq++
}

// DeadLetterSubject is where bad events of a source are published.
func DeadLetterSubject(source string) string { return keygroup.DeadLetterRoot + source }

// refusal is one pattern's reason to refuse an event.
type refusal struct {
	Pattern string `json:"pattern"`
	Reason  string `json:"reason"`
}

// refuse notes that pattern refuses the event being applied: the event
// gets one dead letter for all its patterns' refusals (deadLetterAll),
// so that a bad event read by many patterns is not written many times.
func (s *State) refuse(pattern, reason string) {
	s.refused = append(s.refused, refusal{Pattern: pattern, Reason: reason})
}

func (s *State) deadLetter(source, pattern string, e Event, kg int, reason string) {
	s.deadLetterAll(source, e, kg, []refusal{{Pattern: pattern, Reason: reason}})
}

// deadLetterAll publishes one dead letter for an event the patterns of
// refused refuse (at least one): its pattern and reason are the first's,
// and "refusals" lists them all when there are several.
func (s *State) deadLetterAll(source string, e Event, kg int, refused []refusal) {
	s.counters.DeadLetters++
	for _, r := range refused {
		s.countDeadLetter(r.Pattern)
	}
	pattern := refused[0].Pattern
	rec := struct {
		Source    string          `json:"source"`
		Pattern   string          `json:"pattern,omitempty"`
		Position  uint64          `json:"position"`
		Reason    string          `json:"reason"`
		Refusals  []refusal       `json:"refusals,omitempty"`
		Data      json.RawMessage `json:"data,omitempty"`
		Text      string          `json:"text,omitempty"`
		Truncated int             `json:"truncated,omitempty"`
	}{Source: source, Pattern: pattern, Position: e.Pos, Reason: refused[0].Reason}
	if len(refused) > 1 {
		rec.Refusals = refused
	}
	switch {
	case len(e.Data) > MaxDeadLetterData:
		// the start of it, as text: enough to recognise the event, and a
		// bound on what a flood of large bad events writes to the output
		rec.Text, rec.Truncated = strings.ToValidUTF8(string(e.Data[:MaxDeadLetterData]), "\uFFFD"), len(e.Data)
	case json.Valid(e.Data):
		rec.Data = e.Data
	default:
		rec.Text = string(e.Data)
	}
	payload, _ := json.Marshal(rec)
	s.push("dl-"+source+"-"+strconv.FormatUint(e.Pos, 10)+"-"+pattern, DeadLetterSubject(source), payload, kg)
}

// RecordID is a record's deterministic id: a hash of the pattern, its
// version, the record type, the key, the source positions of its events
// and the stages that took them (the same events taken by other stages
// are another match: with optional stages, one event can complete a match
// as the first stage and another as the second), for a timeout the
// timeout time, and the number telling identical records of one step
// apart (Record.Dup). The same match gets the same id on any replica and
// after any failover.
func RecordID(pattern string, version uint64, r *nfa.Record) string {
	h := sha256.New()
	var b []byte
	b = appendString(b, pattern)
	b = binary.AppendUvarint(b, version)
	b = appendString(b, r.Type)
	b = appendString(b, r.Key)
	b = binary.AppendUvarint(b, uint64(len(r.Positions)))
	for _, p := range r.Positions {
		b = binary.AppendUvarint(b, p)
	}
	if len(r.Events) > 0 {
		// the positions are in stage order: the stages and their counts
		// say which stage took which
		b = binary.AppendUvarint(b, uint64(len(r.Events)))
		for _, se := range r.Events {
			b = appendString(b, se.Stage)
			b = binary.AppendUvarint(b, uint64(len(se.Events)))
		}
	}
	if r.Type == "timeout" {
		b = binary.AppendVarint(b, r.TimeoutAt)
	}
	if r.Dup > 0 {
		b = binary.AppendUvarint(b, uint64(r.Dup))
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// String summarises the state for logs.
func (s *State) String() string {
	return fmt.Sprintf("shard[%d-%d] patterns=%d outbox=%d", s.first, s.last, len(s.patterns), len(s.outbox))
}

// SourceClock is what a shard holds of one source's clock for one pattern
// that runs on it (Deploy.Clock): what its own events show and what its
// leader logged of the clock across the shards.
type SourceClock struct {
	Pattern string
	Source  string // the pattern's name for the source
	Read    string // the source read for it (a derived source, re-keyed, or Source)
	// Progress is the watermark this shard's events of the source give
	// (max time − outOfOrderness − 1, never below Clock), and MaxTime the
	// latest of those times (watermark.MinTime for none).
	Progress, MaxTime int64
	// Clock is the source's watermark as logged (OpClock).
	Clock int64
	// IdleTimeout is the pattern's idleTimeout in milliseconds (0: unset).
	IdleTimeout int64
	// Version is the pattern's deployed version: a pattern deleted and
	// deployed again starts its clock anew, and what other shards report
	// of the deployment before is not its clock.
	Version uint64
}

// Clocks lists the clocks of the event-time patterns that run on them,
// by pattern then source.
func (s *State) Clocks() []SourceClock {
	var out []SourceClock
	for _, p := range s.patterns {
		if !p.deploy.Clock || !p.pattern.EventTime() {
			continue
		}
		out = append(out, s.clocksOf(p)...)
	}
	return out
}

// Watermarks lists the clocks of every event-time pattern, as Clocks
// does, and also of those running on their own events (a shard alone):
// their Clock is the watermark those events gave. For people (status,
// metrics); the clock loop reports Clocks only.
func (s *State) Watermarks() []SourceClock {
	var out []SourceClock
	for _, p := range s.patterns {
		if p.pattern.EventTime() {
			out = append(out, s.clocksOf(p)...)
		}
	}
	return out
}

// ClockModes says, per event-time pattern by name, whether it runs on
// its sources' clocks (OpClockMode, Deploy.Clock).
func (s *State) ClockModes() map[string]bool {
	out := map[string]bool{}
	for _, p := range s.patterns {
		if p.pattern.EventTime() {
			out[p.deploy.Name] = p.deploy.Clock
		}
	}
	return out
}

func (s *State) clocksOf(p *patternRT) []SourceClock {
	var idle int64
	if it := p.pattern.Spec().IdleTimeout; it != nil {
		idle = it.Millis
	}
	out := make([]SourceClock, 0, len(p.deploy.Sources))
	for i, src := range p.deploy.Sources {
		read := src
		if i < len(p.deploy.Reads) && p.deploy.Reads[i] != "" {
			read = p.deploy.Reads[i]
		}
		out = append(out, SourceClock{Pattern: p.deploy.Name, Version: p.deploy.Version, Source: src, Read: read,
			Progress: p.m.SourceProgress(src), MaxTime: p.m.SourceMaxTime(src), Clock: p.m.SourceClock(src), IdleTimeout: idle})
	}
	return out
}

// clock applies OpClock: the pattern's matchers (the draining versions
// too) take the source's clock. A clock that does not advance, for a
// pattern not running on the clock or not here, changes nothing.
func (s *State) clock(pattern, source string, t int64) {
	_, p := s.find(pattern)
	if p == nil || !p.deploy.Clock || !slices.Contains(p.deploy.Sources, source) {
		return
	}
	s.engineFailed(p, s.emitAll(p, func(m *nfa.Matcher) []nfa.Record { return m.Clock(source, t) }))
}
