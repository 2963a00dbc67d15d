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
	refs   int32 // locks (Flink's Lockable<SharedBufferEdge>)
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

// lockNode is Flink's SharedBufferAccessor.lockNode: a new reference to n
// under version ver (a partial match there, or an edge into it) locks n
// and each of its edges that ver is compatible with.
func (ks *keyState) lockNode(n *node, ver dewey) {
	if n == nil {
		return
	}
	n.refs++
	for i := range n.edges {
		if ver.compatible(n.edges[i].ver) {
			n.edges[i].refs++
		}
	}
}

type releaseItem struct {
	n   *node
	ver dewey
}

// releaseNode is Flink's SharedBufferAccessor.releaseNode: the reference to
// n under version ver goes away, so each compatible edge loses a lock; an
// edge left without locks is removed and its target released in turn
// under the edge's version. A node left without references is removed with
// its event (when no other node holds it); its remaining edges then go
// too, releasing their targets (Flink keeps those targets locked, which
// only costs memory: nothing can reach a removed node).
func (ks *keyState) releaseNode(n *node, ver dewey) {
	if n == nil {
		return
	}
	var buf [16]releaseItem
	stack := append(buf[:0], releaseItem{n, ver})
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		cur := it.n
		kept := cur.edges[:0]
		for _, e := range cur.edges {
			if it.ver.compatible(e.ver) && releaseCount(&e.refs) {
				if e.target != nil {
					stack = append(stack, releaseItem{e.target, e.ver})
				}
				continue
			}
			kept = append(kept, e)
		}
		clear(cur.edges[len(kept):])
		cur.edges = kept
		if !releaseCount(&cur.refs) {
			continue
		}
		delete(ks.nodes, cur.key)
		cur.ev.refs--
		if cur.ev.refs == 0 {
			delete(ks.events, cur.ev.seq)
		}
		for _, e := range cur.edges {
			if e.target != nil {
				stack = append(stack, releaseItem{e.target, e.ver})
			}
		}
		cur.edges = nil
	}
}

// releaseCount is Flink's Lockable.release: it drops one lock and reports
// whether none is left.
func releaseCount(refs *int32) bool {
	if *refs <= 0 {
		return true
	}
	*refs--
	return *refs == 0
}

func (ks *keyState) put(stage int32, ev *event, prev *node, ver dewey) *node {
	ks.lockNode(prev, ver)
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
	return n
}

// deriveLocks sets every node's and edge's lock count from the structure:
// each partial match at a node and each edge into it holds one lock on
// the node and one on each of its edges its version is compatible with
// (what lockNode did when they were made). For a state built other than
// by processing events (migration).
func (ks *keyState) deriveLocks() {
	for _, n := range ks.nodes {
		n.refs = 0
		for i := range n.edges {
			n.edges[i].refs = 0
		}
	}
	for _, n := range ks.nodes {
		for _, e := range n.edges {
			ks.lockNode(e.target, e.ver)
		}
	}
	for _, q := range []*csQueue{&ks.partial, &ks.completed} {
		for _, c := range q.a {
			ks.lockNode(c.prev, c.ver)
		}
	}
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
