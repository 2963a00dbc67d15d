package nfa

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/cepcluster/cep/nfa/expr"
)

// Record is one output record of pattern-v1: a match, a timed-out partial
// match, or a late event. Its JSON form keeps stage order and the original
// event bytes.
type Record struct {
	Type      string // "match", "timeout" or "late"
	ID        string // deterministic id, set in cluster mode
	Pattern   string
	Key       string
	Start     int64 // first event's time (match, timeout)
	End       int64 // last event's time (match)
	TimeoutAt int64 // timeout
	Events    []StageEvents
	Fields    []Field
	Event     []byte // the late event
	// RowOnly marks a MATCH_RECOGNIZE row: its JSON has fields, no events.
	RowOnly bool
	// Dup numbers records of one step that are otherwise identical (0 for
	// the first); not part of the JSON form.
	Dup int
	// Positions are the source positions (Input.Pos) of the record's events,
	// in order. They are not part of the JSON form.
	Positions []uint64
}

// StageEvents are the events one stage accepted, in order.
type StageEvents struct {
	Stage  string
	Events [][]byte
}

// Field is one emitted field of a match.
type Field struct {
	Name  string
	Value any
}

// identityHash hashes most of what sameAs compares: the type's first
// letter, the timeout time, the positions and the number of events of
// each stage (the key and the stage names, alike in most records of one
// step, are left to sameAs). It only groups the records numberDuplicates
// compares; it is not stored anywhere.
func (r *Record) identityHash() uint64 {
	h := hashSeed
	if r.Type != "" {
		h = hashWord(h, uint64(r.Type[0]))
	}
	h = hashWord(h, uint64(r.TimeoutAt))
	for _, p := range r.Positions {
		h = hashWord(h, p)
	}
	for _, se := range r.Events {
		h = hashWord(h, uint64(len(se.Events)))
	}
	return h
}

const hashSeed uint64 = 14695981039346656037

func hashWord(h, v uint64) uint64 {
	h = (h ^ v) * 0x9e3779b97f4a7c15
	return h ^ h>>29
}

func (r *Record) sameAs(o *Record) bool {
	if r.Type != o.Type || r.Key != o.Key || r.TimeoutAt != o.TimeoutAt || len(r.Positions) != len(o.Positions) || len(r.Events) != len(o.Events) {
		return false
	}
	for i := range r.Positions {
		if r.Positions[i] != o.Positions[i] {
			return false
		}
	}
	for i := range r.Events {
		if r.Events[i].Stage != o.Events[i].Stage || len(r.Events[i].Events) != len(o.Events[i].Events) {
			return false
		}
	}
	return true
}

// MarshalJSON writes the record in the field order of pattern-v1.md.
func (r Record) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil) }

// AppendJSON appends the record's JSON to b.
func (r *Record) AppendJSON(b []byte) ([]byte, error) {
	b = slices.Grow(b, r.jsonSize())
	b = append(b, `{"type":`...)
	b = strconv.AppendQuote(b, r.Type)
	if r.ID != "" {
		b = append(b, `,"id":`...)
		b = strconv.AppendQuote(b, r.ID)
	}
	b = append(b, `,"pattern":`...)
	b = appendJSONString(b, r.Pattern)
	b = append(b, `,"key":`...)
	b = appendJSONString(b, r.Key)
	switch r.Type {
	case "late":
		b = append(b, `,"event":`...)
		b = appendRaw(b, r.Event)
		return append(b, '}'), nil
	case "timeout":
		b = append(b, `,"start":`...)
		b = strconv.AppendInt(b, r.Start, 10)
		b = append(b, `,"timeoutAt":`...)
		b = strconv.AppendInt(b, r.TimeoutAt, 10)
	default:
		if r.RowOnly {
			b = append(b, `,"fields":`...)
			b = appendFields(b, r.Fields)
			return append(b, '}'), nil
		}
		b = append(b, `,"start":`...)
		b = strconv.AppendInt(b, r.Start, 10)
		b = append(b, `,"end":`...)
		b = strconv.AppendInt(b, r.End, 10)
	}
	b = append(b, `,"events":{`...)
	for i, s := range r.Events {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s.Stage)
		b = append(b, `:[`...)
		for j, e := range s.Events {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendRaw(b, e)
		}
		b = append(b, ']')
	}
	b = append(b, '}')
	if len(r.Fields) > 0 {
		b = append(b, `,"fields":`...)
		b = appendFields(b, r.Fields)
	}
	return append(b, '}'), nil
}

func appendFields(b []byte, fields []Field) []byte {
	b = append(b, '{')
	for i, f := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, f.Name)
		b = append(b, ':')
		v, err := json.Marshal(f.Value)
		if err != nil {
			v = []byte("null")
		}
		b = append(b, v...)
	}
	return append(b, '}')
}

// jsonSize estimates the length of the record's JSON (exact for events
// without white space around them and strings without escapes; fields are
// guessed), so that AppendJSON grows its buffer once.
func (r *Record) jsonSize() int {
	n := 128 + len(r.ID) + len(r.Pattern) + len(r.Key) + len(r.Event)
	for _, s := range r.Events {
		n += len(s.Stage) + 6
		for _, e := range s.Events {
			n += len(e) + 1
		}
	}
	for _, f := range r.Fields {
		n += len(f.Name) + 16
	}
	return n
}

// appendJSONString appends s as encoding/json writes it (HTML characters
// and invalid UTF-8 escaped too).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			v, _ := json.Marshal(s)
			return append(b, v...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func appendRaw(b, raw []byte) []byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	if bytes.IndexByte(raw, '\n') >= 0 {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) == nil {
			return append(b, buf.Bytes()...)
		}
	}
	return append(b, raw...)
}

func rawOf(ev *event) []byte {
	if len(ev.raw) > 0 {
		return ev.raw
	}
	b, err := json.Marshal(ev.data)
	if err != nil {
		return []byte("null")
	}
	return b
}

// recordRoom holds the arrays the lists inside a call's records (events by
// stage, positions) are cut from, reused from one call to the next (the
// records of a call stay valid until the next one). An array that is full
// is replaced, not grown: the records cut from it keep it.
type recordRoom struct {
	raws   [][]byte
	pos    []uint64
	stages []StageEvents
	used   int // events cut in this call
	peak   int // the most events a call of this round of calls has cut
	calls  int // calls in this round (roomCalls)
}

func (r *recordRoom) reset() {
	r.peak = max(r.peak, r.used)
	if r.calls++; r.calls == roomCalls {
		if cap(r.raws) > roomKeep && cap(r.raws) > 16*r.peak {
			// arrays sized by a call with far more records than any of
			// the calls since (a final watermark) are not kept for good
			*r = recordRoom{}
			return
		}
		r.calls, r.peak = 0, 0
	}
	clear(r.raws)
	clear(r.stages)
	r.raws, r.pos, r.stages, r.used = r.raws[:0], r.pos[:0], r.stages[:0], 0
}

// cut returns room for the lists of records holding n events in all:
// zeroed, and at most one StageEvents per event.
func (r *recordRoom) cut(n int) (raws [][]byte, pos []uint64, stages []StageEvents) {
	r.used += n
	return cutRoom(&r.raws, n), cutRoom(&r.pos, n), cutRoom(&r.stages, n)
}

// A record room keeps room for roomKeep events whatever the calls use, and
// more as long as some call of each roomCalls uses a sixteenth of it.
// (Timeouts come in bursts: all the partial matches of a run of a
// followedByAny pattern time out at once.)
const (
	roomKeep  = 4096
	roomCalls = 1024
)

func cutRoom[T any](a *[]T, n int) []T {
	l := len(*a)
	if cap(*a)-l < n {
		*a = make([]T, 0, max(2*cap(*a), n, 64))
		l = 0
	}
	*a = (*a)[:l+n]
	return (*a)[l : l+n : l+n]
}

// positionsIn is positions in out, which has room for len(p).
func positionsIn(p path, out []uint64) []uint64 {
	out = out[:len(p):len(p)]
	for i, n := range p {
		out[i] = n.ev.pos
	}
	return out
}

// stageEventsIn lists the path's events by stage: the stages in the order
// of their first event, each with its events in path order. The lists are
// cut from out's room (zeroed; allocated when it has less than one per
// stage of the path) and from all (room for len(p)); neither can be
// appended into the other's part.
func (m *Matcher) stageEventsIn(p path, out []StageEvents, all [][]byte) []StageEvents {
	if m.p.ownPaths && !m.test.shareNodes {
		// a plain sequence: one event per stage, in stage order
		if cap(out) < len(p) {
			out = make([]StageEvents, len(p))
		}
		out, all = out[:len(p):len(p)], all[:len(p):len(p)]
		for i, n := range p {
			all[i] = rawOf(n.ev)
			out[i] = StageEvents{Stage: m.p.stageNames[n.key.stage], Events: all[i : i+1 : i+1]}
		}
		return out
	}
	slot := m.sc.stageSlot // stage -> 1 + its index in out, 0: not seen yet
	if len(slot) < len(m.p.stageNames) {
		slot = make([]int32, len(m.p.stageNames))
		m.sc.stageSlot = slot
	}
	count := m.sc.stageCount[:0]
	for _, n := range p {
		if st := n.key.stage; slot[st] == 0 {
			count = append(count, 1)
			slot[st] = int32(len(count))
		} else {
			count[slot[st]-1]++
		}
	}
	m.sc.stageCount = count
	if cap(out) < len(count) {
		out = make([]StageEvents, len(count))
	}
	out = out[:len(count):len(count)]
	all = all[:len(p)]
	for _, n := range p {
		i := slot[n.key.stage] - 1
		if out[i].Events == nil {
			out[i].Stage = m.p.stageNames[n.key.stage]
			out[i].Events = all[:0:count[i]]
			all = all[count[i]:]
		}
		out[i].Events = append(out[i].Events, rawOf(n.ev))
	}
	for _, n := range p {
		slot[n.key.stage] = 0
	}
	return out
}

type matchCtx struct {
	m *Matcher
	p path
}

func (c matchCtx) EventsFor(stage string) []expr.Event {
	var out []expr.Event
	for _, n := range c.p {
		if c.m.p.stageNames[n.key.stage] == stage {
			out = append(out, n.ev.data)
		}
	}
	return out
}

func (m *Matcher) emitMatch(ks *keyState, p path) {
	m.stats.Matches++
	raws, pos, stages := m.sc.room.cut(len(p))
	r := Record{Type: "match", Pattern: m.p.spec.Name, Key: ks.key, Positions: positionsIn(p, pos)}
	if len(p) > 0 {
		r.Start, r.End = p[0].ev.ts, p[len(p)-1].ev.ts
	}
	if m.p.rowFn != nil {
		r.Fields = m.p.rowFn(m, p)
		r.RowOnly = true
		m.sc.out = append(m.sc.out, r)
		return
	}
	r.Events = m.stageEventsIn(p, stages, raws)
	if len(m.p.emit) > 0 {
		var last expr.Event
		if len(p) > 0 {
			last = p[len(p)-1].ev.data
		}
		ctx := matchCtx{m: m, p: p}
		for _, f := range m.p.emit {
			v, err := f.v.Eval(last, ctx)
			if err != nil {
				m.emitFailed(f.name, err)
				v = nil
			}
			r.Fields = append(r.Fields, Field{Name: f.name, Value: v})
		}
	}
	m.sc.out = append(m.sc.out, r)
}
