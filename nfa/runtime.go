package nfa

import (
	"github.com/cepcluster/cep/nfa/expr"
	"github.com/cepcluster/cep/watermark"
)

// This file is the per-key automaton: Flink's NFA.process / advanceTime over a
// shared event buffer. Every event a key's partial matches accept is stored
// once (event), and each (event, stage) pair once (node); partial matches point
// at the node of their latest event and nodes point back at their
// predecessors with Dewey-versioned edges, so partial matches that share a
// prefix share its storage. Nodes and events are reference counted and freed
// as soon as no partial match can reach them.

type event struct {
	seq  uint64 // arrival order within the key
	ts   int64
	data expr.Event
	raw  []byte
	pos  uint64 // source position (Input.Pos)
	refs int32
}

type nodeKey struct {
	seq   uint64
	stage int32
}

type node struct {
	key    nodeKey
	ev     *event
	edges  []edge
	refs   int32
	inline [1]edge // most nodes have one edge: no separate allocation
}

type edge struct {
	target *node // nil: the first event of a match
	ver    dewey
}

// compState is a partial match (Flink's ComputationState).
type compState struct {
	state   int32
	prev    *node
	ver     dewey
	startTs int64
	prevTs  int64
	startEv *event
}

// keyState is everything one key holds for one pattern.
type keyState struct {
	key       string
	partial   csQueue
	completed csQueue
	events    map[uint64]*event
	nodes     map[nodeKey]*node
	nextSeq   uint64
	queue     watermark.Queue[queued] // events waiting for the watermark
	due       int64                   // when the matcher must next look at this key
	hidx      int                     // index in the matcher's timer heap, -1 when not scheduled
	gen       uint64                  // bumped when the state is recycled for another key
	preDrain  int                     // queued events that arrived before StopStarting
	deadline  int64                   // no partial match times out before this (see recomputeDeadline)
}

type queued struct {
	ts   int64
	data expr.Event
	raw  []byte
	pos  uint64
	arr  uint64 // arrival number (Matcher.arrivals)
}

func newKeyState(p *Pattern, key string) *keyState {
	ks := &keyState{key: key}
	ks.init(p)
	return ks
}

// init resets a key state to fresh start states, keeping allocated buffers.
func (ks *keyState) init(p *Pattern) {
	ks.partial.a = ks.partial.a[:0]
	ks.completed.a = ks.completed.a[:0]
	ks.nextSeq = 0
	ks.due, ks.hidx = 0, -1
	ks.preDrain = 0
	ks.deadline = maxInt64 // start states never time out
	for _, s := range p.startStates {
		ks.partial.offer(&compState{state: int32(s), ver: dewey{1}, startTs: -1, prevTs: -1})
	}
}

// idle reports whether the key holds nothing but fresh start states.
func (ks *keyState) idle() bool {
	if ks.queue.Len() > 0 || ks.completed.len() > 0 || len(ks.nodes) > 0 {
		return false
	}
	for _, c := range ks.partial.a {
		if c.prev != nil || c.startEv != nil {
			return false
		}
	}
	return true
}

// partialCount is the number of partial matches that have accepted events.
func (ks *keyState) partialCount() int {
	n := 0
	for _, c := range ks.partial.a {
		if c.startEv != nil {
			n++
		}
	}
	return n + ks.completed.len()
}

func (ks *keyState) lock(n *node) {
	if n != nil {
		n.refs++
	}
}

func (ks *keyState) release(n *node) {
	for n != nil {
		n.refs--
		if n.refs > 0 {
			return
		}
		delete(ks.nodes, n.key)
		n.ev.refs--
		if n.ev.refs == 0 {
			delete(ks.events, n.ev.seq)
		}
		// release predecessors; iterate to avoid deep recursion on long chains
		var next *node
		for _, e := range n.edges {
			switch {
			case e.target == nil:
			case next == nil:
				next = e.target
			default:
				ks.release(e.target)
			}
		}
		n.edges = nil
		n = next
	}
}

func (ks *keyState) put(stage int32, ev *event, prev *node, ver dewey) *node {
	k := nodeKey{seq: ev.seq, stage: stage}
	n := ks.nodes[k]
	if n == nil {
		if ks.nodes == nil {
			ks.nodes = map[nodeKey]*node{}
			ks.events = map[uint64]*event{}
		}
		if ks.events[ev.seq] == nil {
			ks.events[ev.seq] = ev
		}
		n = &node{key: k, ev: ev}
		n.edges = n.inline[:0:1]
		ev.refs++
		ks.nodes[k] = n
	}
	n.edges = append(n.edges, edge{target: prev, ver: ver})
	ks.lock(prev)
	return n
}

// path is one extracted match: its nodes from the first event to the last.
type path []*node

// extract reconstructs the matches ending at n with version ver (Flink's
// SharedBufferAccessor.extractPatterns): a depth-first walk back along the
// edges whose versions are compatible, in Flink's order.
func extract(n *node, ver dewey) []path {
	if n == nil {
		return nil
	}
	type st struct {
		n    *node
		ver  dewey
		path []*node // from the last event backwards
	}
	var out []path
	stack := []st{{n: n, ver: ver}}
	for len(stack) > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if cur.n == nil {
			p := make(path, len(cur.path))
			for i := range cur.path {
				p[i] = cur.path[len(cur.path)-1-i]
			}
			out = append(out, p)
			continue
		}
		cur.path = append(cur.path, cur.n)
		first := true
		for _, e := range cur.n.edges {
			if !cur.ver.compatible(e.ver) {
				continue
			}
			np := cur.path
			if first {
				first = false
			} else {
				np = append([]*node(nil), cur.path...)
			}
			// the shared slice may be appended to by a child; cap it so that
			// the first child's appends never overwrite a sibling's copy
			np = np[:len(np):len(np)]
			stack = append(stack, st{n: e.target, ver: e.ver, path: np})
		}
	}
	return out
}

func currentMatch(c *compState) path {
	if c.prev == nil {
		return nil
	}
	var buf []*node
	if !firstPath(c.prev, c.ver, &buf) {
		return nil
	}
	p := make(path, len(buf))
	for i := range buf {
		p[i] = buf[len(buf)-1-i]
	}
	return p
}

// firstPath finds the path extract would list first (its depth-first
// search pops the last compatible edge first) without listing the others,
// leaving it in *buf from the last event backwards.
func firstPath(n *node, ver dewey, buf *[]*node) bool {
	if n == nil {
		return true
	}
	*buf = append(*buf, n)
	for i := len(n.edges) - 1; i >= 0; i-- {
		e := n.edges[i]
		if !ver.compatible(e.ver) {
			continue
		}
		if firstPath(e.target, e.ver, buf) {
			return true
		}
	}
	*buf = (*buf)[:len(*buf)-1]
	return false
}
