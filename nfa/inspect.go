package nfa

import (
	"cmp"
	"slices"
)

// KeyView is what a Matcher holds for one key, as plain data: its partial
// matches (those that have taken events, and completed ones a skip
// strategy holds back), the events waiting for the watermark, and the
// matcher's watermark. It is what `cepctl pattern inspect` shows.
type KeyView struct {
	Key string
	// Partial lists at most the limit asked for, in the order the key's
	// queue orders them (start time, start event, then age); PartialCount
	// counts them all (KeyState's count).
	Partial      []PartialView
	PartialCount int
	// Buffered lists at most the limit asked for of the events waiting
	// for the watermark, by (time, arrival); BufferedCount counts them all.
	Buffered      []EventView
	BufferedCount int
	// Watermark is the matcher's event-time watermark (watermark.MinTime
	// before there is one).
	Watermark int64
}

// PartialView is one partial match.
type PartialView struct {
	// State is the automaton state it waits in (Automaton's names:
	// stage, stage:N, $endState$ for a completed match held back).
	State string
	// Stage is the stage that state belongs to.
	Stage string
	// Start is its first event's time.
	Start int64
	// Deadline is when it times out (its window's end, or its state's
	// previous-and-current window); HasDeadline is false when it never does.
	Deadline    int64
	HasDeadline bool
	// Events are the events it has taken, in the order taken, each with
	// the stage it is bound to (the events a timeout record would list).
	Events []EventView
}

// EventView is one event a key holds.
type EventView struct {
	Stage string // the stage it is bound to (empty for a buffered event)
	Time  int64
	Pos   uint64 // source position (Input.Pos)
	Raw   []byte // the event as read (JSON); the caller must not modify it
}

// InspectKey lists what the matcher holds for key, at most limit partial
// matches and limit buffered events (limit <= 0: all). A key without state
// gives an empty view. InspectKey reads the state only, but it is not
// safe to call concurrently with anything else on the matcher (looking up
// edges may index them): the caller holds the lock Apply holds.
func (m *Matcher) InspectKey(key string, limit int) KeyView {
	v := KeyView{Key: key, Watermark: m.wm}
	ks := m.keys[key]
	if ks == nil {
		return v
	}
	v.PartialCount = ks.partialCount()
	v.BufferedCount = ks.queue.Len()
	if ks.seq != nil {
		// the same partial matches as the general step holds them
		ks = m.seqGeneral(ks)
	}
	type held struct {
		e         qent
		completed bool
		at        int // array position: ties keep the queue's order
	}
	var all []held
	for _, q := range []*csQueue{&ks.partial, &ks.completed} {
		for i := range q.a {
			if q.a[i].started() {
				all = append(all, held{e: q.a[i], completed: q == &ks.completed, at: len(all)})
			}
		}
	}
	slices.SortFunc(all, func(x, y held) int {
		if c := cmpEnt(&x.e, &y.e); c != 0 {
			return c
		}
		return cmp.Compare(x.at, y.at)
	})
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	var buf []*node
	for _, h := range all {
		st := m.p.states[h.e.state]
		pv := PartialView{State: st.name, Stage: st.stage, Start: h.e.ts}
		if !h.completed {
			if d := m.deadlineOf(&h.e); d != maxInt64 {
				pv.Deadline, pv.HasDeadline = d, true
			}
		}
		for _, n := range currentMatch(h.e.cs, &buf) {
			pv.Events = append(pv.Events, EventView{Stage: m.p.stageNames[n.key.stage], Time: n.ev.ts, Pos: n.ev.pos, Raw: rawOf(n.ev)})
		}
		v.Partial = append(v.Partial, pv)
	}
	ks.queue.Items(func(ts int64, q queued) {
		if limit > 0 && len(v.Buffered) >= limit {
			return
		}
		raw := q.raw
		if len(raw) == 0 {
			raw = rawOf(&event{data: q.data})
		}
		v.Buffered = append(v.Buffered, EventView{Time: ts, Pos: q.pos, Raw: raw})
	})
	return v
}
