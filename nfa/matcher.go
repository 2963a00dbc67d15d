package nfa

import (
	"fmt"
	"math/bits"
	"slices"
	"sort"

	"github.com/cepcluster/cep/nfa/expr"
	"github.com/cepcluster/cep/nfa/sqleval"
	"github.com/cepcluster/cep/watermark"
)

// Input is one event: its decoded JSON object and its original bytes (which
// are what output records carry).
type Input struct {
	Data expr.Event
	Raw  []byte
	// Pos is the event's position in its source (e.g. a stream sequence). It
	// is carried into Record.Positions, from which cluster mode derives
	// deterministic record ids. Offline it is the input line number.
	Pos uint64
}

// Stats are a Matcher's counters. They are part of neither output nor state.
type Stats struct {
	Events          uint64 // events accepted (not late)
	Late            uint64
	Matches         uint64
	Timeouts        uint64
	ConditionErrors uint64 // condition evaluations that failed and counted as false
	EmitErrors      uint64
	// Dropped counts partial matches discarded because their key held
	// more than MaxPartialMatches (see there).
	Dropped uint64
	// StepCapped counts the events whose step on their key reached
	// MaxStepsPerEvent (see there).
	StepCapped uint64
}

// DefaultMaxStepsPerEvent is a new Matcher's MaxStepsPerEvent.
const DefaultMaxStepsPerEvent = 2 * DefaultMaxPartialMatches

// DefaultMaxPartialMatches is a new Matcher's MaxPartialMatches.
const DefaultMaxPartialMatches = 100_000

// Matcher runs one Pattern over one stream of events, for every key. It is
// Flink's CepOperator in one value: events are buffered per key until the
// watermark passes them, then fed to the key's automaton in event-time order
// (ties in arrival order); windows time out as the watermark advances.
//
// A Matcher is a pure step function: it does no IO, reads no clock and starts
// no goroutines; time comes only from event timestamps, watermarks and the
// processing-time ticks that the caller passes in. It is not safe for
// concurrent use: one owner drives it.
type Matcher struct {
	p     *Pattern
	keys  map[string]*keyState
	gen   *watermark.Generator
	wm    int64 // current event-time watermark, or processing time
	timer timerHeap
	stats Stats
	// stateBytes is the raw bytes of the events the keys hold, buffered
	// or queued (StateBytes): each key adds and subtracts its own.
	stateBytes int64

	cfg Config // modes: set when built (NewMatcherWith), or all at once (Configure)

	// several sources: one generator per source, combined by the aligner
	// (min of the sources' watermarks, idle sources left out), with
	// processing time from logged ticks
	srcGen  map[string]*watermark.Generator
	aligner *watermark.Aligner
	procNow int64

	noStarts  bool   // StopStarting was called
	arrivals  uint64 // events queued so far (their arrival numbers)
	drainFrom uint64 // events arriving from this number on start no partial match

	firstCondErr string      // the first condition error (FirstErrors)
	firstEmitErr string      // the first emit error
	stateVer     byte        // the encoding version of the header the matcher was restored from (readHeader; 0: none)
	freeKeys     []*keyState // keys whose state ended, for new keys to reuse

	sc scratch // what one call works with: none of it is state

	tr *tracer // nil: not traced (SetTracer)

	test testKnobs
}

// scratch is what a Matcher works with while it takes one event or
// advances time: buffers kept from call to call so that a step allocates
// nothing, memos keyed by a generation that each event bumps (nextGen),
// and the event being processed (beginEvent, endEvent). None of it is
// state: a matcher restored without it continues alike.
type scratch struct {
	cacheGen      []uint32
	cacheVal      []bool
	fieldGen      []uint32 // per field slot (leafInfo.field): the event generation fieldVal is for
	fieldVal      []any
	fieldErr      []error
	guardGen      []uint32 // per leaf: the event generation guardFalse is for
	guardFalse    []bool
	ctxGen        uint32   // one per partial match tested against an event
	memoGen       []uint32 // per leaf: the ctxGen memoVal is for
	memoVal       []bool
	nodeMemo      []nodeMemo     // per leaf
	ctxEvents     [][]expr.Event // per stage: the events of the partial match under test
	pathBuf       []*node
	toNodes       []*node   // advanceTime: the events of the timed-out partial matches
	tosBuf        []timeout // advanceTime's timeouts
	gen32         uint32
	stateStack    []*cstate
	graphBuf      []*transition // decisionGraph's edges
	graphs        []graphMemo   // per state: its decision graph for the current event, when eventOnly
	probing       bool          // passesBy is evaluating: a condition error ends it, uncounted
	probeErr      bool
	passGen       uint32 // passesBy's answer is for the event of this generation (gen32)
	passVal       bool
	room          recordRoom // the lists inside the records of a call
	dupKeys       []uint64   // numberDuplicates' scratch
	capKeys       []qent     // capPartial's scratch
	steps         int        // the current event's steps on its key (MaxStepsPerEvent)
	stepCapped    bool       // the current event's step reached MaxStepsPerEvent
	prunedPartial bool       // a skip strategy dropped partial matches during processEvent
	out           []Record   // the records of a call (startCall)
	ctx           evalCtx
	resBuf        []*compState
	entBuf        [2][]qent     // processEvent's new and completed queues
	stageSlot     []int32       // stageEvents scratch
	sqlRows       []sqleval.Row // definePredicate scratch
	stageCount    []int
	curEv         event  // the event being processed
	curEvHeap     *event // its stored copy, once a partial match took it
	group         []queued
	mayStart      bool       // the event being processed may start partial matches
	seq           seqScratch // the buffers of the keys under Pattern.seq
}

// The scratch's resets, each where what it holds starts anew.

// beginCall starts a call that returns records: the records of the
// previous call and the lists cut for them are reused from here on.
func (s *scratch) beginCall() {
	s.out = s.out[:0]
	s.room.reset()
}

// beginEvent makes ev the event being processed.
func (s *scratch) beginEvent(ev event, mayStart bool) {
	s.mayStart, s.curEv, s.curEvHeap = mayStart, ev, nil
}

// endEvent lets the processed event go (its data is not kept past it).
func (s *scratch) endEvent() { s.curEv, s.curEvHeap = event{}, nil }

// beginStep starts counting a step's work on a key (MaxStepsPerEvent):
// an event's, or the completions a time advance reads.
func (s *scratch) beginStep() { s.steps, s.stepCapped = 0, false }

// newScratch sizes the memos for p's conditions and states.
func newScratch(p *Pattern) scratch {
	return scratch{
		graphs:     make([]graphMemo, len(p.states)),
		cacheGen:   make([]uint32, len(p.leaves)),
		cacheVal:   make([]bool, len(p.leaves)),
		guardGen:   make([]uint32, len(p.leaves)),
		guardFalse: make([]bool, len(p.leaves)),
		memoGen:    make([]uint32, len(p.leaves)),
		memoVal:    make([]bool, len(p.leaves)),
		nodeMemo:   make([]nodeMemo, len(p.leaves)),
		fieldGen:   make([]uint32, p.fieldSlots()),
		fieldVal:   make([]any, p.fieldSlots()),
		fieldErr:   make([]error, p.fieldSlots()),
	}
}

// testKnobs are what tests set to switch a fast path off, or to try it
// sooner, so that its result can be checked against the reference, and
// what they read to see that a fast path ran. The engine only reads the
// knobs and bumps the counts; only tests (export_test.go) set them, which
// internal/lint checks.
type testKnobs struct {
	noPassBy     bool  // always visit the partial matches, offer them one by one, look at each for timeouts
	noBump       bool  // lock and release for every new version (no bumpsInPlace)
	noExtend     bool  // copy every take's version (no extension in place)
	noLazyRows   bool  // a DEFINE condition reads every row of the partial match first
	noEvCache    bool  // walk the path on every events() (the reference for evalCtx's cache)
	noFieldCache bool  // evaluate every condition by itself
	shareNodes   bool  // one node per event and stage, and records listed by stage, even when Pattern.ownPaths
	noSeq        bool  // the general step for every key, also under Pattern.seq
	passFrom     int   // partial matches from which passesBy is tried (passByFrom unless a test lowers it)
	maxTreeID    int32 // where keys under Pattern.seq number their trees from 0 again (0: the constant maxTreeID)

	evCacheHits  int // events() answered from a partial match's cache
	bumped       int // versions increased in place (bumpsInPlace)
	extended     int // versions extended in place
	nodeMemoHits int // conditions answered from nodeMemo
	passedBy     int // events passesBy let by
}

// NewMatcher returns a Matcher for p with no state and DefaultConfig.
func NewMatcher(p *Pattern) *Matcher { return NewMatcherWith(p, DefaultConfig()) }

// NewMatcherWith returns a Matcher for p with no state that runs as cfg
// says.
func NewMatcherWith(p *Pattern, cfg Config) *Matcher {
	m := &Matcher{
		p:    p,
		keys: map[string]*keyState{},
		gen:  watermark.NewGenerator(p.ooo),
		wm:   watermark.MinTime,
		cfg:  cfg,
		test: testKnobs{passFrom: passByFrom},
		sc:   newScratch(p),
	}
	if p.timeFn == nil {
		m.wm = 0 // processing time starts at 0 and moves with ticks
	}
	if srcs := p.spec.Source; p.timeFn != nil && len(srcs) > 1 {
		m.srcGen = map[string]*watermark.Generator{}
		for _, s := range srcs {
			m.srcGen[s] = watermark.NewGenerator(p.ooo)
		}
		var idle, drift int64
		if p.spec.IdleTimeout != nil {
			idle = p.spec.IdleTimeout.Millis
		}
		if p.spec.MaxDrift != nil {
			drift = p.spec.MaxDrift.Millis
		}
		m.aligner = watermark.NewAligner(srcs, idle, drift)
	}
	return m
}

// MultiSource reports whether the pattern aligns several sources: feed it
// with EventFrom and Tick.
func (m *Matcher) MultiSource() bool { return m.aligner != nil }

// EventFrom feeds an event of one of several sources: its source's
// watermark advances, and the pattern's watermark is the minimum over the
// sources that are not idle. An unknown source is treated as the pattern's
// only source.
func (m *Matcher) EventFrom(source, key string, ts int64, in Input) []Record {
	gen := m.srcGen[source]
	if gen == nil || m.aligner == nil {
		return m.EventAt(key, ts, in)
	}
	m.startCall()
	m.eventAt(key, ts, in, false) // the source's generator moves the watermark
	m.observeAligned(gen, source, ts)
	return m.sc.out
}

// observeAligned moves source's watermark to ts and the pattern's to the
// minimum over the sources that are not idle.
func (m *Matcher) observeAligned(gen *watermark.Generator, source string, ts int64) {
	gen.Observe(ts)
	if m.cfg.Clocked {
		return // the source's clock, not its events, moves the aligner (Clock)
	}
	m.observeSource(source, gen.Current())
	if wm := m.alignedWatermark(); wm > m.wm {
		m.gen.Advance(wm)
		m.advance(wm)
	}
}

// observeSource reports a source's watermark to the aligner at the
// processing time. Before the first tick there is none (procNow is 0):
// the watermark is recorded, but the aligner's clock of idleness starts
// only with a real time, or the first tick would find every source silent
// since 1970, count them idle and let one source run ahead of the others.
func (m *Matcher) observeSource(source string, wm int64) {
	if m.procNow == 0 {
		m.aligner.ObserveWatermark(source, wm)
		return
	}
	m.aligner.Observe(source, wm, m.procNow)
}

// alignedWatermark is the aligner's combined watermark at the processing
// time, or, before the first tick, without one (observeSource).
func (m *Matcher) alignedWatermark() int64 {
	if m.procNow == 0 {
		return m.aligner.WatermarkUntimed()
	}
	return m.aligner.Watermark(m.procNow)
}

// ObserveFrom moves the watermark as EventFrom would for an event of
// source at ts, without taking the event: for an event refused before it
// reached the pattern (a bound on keys), whose time still counts, so that
// refusing events does not hold time back for the keys that have state.
func (m *Matcher) ObserveFrom(source string, ts int64) []Record {
	m.startCall()
	if m.p.timeFn == nil {
		return m.sc.out
	}
	if gen := m.srcGen[source]; gen != nil && m.aligner != nil {
		m.observeAligned(gen, source, ts)
		return m.sc.out
	}
	m.observe(ts, m.cfg.AutoWatermark)
	return m.sc.out
}

// observe moves the watermark with an event at ts: the pattern's
// generator, and with it the watermark when auto unless it is Clocked.
func (m *Matcher) observe(ts int64, auto bool) {
	if m.cfg.Clocked {
		if m.aligner == nil { // several sources: their own generators (observeAligned)
			m.gen.Observe(ts)
		}
		return
	}
	if auto {
		if wm, adv := m.gen.Observe(ts); adv {
			m.advance(wm)
		}
	}
}

// Clock moves the watermark of source (the pattern's name for it; "" for
// its only source) to the source's clock across shards, wm: for one
// source, the pattern's watermark; for several, that source's watermark
// in the alignment. A value that does not advance is ignored.
func (m *Matcher) Clock(source string, wm int64) []Record {
	m.startCall()
	if m.p.timeFn == nil {
		return m.sc.out
	}
	if gen := m.srcGen[source]; gen != nil && m.aligner != nil {
		gen.Advance(wm)
		m.observeSource(source, wm)
		if c := m.alignedWatermark(); c > m.wm {
			m.gen.Advance(c)
			m.advance(c)
		}
		return m.sc.out
	}
	// the generator takes the clock (the future-skew bound judges against
	// it); the watermark takes the clock only, never this shard's progress
	m.gen.Advance(wm)
	m.advance(wm)
	return m.sc.out
}

// Unclock stops taking the clock across shards (Clocked false) and moves
// the watermark at once to what the events taken show, as if they had
// come without the clock: a shard left alone (a restore into fewer
// shards) must not wait for an event more to emit what those already
// read complete.
func (m *Matcher) Unclock() []Record {
	m.startCall()
	if !m.cfg.Clocked {
		return m.sc.out
	}
	m.cfg.Clocked = false
	if m.p.timeFn == nil {
		return m.sc.out
	}
	if m.aligner != nil {
		for _, src := range m.aligner.Sources() {
			if g := m.srcGen[src]; g != nil && g.MaxTimestamp() != watermark.MinTime {
				m.observeSource(src, g.Current())
			}
		}
		if wm := m.alignedWatermark(); wm > m.wm {
			m.gen.Advance(wm)
			m.advance(wm)
		}
		return m.sc.out
	}
	if wm := m.gen.Current(); m.cfg.AutoWatermark && wm > m.wm {
		m.advance(wm)
	}
	return m.sc.out
}

// SourceProgress is the event time the events of source (the pattern's
// name for it; "" for its only source) taken here have shown: the
// watermark they give (max time − outOfOrderness − 1), never below the
// source's clock. MinTime before any.
func (m *Matcher) SourceProgress(source string) int64 {
	if g := m.srcGen[source]; g != nil {
		return g.Current()
	}
	return m.gen.Current()
}

// SourceClock is the source's watermark as logged (Clock): what
// SourceProgress is combined into.
func (m *Matcher) SourceClock(source string) int64 {
	if m.aligner != nil && m.srcGen[source] != nil {
		return m.aligner.SourceWatermark(source)
	}
	return m.wm
}

// SourceMaxTime is the latest event time of source taken here (MinTime
// before any).
func (m *Matcher) SourceMaxTime(source string) int64 {
	if g := m.srcGen[source]; g != nil {
		return g.MaxTimestamp()
	}
	return m.gen.MaxTimestamp()
}

// Tick advances processing time: a processing-time pattern's clock, or, for
// several sources, the clock that decides which sources are idle.
func (m *Matcher) Tick(now int64) []Record {
	if m.p.timeFn == nil {
		return m.Watermark(now)
	}
	m.startCall()
	if now > m.procNow {
		m.procNow = now
	}
	if m.aligner != nil {
		if wm := m.alignedWatermark(); wm > m.wm {
			m.gen.Advance(wm)
			m.advance(wm)
		}
	}
	return m.sc.out
}

// Paused reports whether reading a source should pause because its
// watermark runs more than maxDrift ahead of the others (alignment).
func (m *Matcher) Paused(source string) bool {
	if m.aligner == nil || m.srcGen[source] == nil {
		return false
	}
	if m.cfg.Clocked {
		// this shard's own progress of the source (its split, in Flink's
		// terms) against the pattern's watermark: the logged clock
		// trails the events read by a report's round trip, so each source
		// counts at its own progress here (which has taken its clock)
		drift := m.aligner.MaxDrift()
		if drift == 0 {
			return false
		}
		parts := make([]watermark.Part, 0, len(m.srcGen))
		for _, s := range m.aligner.Sources() {
			parts = append(parts, watermark.Part{Watermark: m.srcGen[s].Current(), Idle: m.aligner.Idle(s, m.procNow)})
		}
		w, _ := watermark.Combine(parts)
		g := m.srcGen[source].Current()
		return g > w && uint64(g)-uint64(w) > uint64(drift)
	}
	return m.aligner.Paused(source, m.procNow)
}

// Pattern returns the compiled pattern.
func (m *Matcher) Pattern() *Pattern { return m.p }

// FirstErrors describes the first condition evaluation that failed (the
// expression and the error) and the first emitted field that failed (its
// name and the error), each "" until one does: what Stats.ConditionErrors
// and Stats.EmitErrors count, for telling a person why. A condition
// reading a field an event lacks (a typo, or events of several shapes)
// fails, and a failed condition is false: a pattern can match nothing
// without any other sign.
func (m *Matcher) FirstErrors() (condition, emit string) { return m.firstCondErr, m.firstEmitErr }

func (m *Matcher) emitFailed(field string, err error) {
	m.stats.EmitErrors++
	if m.firstEmitErr == "" {
		m.firstEmitErr = oneLine(fmt.Sprintf("%s: %v", field, err))
	}
}

// Stats returns the counters.
func (m *Matcher) Stats() Stats { return m.stats }

// CurrentWatermark is the event-time watermark (or processing time).
func (m *Matcher) CurrentWatermark() int64 { return m.wm }

// Keys is the number of keys holding state.
func (m *Matcher) Keys() int { return len(m.keys) }

// HasKey reports whether key holds state (a key whose state empties is
// dropped: it no longer counts).
func (m *Matcher) HasKey(key string) bool { return m.keys[key] != nil }

// KeyState reports, for one key, the number of partial matches that hold
// events and the number of events stored (shared buffer plus those waiting
// for the watermark).
func (m *Matcher) KeyState(key string) (partialMatches, bufferedEvents int) {
	ks := m.keys[key]
	if ks == nil {
		return 0, 0
	}
	return ks.partialCount(), ks.bufferedCount() + ks.queue.Len()
}

// Totals sums KeyState over all keys.
func (m *Matcher) Totals() (partialMatches, bufferedEvents int) {
	for _, ks := range m.keys {
		p, b := ks.partialCount(), ks.bufferedCount()+ks.queue.Len()
		partialMatches += p
		bufferedEvents += b
	}
	return
}

// Project applies the pattern's input projection (a MATCH_RECOGNIZE query
// reading FROM a subquery): it returns the event the pattern sees, or
// keep=false for an event the subquery's WHERE filters out. Callers that use
// KeyOf, TimeOf and EventAt apply it first; Event does.
func (m *Matcher) Project(in Input) (out Input, keep bool, err error) {
	if m.p.project == nil {
		return in, true, nil
	}
	d, keep, err := m.p.project(in.Data)
	if err != nil || !keep {
		return Input{}, keep, err
	}
	in.Data = d
	return in, true, nil
}

// KeyOf evaluates the pattern's key expression ("" without one).
func (m *Matcher) KeyOf(in Input) (string, error) {
	if m.p.keyFn == nil {
		return "", nil
	}
	return m.p.keyFn(in.Data)
}

// TimeOf evaluates the pattern's time expression. Without one, it returns
// the current processing time.
func (m *Matcher) TimeOf(in Input) (int64, error) {
	if m.p.timeFn == nil {
		return m.wm, nil
	}
	return m.p.timeFn(in.Data)
}

// Event feeds one event (Offer, its ingest time not known). It returns
// the records produced (which stay valid until the next call: the slice
// and the lists inside the records are reused then); an error (a
// *Refusal) means the event's key or time could not be computed or its
// time is refused (CheckTime), and nothing changed, or that it is over a
// bound of Config on state, and only its time was observed.
func (m *Matcher) Event(in Input) ([]Record, error) {
	recs, ref := m.Offer(&Arrival{In: in, Ingest: NoIngestTime})
	if ref != nil {
		return recs, ref
	}
	return recs, nil
}

// EventAt feeds one event whose key and time are already known.
func (m *Matcher) EventAt(key string, ts int64, in Input) []Record {
	m.startCall()
	m.eventAt(key, ts, in, m.cfg.AutoWatermark)
	return m.sc.out
}

// eventAt takes one event into m.sc.out; auto: the event moves the
// pattern's watermark (observe), unless the matcher is Clocked.
func (m *Matcher) eventAt(key string, ts int64, in Input, auto bool) {
	if m.p.timeFn == nil {
		// processing time: no buffering, the event is processed now
		ks := m.keyState(key)
		m.stats.Events++
		m.timeAdvance(ks, m.wm)
		m.processOne(ks, m.wm, in, !m.noStarts)
		m.reschedule(ks)
		return
	}
	if ts <= m.wm {
		m.stats.Late++
		if m.tr != nil {
			m.traceArrival(TraceLate, key, ts, in)
		}
		m.sc.out = append(m.sc.out, Record{Type: "late", Pattern: m.p.spec.Name, Key: key, Event: in.Raw, Positions: []uint64{in.Pos}})
		return
	}
	// a draining matcher has nothing to finish for a key without state, but
	// the event still moves its watermark
	if !m.noStarts || m.keys[key] != nil {
		m.stats.Events++
		ks := m.keyState(key)
		ks.queue.Push(ts, queued{ts: ts, data: in.Data, raw: in.Raw, pos: in.Pos, arr: m.arrivals})
		ks.addBytes(int64(len(in.Raw)))
		m.arrivals++
		if ks.hidx < 0 || ts < ks.due {
			m.reschedule(ks)
		}
		if m.tr != nil {
			m.traceArrival(TraceHeld, key, ts, in)
		}
	}
	m.observe(ts, auto)
}

// Watermark advances event time (or processing time, for a pattern without
// a time expression) to wm and returns what that produces. A watermark that
// does not advance is ignored.
func (m *Matcher) Watermark(wm int64) []Record {
	m.startCall()
	if m.p.timeFn != nil {
		m.gen.Advance(wm)
		wm = m.gen.Current()
	}
	m.advance(wm)
	return m.sc.out
}

// StopStarting makes the matcher finish the partial matches it has without
// starting new ones: the old version of a pattern drains this way after an
// update. Keys whose partial matches have all ended are dropped, so Keys()
// reaches 0 when draining is complete.
func (m *Matcher) StopStarting() {
	if m.noStarts {
		return
	}
	m.noStarts = true
	m.drainFrom = m.arrivals
	// events that arrived before this point but still wait for the
	// watermark belong to the old version: they may still start partial
	// matches, so a key keeps its start states until they are processed
	for _, k := range m.SortedKeys() {
		ks := m.keys[k]
		ks.preDrain = ks.queue.Len()
		if ks.preDrain == 0 {
			m.dropStarts(ks)
		}
	}
}

func (m *Matcher) dropStarts(ks *keyState) {
	if ks.seq != nil {
		ks.seq.start = false
	}
	ks.partial.removeIf(func(c *compState) bool { return m.p.states[c.state].start })
	m.reschedule(ks)
}

// Draining reports whether StopStarting was called.
func (m *Matcher) Draining() bool { return m.noStarts }

// Finish ends a bounded input: every buffered event is processed and, when
// final is true, time advances to +infinity, so partial matches with a window
// time out (and notFollowedBy-at-end matches complete).
func (m *Matcher) Finish(final bool) []Record {
	m.startCall()
	if m.p.timeFn != nil && m.gen.MaxTimestamp() > m.wm {
		m.gen.Advance(m.gen.MaxTimestamp())
		m.advance(m.gen.Current())
	}
	if final {
		if m.p.timeFn != nil {
			m.gen.Advance(watermark.MaxTime)
		}
		m.advance(watermark.MaxTime)
	}
	return m.sc.out
}

func (m *Matcher) keyState(key string) *keyState {
	ks := m.keys[key]
	if ks == nil {
		if n := len(m.freeKeys); n > 0 {
			ks = m.freeKeys[n-1]
			m.freeKeys = m.freeKeys[:n-1]
			ks.key = key
			ks.init(m.p)
		} else {
			ks = newKeyState(m.p, key)
		}
		if m.noStarts {
			ks.partial.a = ks.partial.a[:0]
		}
		if m.seqOn() {
			if ks.seq == nil {
				ks.seq, m.sc.seq.spare = m.sc.seq.spare, nil
				if ks.seq == nil {
					ks.seq = &seqKey{}
				}
			}
			ks.seq.reset(m.p.seq, m.treeLimit())
			ks.seq.start = !m.noStarts
			ks.partial.a = ks.partial.a[:0]
		}
		ks.acct = &m.stateBytes
		m.keys[key] = ks
	}
	return ks
}

// StateBytes is the raw bytes of the events the matcher holds: those its
// keys' partial and completed matches keep (each event once per key,
// however many partial matches share it) and those waiting for the
// watermark. It follows from the state alone — a restored matcher
// counts the same — and costs nothing to read, so a caller can bound a
// pattern's state by it on every event.
func (m *Matcher) StateBytes() int64 { return m.stateBytes }

// adopt makes a key built outside keyState (restored, migrated) one of
// the matcher's, counting its bytes.
func (m *Matcher) adopt(ks *keyState) {
	ks.nBytes = 0
	for _, ev := range ks.bufferedEvents() {
		ks.nBytes += int64(len(ev.raw))
	}
	ks.queue.Items(func(_ int64, q queued) { ks.nBytes += int64(len(q.raw)) })
	ks.acct = &m.stateBytes
	m.stateBytes += ks.nBytes
	m.keys[ks.key] = ks
}

// seqOn reports whether keys are run under Pattern.seq (not with the
// tests' switches for the general step).
func (m *Matcher) seqOn() bool {
	return m.p.seq != nil && !m.test.noSeq && !m.test.shareNodes && !m.visitAll() && !m.test.noBump
}

// visitAll reports whether every partial match is visited on every event
// (no pass-by): while tracing, so that each is reported, or for tests.
func (m *Matcher) visitAll() bool {
	return m.test.noPassBy || m.tr != nil
}

func (m *Matcher) advance(wm int64) {
	if wm <= m.wm {
		return
	}
	m.wm = wm
	for len(m.timer) > 0 && m.timer[0].due <= wm {
		m.fire(m.timer.pop(), wm)
	}
}

// fire runs a key up to watermark wm: Flink's CepOperator.onEventTime.
func (m *Matcher) fire(ks *keyState, wm int64) {
	for ks.queue.Len() > 0 {
		t, _ := ks.queue.MinTime()
		if t > wm {
			break
		}
		m.timeAdvance(ks, t)
		if m.p.tieLess == nil {
			ks.queue.PopUpTo(t, func(ts int64, q queued) {
				m.processQueued(ks, ts, q)
			})
			continue
		}
		// MATCH_RECOGNIZE: further ORDER BY columns order events of equal time
		group := m.sc.group[:0]
		ks.queue.PopUpTo(t, func(ts int64, q queued) { group = append(group, q) })
		sort.SliceStable(group, func(i, j int) bool { return m.p.tieLess(group[i].data, group[j].data) })
		for _, q := range group {
			m.processQueued(ks, t, q)
		}
		clear(group)
		m.sc.group = group[:0]
	}
	m.timeAdvance(ks, wm)
	m.reschedule(ks)
}

// processQueued processes an event that waited for the watermark.
func (m *Matcher) processQueued(ks *keyState, ts int64, q queued) {
	ks.addBytes(-int64(len(q.raw)))
	if !m.noStarts {
		m.processOne(ks, ts, Input{Data: q.data, Raw: q.raw, Pos: q.pos}, true)
		return
	}
	pre := q.arr < m.drainFrom
	m.processOne(ks, ts, Input{Data: q.data, Raw: q.raw, Pos: q.pos}, pre)
	if pre {
		if ks.preDrain--; ks.preDrain == 0 {
			m.dropStarts(ks)
		}
	}
}

func (m *Matcher) processOne(ks *keyState, ts int64, in Input, mayStart bool) {
	m.sc.beginEvent(event{order: ks.nextOrder, ts: ts, data: in.Data, raw: in.Raw, pos: in.Pos}, mayStart)
	ks.nextOrder++
	from := len(m.sc.out)
	if m.tr != nil {
		m.traceEvent(ks, &m.sc.curEv)
		m.tr.done = m.tr.done[:0]
	}
	for _, p := range m.processEvent(ks, &m.sc.curEv) {
		m.emitMatch(ks, p)
	}
	m.numberDuplicates(from)
	if m.tr != nil {
		m.traceMatches(ks, from)
	}
	m.sc.endEvent()
}

// deadlineOf is when a partial match times out (maxInt64: never).
func (m *Matcher) deadlineOf(e *qent) int64 {
	st := m.p.states[e.state]
	if st.start {
		return maxInt64
	}
	// a partial match outside a start state holds events: e.ts is its
	// start time
	due := int64(maxInt64)
	if m.p.windowTime > 0 {
		due = satAdd(e.ts, m.p.windowTime)
	}
	if st.hasWindow && st.window > 0 {
		due = min(due, satAdd(e.cs.prevTs, st.window))
	}
	return due
}

// recomputeDeadline sets ks.deadline to the earliest time a partial match
// of the key times out. processEvent keeps it so as it rebuilds the
// partial matches (recomputing only after a skip strategy pruned some), and
// so does timeAdvance after timeouts.
func (m *Matcher) recomputeDeadline(ks *keyState) {
	if ks.seq != nil {
		ks.deadline = m.seqDeadline(ks)
		return
	}
	due := int64(maxInt64)
	if m.p.hasWindows {
		for i := range ks.partial.a {
			due = min(due, m.deadlineOf(&ks.partial.a[i]))
		}
	}
	ks.deadline = due
}

// startCall begins a call that returns records: the records of the
// previous call and the lists cut for them are reused from here on.
func (m *Matcher) startCall() { m.sc.beginCall() }

func (m *Matcher) timeAdvance(ks *keyState, now int64) {
	if !m.p.hasWindows || now < ks.deadline {
		return // nothing can time out yet
	}
	from := len(m.sc.out)
	defer func() {
		m.numberDuplicates(from)
		if m.tr != nil {
			m.traceMatches(ks, from)
		}
	}()
	if ks.seq != nil {
		matches, tos := m.seqAdvanceTime(ks, now)
		ks.deadline = m.seqDeadline(ks)
		m.emitExpired(ks, matches, tos)
		return
	}
	m.expire(ks, now)
	if ks.deadline <= now && !ks.partial.unsorted {
		// Cannot happen while the queue's sorted flag is right. Were it
		// wrong, advanceTime would have looked at too short a prefix, and
		// the key, due again at once, would be fired for ever: look at
		// every partial match instead.
		ks.partial.unsorted = true
		m.expire(ks, now)
	}
}

// expire is timeAdvance's advanceTime: it emits the matches completed and
// the partial matches timed out at time now.
func (m *Matcher) expire(ks *keyState, now int64) {
	matches, tos := m.advanceTime(ks, now)
	m.recomputeDeadline(ks)
	m.emitExpired(ks, matches, tos)
}

// emitExpired emits what advancing time ended: the matches it let go and
// then the partial matches timed out (their events in m.sc.toNodes).
func (m *Matcher) emitExpired(ks *keyState, matches []path, tos []timeout) {
	for _, p := range matches {
		m.emitMatch(ks, p)
	}
	n := len(m.sc.toNodes)
	if !m.reportsTimeouts() {
		// counted only: advanceTime collected no events for them
		m.stats.Timeouts += uint64(len(tos))
		tos, n = nil, 0
	}
	// the records' lists are cut from three arrays shared by all of them
	raws, pos, stages := m.sc.room.cut(n)
	for _, t := range tos {
		m.stats.Timeouts++
		p := path(m.sc.toNodes[t.from:t.to])
		r := Record{Type: "timeout", Pattern: m.p.spec.Name, Key: ks.key, TimeoutAt: t.at,
			Events: m.stageEventsIn(p, stages, raws[t.from:t.to]), Positions: positionsIn(p, pos[t.from:t.to])}
		stages = stages[len(r.Events):]
		if len(p) > 0 {
			r.Start = p[0].ev.ts
		}
		if m.p.rowFn != nil {
			// a query's measures over the rows the partial match has
			r.Fields = m.p.rowFn(m, p)
		}
		m.sc.out = append(m.sc.out, r)
	}
	clear(m.sc.toNodes)
	m.sc.toNodes = m.sc.toNodes[:0]
}

// reportsTimeouts reports whether timed-out partial matches become
// records: not for MATCH_RECOGNIZE, which reports none unless asked to
// (SHOW TIMEOUT MATCHES), nor when the caller does not want them.
func (m *Matcher) reportsTimeouts() bool {
	return m.cfg.ReportTimeouts && (!m.p.sql || m.p.sqlTimeouts)
}

// numberDuplicates numbers records of one step that are identical (Flink
// can complete or time out equal partial matches through different
// branches at once): Record.Dup tells them apart, deterministically, so
// that ids derived from the content stay unique.
func (m *Matcher) numberDuplicates(from int) {
	if len(m.sc.out)-from < 2 {
		return
	}
	recs := m.sc.out[from:]
	if len(recs) <= 8 {
		for i := 1; i < len(recs); i++ {
			for j := i - 1; j >= 0; j-- {
				if recs[j].sameAs(&recs[i]) {
					recs[i].Dup = recs[j].Dup + 1
					break
				}
			}
		}
		return
	}
	// many records at once (timeouts of a long pattern): order them by a
	// hash of what sameAs compares (ties by position), so that only
	// records with equal hashes are compared and the numbering stays
	// O(n log n). The position takes the hash's low bits, and the word is
	// sorted as a number.
	mask := uint64(1)<<bits.Len(uint(len(recs)-1)) - 1
	hs := m.sc.dupKeys[:0]
	for i := range recs {
		hs = append(hs, recs[i].identityHash()&^mask|uint64(i))
	}
	slices.Sort(hs)
	for k := 1; k < len(hs); k++ {
		r := &recs[hs[k]&mask]
		for j := k - 1; j >= 0 && hs[j]&^mask == hs[k]&^mask; j-- {
			if o := &recs[hs[j]&mask]; o.sameAs(r) {
				r.Dup = o.Dup + 1
				break
			}
		}
	}
	m.sc.dupKeys = hs[:0]
}

// reschedule computes when the key next needs attention, or drops its state
// when it holds nothing.
func (m *Matcher) reschedule(ks *keyState) {
	// the key's deadline is exact here (processEvent, advanceTime and
	// restoring keep it so): the order in which keys fire decides the order
	// of records, and it must follow from the state alone (a replica
	// restored from a snapshot fires like the others)
	due := ks.deadline
	if ks.queue.Len() > 0 {
		qmin, _ := ks.queue.MinTime()
		due = min(due, qmin)
	}
	if due == maxInt64 && ks.queue.Len() == 0 {
		m.timer.remove(ks)
		if ks.idle() {
			delete(m.keys, ks.key)
			ks.gen++
			if len(m.freeKeys) < 1024 {
				m.freeKeys = append(m.freeKeys, ks)
			}
		}
		return
	}
	m.timer.set(ks, due)
}

// satAdd adds a duration to an event time, saturating (watermark.AddSat).
func satAdd(a, b int64) int64 { return watermark.AddSat(a, b) }

// timerHeap orders the scheduled keys by due time, then by key, so that the
// order in which keys fire (and so the order of output records) is
// deterministic. Each key is in it at most once (keyState.hidx is its
// index, -1 when absent) and is moved in place when its due time changes.
type timerHeap []*keyState

func (h timerHeap) less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].key < h[j].key
}

func (h timerHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}

func (h timerHeap) up(k int) {
	for k > 0 {
		p := (k - 1) / 2
		if !h.less(k, p) {
			break
		}
		h.swap(k, p)
		k = p
	}
}

func (h timerHeap) down(k int) {
	n := len(h)
	for {
		l := 2*k + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && h.less(r, l) {
			c = r
		}
		if !h.less(c, k) {
			return
		}
		h.swap(k, c)
		k = c
	}
}

// set schedules ks at due, or moves it there.
func (h *timerHeap) set(ks *keyState, due int64) {
	if ks.hidx >= 0 {
		if ks.due == due {
			return
		}
		earlier := due < ks.due
		ks.due = due
		if earlier {
			h.up(ks.hidx)
		} else {
			h.down(ks.hidx)
		}
		return
	}
	ks.due = due
	ks.hidx = len(*h)
	*h = append(*h, ks)
	h.up(ks.hidx)
}

// remove unschedules ks.
func (h *timerHeap) remove(ks *keyState) {
	i := ks.hidx
	if i < 0 {
		return
	}
	a := *h
	n := len(a) - 1
	if i != n {
		a.swap(i, n)
	}
	a[n] = nil
	a = a[:n]
	*h = a
	ks.hidx = -1
	if i < n {
		a.down(i)
		a.up(i)
	}
}

// pop unschedules and returns the earliest key.
func (h *timerHeap) pop() *keyState {
	ks := (*h)[0]
	h.remove(ks)
	return ks
}

// OldestPartialStart is the start time of the oldest partial match that
// has taken events (ok false for none): how long the pattern has kept a
// match waiting, against its watermark. Keys kept in the sequential form
// (Pattern.seq) are left out.
func (m *Matcher) OldestPartialStart() (ts int64, ok bool) {
	ts = watermark.MaxTime
	for _, ks := range m.keys {
		for i := range ks.partial.a {
			if e := &ks.partial.a[i]; e.started() && e.ts < ts {
				ts, ok = e.ts, true
			}
		}
	}
	return ts, ok
}
