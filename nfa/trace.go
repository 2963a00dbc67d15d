package nfa

import (
	"encoding/json"
	"slices"
	"strconv"
)

// Tracer receives what a matcher decides, one entry at a time, while it
// runs (Matcher.SetTracer): why a pattern did or did not match. The
// entry and what it points to are valid only during the call.
type Tracer func(e *TraceEntry)

// TraceKind is what a TraceEntry reports.
type TraceKind string

// The kinds of trace entries.
const (
	// TraceEvent: an event reaches the key's automaton (Key, Time, Seq,
	// Pos, Event, Watermark). The entries up to the next TraceEvent,
	// TraceTime, TraceHeld or TraceLate are about it.
	TraceEvent TraceKind = "event"
	// TraceHeld: an event waits for the watermark to pass its time.
	TraceHeld TraceKind = "held"
	// TraceLate: an event at or below the watermark, refused as late.
	TraceLate TraceKind = "late"
	// TraceTime: time advances on a key to Time and ends partial
	// matches (the drops and completions that follow).
	TraceTime TraceKind = "time"
	// TraceCheck: a condition tested for a partial match (PM, "" for a
	// start state) in State: the transition (Action to Target) and the
	// value of its condition Cond for the event. A true take, ignore or
	// proceed is the edge taken.
	TraceCheck TraceKind = "check"
	// TraceStart: a partial match started with the event, now in State.
	TraceStart TraceKind = "start"
	// TraceExtend: a partial match took the event and is now in State;
	// From, when set, is the partial match it branched from (which goes
	// on as well).
	TraceExtend TraceKind = "extend"
	// TraceMove: a partial match moved to State without taking the event
	// (an optional stage passed over), From as for TraceExtend.
	TraceMove TraceKind = "move"
	// TraceComplete: a partial match completed; Record is the match.
	TraceComplete TraceKind = "complete"
	// TraceDrop: a partial match ended without a match, for Reason.
	TraceDrop TraceKind = "drop"
)

// Reasons a partial match is dropped (TraceEntry.Reason).
const (
	DropWithin     = "within"     // the pattern's within window ran out (Deadline); a timeout record
	DropWindow     = "window"     // the stage's previousAndCurrent window ran out (Deadline); a timeout record
	DropImpossible = "impossible" // no edge held for the event: the match cannot go on
	DropStop       = "stop"       // a notNext / notFollowedBy stage's condition held
	DropSkip       = "skip"       // the skip strategy pruned it after the match From
	DropBound      = "bound"      // the key held more partial matches than MaxPartialMatches
	DropSteps      = "steps"      // the event's step reached MaxStepsPerEvent
)

// TraceEntry is one decision of the engine (see the TraceKind constants
// for which fields each kind sets).
type TraceEntry struct {
	Kind      TraceKind       `json:"kind"`
	Pattern   string          `json:"pattern"`
	Key       string          `json:"key"`
	Time      int64           `json:"time"`          // the event's time, or the time advanced to
	Watermark int64           `json:"watermark"`     // the matcher's watermark then
	Seq       uint64          `json:"seq,omitempty"` // the event's number in its key since the key's state began, from 1
	Pos       uint64          `json:"pos,omitempty"` // the event's input position (line)
	Event     json.RawMessage `json:"event,omitempty"`
	// PM is a partial match's id, "p" and a number, the same for as long
	// as the partial match lives (a branch gets a new one); "" for a
	// start state's.
	PM     string `json:"pm,omitempty"`
	From   string `json:"from,omitempty"`
	State  string `json:"state,omitempty"`
	Action string `json:"action,omitempty"`
	Target string `json:"target,omitempty"`
	Cond   string `json:"cond,omitempty"`
	Value  *bool  `json:"value,omitempty"` // a check's: the condition's value
	Reason string `json:"reason,omitempty"`
	// Waiting: a dropped partial match's next stages, those whose events
	// it could take in State
	Waiting  []string `json:"waiting,omitempty"`
	Deadline int64    `json:"deadline,omitempty"`
	Record   *Record  `json:"record,omitempty"`
}

// tracer is a matcher's tracing state; nil when tracing is off, so that
// tracing costs a nil check per decision and nothing else.
type tracer struct {
	fn   Tracer
	ids  map[*compState]uint64 // the started partial matches' ids
	next uint64
	// rec: decisionGraph records the conditions it tests in checks
	rec    bool
	checks []traceCheck
	texts  map[*cond]string
	waits  map[int][]string // per state: waitingFor
	done   []uint64         // the ids of the matches emitCompleted returned, in order
	e      TraceEntry
	key    *keyState // timeAt: a TraceTime for (key, at) was sent
	pruner string    // the match whose skip strategy prunes now
	timeAt int64
}

type traceCheck struct {
	t  *transition
	ok bool
}

// SetTracer makes the matcher report its decisions to t (nil: stop).
// While tracing, every partial match is visited on every event (the fast
// paths that skip them are off), which changes no record.
func (m *Matcher) SetTracer(t Tracer) {
	if t == nil {
		m.tr = nil
		return
	}
	m.tr = &tracer{fn: t, ids: map[*compState]uint64{}, texts: map[*cond]string{}, waits: map[int][]string{}}
	m.freeKeys = nil // a recycled key would keep its sequence step
	for _, k := range m.SortedKeys() {
		if ks := m.keys[k]; ks.seq != nil {
			m.seqToGeneral(ks)
		}
	}
}

// SetTracer traces every matcher of the runner to t (Matcher.SetTracer).
func (r *Runner) SetTracer(t Tracer) {
	for _, m := range r.matchers {
		m.SetTracer(t)
	}
}

// traceEntry starts an entry about key at time ts.
func (m *Matcher) traceEntry(kind TraceKind, key string, ts int64) *TraceEntry {
	e := &m.tr.e
	*e = TraceEntry{Kind: kind, Pattern: m.p.spec.Name, Key: key, Time: ts, Watermark: m.wm}
	return e
}

func (m *Matcher) traceSend(e *TraceEntry) {
	m.tr.fn(e)
	*e = TraceEntry{}
}

// traceArrival reports an event that waits for the watermark or is late.
func (m *Matcher) traceArrival(kind TraceKind, key string, ts int64, in Input) {
	e := m.traceEntry(kind, key, ts)
	e.Pos, e.Event = in.Pos, in.Raw
	m.traceSend(e)
}

// traceEvent reports the event processed now on ks.
func (m *Matcher) traceEvent(ks *keyState, ev *event) {
	m.tr.key = nil
	e := m.traceEntry(TraceEvent, ks.key, ev.ts)
	e.Seq, e.Pos, e.Event = ev.order+1, ev.pos, ev.raw
	m.traceSend(e)
}

// traceTime reports, once, that time advancing to now on ks ends partial
// matches.
func (m *Matcher) traceTime(ks *keyState, now int64) {
	if m.tr.key == ks && m.tr.timeAt == now {
		return
	}
	m.tr.key, m.tr.timeAt = ks, now
	m.traceSend(m.traceEntry(TraceTime, ks.key, now))
}

// pmID returns the id of a started partial match, giving it one when it
// has none (a restored state's).
func (t *tracer) pmID(cs *compState) uint64 {
	id, ok := t.ids[cs]
	if !ok {
		t.next++
		id = t.next
		t.ids[cs] = id
	}
	return id
}

// pmName is a partial match's id as the trace shows it ("" for none: a
// start state's).
func pmName(id uint64) string {
	if id == 0 {
		return ""
	}
	return "p" + strconv.FormatUint(id, 10)
}

func (m *Matcher) condTextCached(c *cond) string {
	s, ok := m.tr.texts[c]
	if !ok {
		s = m.p.condText(c)
		m.tr.texts[c] = s
	}
	return s
}

// traceStep reports what the event did to partial match cs in state cur
// of ks: the conditions tested (tracer.checks) and the partial matches it
// left in res; reused: cs is among them.
func (m *Matcher) traceStep(ks *keyState, cs *compState, cur *cstate, res []*compState, reused bool) {
	t := m.tr
	var id uint64
	if cs.started {
		id = t.pmID(cs)
	}
	name := pmName(id)
	for _, c := range t.checks {
		e := m.traceEntry(TraceCheck, ks.key, m.sc.curEv.ts)
		e.Seq, e.Pos, e.PM, e.State = m.sc.curEv.order+1, m.sc.curEv.pos, name, cur.name
		e.Action = actionName(c.t.action)
		e.Target, e.Cond, e.Value = c.t.target.name, m.condTextCached(c.t.cond), boolPtr(c.ok)
		m.traceSend(e)
	}
	t.checks = t.checks[:0]
	// the last partial match the event left from cs goes on under cs's
	// id (unless cs stays itself); the others, reported first, are
	// branches of cs as it was before the event
	heir := -1
	if cs.started && !reused {
		for i, r := range res {
			if r != cs && r.started {
				heir = i
			}
		}
	}
	anyStarted := false
	for i, r := range res {
		if r == cs || !r.started {
			continue
		}
		anyStarted = true
		kind := TraceExtend
		if r.prev == cs.prev {
			kind = TraceMove
		}
		var rid uint64
		from := ""
		switch {
		case !cs.started:
			kind = TraceStart
			rid = t.pmID(r)
		case i == heir:
			rid = id
			t.ids[r] = id
		default:
			rid = t.pmID(r)
			from = name
		}
		e := m.traceEntry(kind, ks.key, m.sc.curEv.ts)
		e.Seq, e.Pos, e.PM, e.From, e.State = m.sc.curEv.order+1, m.sc.curEv.pos, pmName(rid), from, m.p.states[r.state].name
		m.traceSend(e)
	}
	if cs.started && !reused {
		delete(t.ids, cs)
		if !anyStarted {
			m.traceDropID(ks, id, cur, DropImpossible, "", 0)
		}
	}
}

var traceTrue, traceFalse = true, false

// boolPtr points at a shared true or false (nothing allocated).
func boolPtr(v bool) *bool {
	if v {
		return &traceTrue
	}
	return &traceFalse
}

func actionName(a action) string {
	switch a {
	case aTake:
		return "take"
	case aIgnore:
		return "ignore"
	}
	return "proceed"
}

// traceDrop reports that partial match cs ended without a match.
func (m *Matcher) traceDrop(ks *keyState, cs *compState, reason, from string, deadline int64) {
	if !cs.started {
		return
	}
	id := m.tr.pmID(cs)
	delete(m.tr.ids, cs)
	m.traceDropID(ks, id, m.p.states[cs.state], reason, from, deadline)
}

// waitingFor lists the stages whose events a partial match in st can
// take: those of the takes reachable through proceeds, in order.
func (m *Matcher) waitingFor(st *cstate) []string {
	if w, ok := m.tr.waits[st.id]; ok {
		return w
	}
	var out []string
	seen := map[*cstate]bool{}
	var walk func(s *cstate)
	walk = func(s *cstate) {
		if seen[s] {
			return
		}
		seen[s] = true
		for _, t := range s.trans {
			switch t.action {
			case aTake:
				if !slices.Contains(out, s.stage) {
					out = append(out, s.stage)
				}
			case aProceed:
				walk(t.target)
			}
		}
	}
	walk(st)
	m.tr.waits[st.id] = out
	return out
}

func (m *Matcher) traceDropID(ks *keyState, id uint64, st *cstate, reason, from string, deadline int64) {
	ts := m.sc.curEv.ts
	if m.tr.key == ks {
		ts = m.tr.timeAt
	}
	e := m.traceEntry(TraceDrop, ks.key, ts)
	e.PM, e.State, e.Reason, e.From, e.Deadline = pmName(id), st.name, reason, from, deadline
	if st.typ == stNormal {
		e.Waiting = m.waitingFor(st)
	}
	m.traceSend(e)
}

// traceCompleted notes that completed match cs is emitted next (its
// record follows: traceMatch).
func (m *Matcher) traceCompleted(cs *compState) {
	id := m.tr.pmID(cs)
	delete(m.tr.ids, cs)
	m.tr.done = append(m.tr.done, id)
}

// traceMatches reports the match records of ks from m.sc.out[from:] on,
// numbered (numberDuplicates): the i-th is the i-th completed match
// noted.
func (m *Matcher) traceMatches(ks *keyState, from int) {
	i := 0
	for k := from; k < len(m.sc.out); k++ {
		r := &m.sc.out[k]
		if r.Type != "match" {
			continue
		}
		var id uint64
		if i < len(m.tr.done) {
			id = m.tr.done[i]
		}
		i++
		ts := r.End
		if m.tr.key == ks {
			ts = m.tr.timeAt
		}
		e := m.traceEntry(TraceComplete, ks.key, ts)
		e.PM, e.Record = pmName(id), r
		m.traceSend(e)
	}
	m.tr.done = m.tr.done[:0]
}

// TraceLines runs input lines (events, or {"$watermark": T} markers, as
// Runner.Line reads them) through the patterns, as `cepctl run --trace`
// does, writing the trace to tw and handing each line's records to emit
// (valid during the call; nil: not wanted). At the end every buffered
// event is processed and, when final, time advances to +infinity. An
// error is a bad line (*InputError) or emit's.
func TraceLines(cfg Config, patterns []*Pattern, lines [][]byte, final bool, tw *TraceWriter, emit func([]Record) error) error {
	r := NewRunnerWith(cfg, patterns...)
	tw.ShowPattern = tw.ShowPattern || len(patterns) > 1
	r.SetTracer(tw.Trace)
	defer tw.Flush()
	for _, l := range lines {
		recs, err := r.Line(l)
		if err != nil {
			return err
		}
		if emit != nil {
			if err := emit(recs); err != nil {
				return err
			}
		}
	}
	recs := r.Finish(final)
	if emit != nil {
		return emit(recs)
	}
	return nil
}

// TraceDocument is TraceLines for one pattern document (JSON or YAML, as
// CompileBytes takes it): an error is the document's (*PatternError), a
// bad line's (*InputError) or emit's. For a key's stored history, give
// its events in order and set tw.Keep to that key.
func TraceDocument(cfg Config, doc []byte, lines [][]byte, final bool, tw *TraceWriter, emit func([]Record) error) error {
	p, err := CompileBytes(doc)
	if err != nil {
		return err
	}
	return TraceLines(cfg, []*Pattern{p}, lines, final, tw, emit)
}
