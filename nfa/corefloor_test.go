package nfa_test

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cepcluster/cep/nfa"
)

// coreFloor is the CORE pattern done with the least work the output of
// pattern-v1 allows, to show what that output costs by itself as the
// length grows: every partial match is 8 bytes in an array of its run (the
// partial matches sharing a first event, which time out together), its
// events a chain of parent links in the run's arena, and each match and
// timed-out partial match is built as an nfa.Record with its events by
// stage, from arrays reused across events as the engine's are. It keeps no
// versions, no shared buffer, no Flink queue order and nothing to encode.
// Its matches and timeouts are checked against the engine's
// (verifyCOREFloor) before it is timed.
type coreFloor struct {
	length  int
	window  int64
	stage   map[string]int32 // type → stage 1..length (absent: noise)
	stages  []string         // stage names s1..sL
	evs     []benchEvent     // the input, for the events' bytes
	keys    map[string]*floorKey
	recs    []nfa.Record
	lists   []nfa.StageEvents
	raws    [][]byte
	chain   []int32
	scratch []floorPM
	// counts, and (when keep is set) every record as a comparable string
	matches, timeouts int
	keep              bool
	kept              []string
}

type floorKey struct {
	runs []*floorRun // by first event
	done []floorDone // completed matches waiting for earlier runs
}

// floorRun is the partial matches that share a first event.
type floorRun struct {
	start int64
	nodes []floorNode
	pms   []floorPM
	count []int32 // partial matches per stage
}

type floorNode struct{ ev, parent int32 } // ev: index into evs; parent -1: the first event

type floorPM struct{ node, stage int32 }

type floorDone struct {
	start, end int64
	run        *floorRun
	node       int32
}

func newCoreFloor(length, windowEvents int, evs []benchEvent) *coreFloor {
	f := &coreFloor{length: length, window: int64(windowEvents * coreKeys), stage: map[string]int32{}, evs: evs, keys: map[string]*floorKey{}}
	for i := 1; i <= length; i++ {
		f.stage[fmt.Sprintf("T%d", i)] = int32(i)
		f.stages = append(f.stages, fmt.Sprintf("s%d", i))
	}
	return f
}

// record appends the record of the partial match ending at node n of run r.
func (f *coreFloor) record(typ, key string, r *floorRun, n int32, end, at int64) {
	f.chain = f.chain[:0]
	for i := n; i >= 0; i = r.nodes[i].parent {
		f.chain = append(f.chain, r.nodes[i].ev)
	}
	if len(f.lists)+len(f.chain) > cap(f.lists) {
		f.lists = make([]nfa.StageEvents, 0, 2*cap(f.lists)+len(f.chain)) // earlier records keep theirs
	}
	if len(f.raws)+len(f.chain) > cap(f.raws) {
		f.raws = make([][]byte, 0, 2*cap(f.raws)+len(f.chain))
	}
	from := len(f.lists)
	for i := len(f.chain) - 1; i >= 0; i-- {
		f.raws = append(f.raws, f.evs[f.chain[i]].in.Raw)
		f.lists = append(f.lists, nfa.StageEvents{Stage: f.stages[len(f.chain)-1-i], Events: f.raws[len(f.raws)-1:]})
	}
	f.recs = append(f.recs, nfa.Record{Type: typ, Pattern: "core", Key: key, Start: r.start, End: end, TimeoutAt: at, Events: f.lists[from:]})
	if typ == "match" {
		f.matches++
	} else {
		f.timeouts++
	}
	if f.keep {
		f.kept = append(f.kept, floorString(&f.recs[len(f.recs)-1]))
	}
}

// floorString is what verifyCOREFloor compares of a record: a match's key
// and times (which of several chains completing at once Flink reports is
// its queue order's business), a timeout's key, times and events.
func floorString(r *nfa.Record) string {
	if r.Type == "match" {
		return fmt.Sprintf("match %s %d..%d", r.Key, r.Start, r.End)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "timeout %s %d@%d", r.Key, r.Start, r.TimeoutAt)
	for _, se := range r.Events {
		for _, e := range se.Events {
			fmt.Fprintf(&sb, " %s:%s", se.Stage, e)
		}
	}
	return sb.String()
}

// event feeds the event of index i to its key; the records it produced are
// f.recs until the next call.
func (f *coreFloor) event(key string, ts int64, i int) int {
	f.recs, f.lists, f.raws = f.recs[:0], f.lists[:0], f.raws[:0]
	k := f.keys[key]
	if k == nil {
		k = &floorKey{}
		f.keys[key] = k
	}
	before := f.matches
	f.advance(key, k, ts)
	st := f.stage[f.evs[i].typ]
	switch {
	case st == 1:
		r := &floorRun{start: ts, nodes: []floorNode{{ev: int32(i), parent: -1}}, pms: []floorPM{{0, 1}}, count: make([]int32, f.length+1)}
		r.count[1] = 1
		k.runs = append(k.runs, r)
	case st > 1:
		for _, r := range k.runs {
			if r.count[st-1] == 0 {
				continue
			}
			out := f.scratch[:0]
			for _, p := range r.pms {
				out = append(out, p)
				if p.stage != st-1 {
					continue
				}
				r.nodes = append(r.nodes, floorNode{ev: int32(i), parent: p.node})
				n := int32(len(r.nodes) - 1)
				if int(st) == f.length {
					k.done = append(k.done, floorDone{start: r.start, end: ts, run: r, node: n})
					continue
				}
				out = append(out, floorPM{n, st})
				r.count[st]++
			}
			r.pms, f.scratch = out, r.pms[:0]
		}
	}
	f.emit(key, k)
	return f.matches - before
}

// advance times out the runs whose first event is a window old.
func (f *coreFloor) advance(key string, k *floorKey, now int64) {
	n := 0
	for n < len(k.runs) && now-k.runs[n].start >= f.window {
		r := k.runs[n]
		for _, p := range r.pms {
			f.record("timeout", key, r, p.node, 0, r.start+f.window)
		}
		n++
	}
	if n > 0 {
		clear(k.runs[:n])
		k.runs = slices.Delete(k.runs, 0, n)
		f.emit(key, k)
	}
}

// emit is coreRef.emit: the earliest completed match leaves once no run
// that started before it is left, and discards every run and completed
// match that starts at or before its last event.
func (f *coreFloor) emit(key string, k *floorKey) {
	for len(k.done) > 0 {
		d := k.done[earliest(k.done, func(d floorDone) int64 { return d.start })]
		if len(k.runs) > 0 && k.runs[0].start < d.start {
			return
		}
		f.record("match", key, d.run, d.node, d.end, 0)
		n := 0
		for n < len(k.runs) && k.runs[n].start <= d.end {
			n++
		}
		clear(k.runs[:n])
		k.runs = slices.Delete(k.runs, 0, n)
		k.done = slices.DeleteFunc(k.done, func(o floorDone) bool { return o.start <= d.end })
	}
}

// verifyCOREFloor checks the floor model against the engine over the CORE
// input: the same matches (key, start, end) and the same timed-out partial
// matches with the same events, as multisets over the whole run (the
// engine fires a key's timeouts when the watermark passes, the model at
// the key's next event).
func verifyCOREFloor(p *nfa.Pattern, evs []benchEvent, length, windowEvents int) error {
	m := nfa.NewMatcher(p)
	f := newCoreFloor(length, windowEvents, evs)
	f.keep = true
	var engine []string
	for i := range evs {
		e := &evs[i]
		for _, r := range m.EventAt(e.key, benchTS(i), e.in) {
			engine = append(engine, floorString(&r))
		}
		f.event(e.key, benchTS(i), i)
	}
	// time reaches the last event everywhere (coreRef.finish)
	last := benchTS(len(evs) - 1)
	for _, r := range m.Finish(false) {
		engine = append(engine, floorString(&r))
	}
	for key, k := range f.keys {
		f.advance(key, k, last)
	}
	onlyEngine, onlyModel := multisetDiff(engine, f.kept)
	if len(onlyEngine)+len(onlyModel) > 0 || f.matches == 0 {
		return fmt.Errorf("core len=%d w=%d: %d records only the engine made (first %q), %d only the model (first %q); %d matches, %d timeouts",
			length, windowEvents, len(onlyEngine), firstOf(onlyEngine), len(onlyModel), firstOf(onlyModel), f.matches, f.timeouts)
	}
	return nil
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// floorRef feeds the model from the benchmark's cyclic input (refRun's
// reference).
type floorRef struct {
	f    *coreFloor
	next int
}

func (r *floorRef) event(key string, ts int64, _ *benchEvent) int {
	i := r.next & (len(r.f.evs) - 1)
	r.next++
	return r.f.event(key, ts, i)
}
