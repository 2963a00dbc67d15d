package nfa

import (
	"cmp"
	"slices"

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
	// order numbers the key's events 0, 1, 2, ... in the order its
	// automaton processes them (not Matcher.arrivals)
	order uint64
	ts    int64
	data  expr.Event
	raw   []byte
	pos   uint64 // source position (Input.Pos)
	refs  int32
}

type nodeKey struct {
	order uint64
	stage int32
}

type node struct {
	key     nodeKey
	ev      *event
	edges   []edge // in insertion order, removed ones marked until compacted
	refs    int32
	removed int32 // edges marked removed
	// maxVer is the length of the longest version an edge of the node was
	// added with; unlocked is set on a node whose edges got their lock
	// counts other than by processing (decoded or migrated state), where
	// a live edge may hold no lock. Both serve bumpsInPlace. (Next to the
	// other small fields: the node stays within 112 bytes.)
	maxVer   int32
	dead     bool // freed: no partial match or edge refers to it
	unlocked bool
	index    *edgeIndex // edges by version, for a node with many of them
	inline   [1]edge    // most nodes have one edge: no separate allocation
}

type edge struct {
	target  *node // nil: the first event of a match
	ver     dewey
	refs    int32 // locks (Flink's Lockable<SharedBufferEdge>)
	removed bool
}

// indexFrom is the number of live edges from which a node indexes them:
// locking, releasing and extracting look up the edges a version is
// compatible with instead of testing each (a node of a long followedByAny
// pattern can have thousands of edges, few compatible with any version).
const indexFrom = 24

// edgeIndex groups a node's edges by the first number of their version
// and, once some lookup needs it, orders them by (hash of the version's
// prefix, last number, edge index), one entry per edge in one array.
//
// A version longer than one number is compatible only with edges whose
// version starts with the same number (a prefix of it, or of its length
// and agreeing on all but the last), and the first number is the start
// state's version, which differs between partial matches started by
// different events. So a node of a loop, which collects an edge from
// every partial match that took its event — a version of a different
// length for each start event — has one or two edges in each group, and a
// lookup tests those instead of searching every length that occurs.
//
// In the ordered entries, the edges whose version has a given prefix are
// listed by their last number, and a run of them is found by binary search
// (one list per prefix: adding an edge moves only its prefix's entries,
// where one array of all shifted half of them). The
// prefix is all but the last number, hashed with FNV-1a over the numbers;
// a hash collision is told apart by comparing the edge's version itself.
// lens has bit l set when some edge's version has length l (l < 64), so a
// lookup only tries the prefix lengths that occur. They serve versions of
// one number and groups of indexFrom edges or more.
type edgeIndex struct {
	first []firstEnt            // the edges by (version's first number, edge index), removed ones included
	empty bool                  // an edge has an empty version: compatible with every version, in no group
	built bool                  // ents, lens and long are set
	ents  map[uint64][]indexEnt // by the hash of the version's prefix, ordered by (last number, edge index)
	lens  uint64
	long  bool // some version is 64 numbers or longer: try every length
}

type firstEnt struct{ first, at int32 }

// group returns the entries of the edges whose version starts with f.
func (ix *edgeIndex) group(f int32) []firstEnt {
	lo, _ := slices.BinarySearchFunc(ix.first, f, func(e firstEnt, f int32) int { return cmp.Compare(e.first, f) })
	hi := lo
	for hi < len(ix.first) && ix.first[hi].first == f {
		hi++
	}
	return ix.first[lo:hi]
}

type indexEnt struct {
	last int32 // the version's last number
	at   int32 // edge index
}

const prefixHashSeed uint64 = 14695981039346656037

// prefixHash extends the hash of a version prefix by one number (FNV-1a
// over the numbers).
func prefixHash(h uint64, x int32) uint64 {
	return (h ^ uint64(uint32(x))) * 1099511628211
}

// search returns the first entry of es at or after (last, at).
func search(es []indexEnt, last, at int32) int {
	lo, hi := 0, len(es)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		e := &es[mid]
		if e.last < last || (e.last == last && e.at < at) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// indexEdge adds edge i (the last one added, or any while the index is
// built) to the index.
func (n *node) indexEdge(i int) {
	v := n.edges[i].ver
	if len(v) == 0 {
		n.index.empty = true
	} else {
		e := firstEnt{first: v[0], at: int32(i)}
		at, _ := slices.BinarySearchFunc(n.index.first, e, func(a, b firstEnt) int {
			if c := cmp.Compare(a.first, b.first); c != 0 {
				return c
			}
			return cmp.Compare(a.at, b.at)
		})
		n.index.first = slices.Insert(n.index.first, at, e)
	}
	if n.index.built {
		n.index.order(v, i)
	}
}

// order adds edge i, of version v, to the ordered entries.
func (ix *edgeIndex) order(v dewey, i int) {
	if len(v) == 0 {
		return // compatibleEdges tests every edge when one has an empty version
	}
	last := len(v) - 1
	if len(v) < 64 {
		ix.lens |= 1 << len(v)
	} else {
		ix.long = true
	}
	h := prefixHashSeed
	for _, x := range v[:last] {
		h = prefixHash(h, x)
	}
	es := ix.ents[h]
	ix.ents[h] = slices.Insert(es, search(es, v[last], int32(i)), indexEnt{last: v[last], at: int32(i)})
}

// compatibleEdges appends to out the indexes, ascending, of the live edges
// whose version ver is compatible with (dewey.compatible).
func (n *node) compatibleEdges(ver dewey, out []int32) []int32 {
	if n.index == nil {
		if len(n.edges)-int(n.removed) < indexFrom {
			for i := range n.edges {
				if e := &n.edges[i]; !e.removed && ver.compatible(e.ver) {
					out = append(out, int32(i))
				}
			}
			return out
		}
		n.index = &edgeIndex{first: make([]firstEnt, 0, len(n.edges))}
		for i := range n.edges {
			if !n.edges[i].removed {
				n.indexEdge(i)
			}
		}
	}
	ix := n.index
	if ix.empty {
		// an empty version is compatible with every version: test all
		for i := range n.edges {
			if e := &n.edges[i]; !e.removed && ver.compatible(e.ver) {
				out = append(out, int32(i))
			}
		}
		return out
	}
	if len(ver) > 1 {
		if g := ix.group(ver[0]); len(g) < indexFrom {
			for _, f := range g {
				if e := &n.edges[f.at]; !e.removed && ver.compatible(e.ver) {
					out = append(out, f.at)
				}
			}
			return out
		}
	}
	if !ix.built {
		ix.built = true
		ix.ents = make(map[uint64][]indexEnt)
		for i := range n.edges {
			if !n.edges[i].removed {
				ix.order(n.edges[i].ver, i)
			}
		}
	}
	from := len(out)
	h := prefixHashSeed // of ver[:l-1]
	for l := 1; l <= len(ver); l++ {
		if l > 1 {
			h = prefixHash(h, ver[l-2])
		}
		if !ix.long && (l >= 64 || ix.lens&(1<<l) == 0) {
			continue // no edge version of this length
		}
		ents := ix.ents[h]
		var j int
		var hi int32
		if l < len(ver) {
			// a shorter edge version must equal ver's prefix of its length
			j, hi = search(ents, ver[l-1], 0), ver[l-1]
		} else {
			// the same length: the edge's last number must not be larger
			j, hi = search(ents, minInt32, 0), ver[l-1]
		}
		for ; j < len(ents) && ents[j].last <= hi; j++ {
			i := ents[j].at
			if e := &n.edges[i]; !e.removed && len(e.ver) == l && slices.Equal(e.ver[:l-1], ver[:l-1]) {
				out = append(out, i)
			}
		}
	}
	slices.Sort(out[from:])
	return out
}

// removeEdge marks edge i removed, compacting the edges once most are.
func (n *node) removeEdge(i int32) {
	n.edges[i].removed = true
	n.removed++
}

// compact drops removed edges, keeping the order of the others.
func (n *node) compact() {
	if n.removed == 0 || int(n.removed)*2 < len(n.edges) {
		return
	}
	kept := n.edges[:0]
	for _, e := range n.edges {
		if !e.removed {
			kept = append(kept, e)
		}
	}
	clear(n.edges[len(kept):])
	n.edges = kept
	n.removed = 0
	n.index = nil // rebuilt on demand
}

// compState is a partial match (Flink's ComputationState).
type compState struct {
	state int32
	// sn: a completed match of a key under Pattern.seq is its tree's node
	// sn (the tree is its start event's); prev and ver are then unset
	sn      int32
	prev    *node
	ver     dewey
	startTs int64
	prevTs  int64
	// the start event's order (event.order); started is false for a partial match that
	// has accepted nothing (a start state). The start event's time is startTs.
	startOrder uint64
	started    bool
	// walked: conditions over events() have asked for this partial match's
	// events on an earlier event; evs: they asked again, and its events by
	// stage are kept (see evalCtx.stageEvents). Neither is encoded.
	walked bool
	evs    *evCache
}

// evCache is a partial match's events by stage, as events() lists them.
type evCache struct{ byStage [][]expr.Event }

// keyState is everything one key holds for one pattern.
type keyState struct {
	key       string
	partial   csQueue
	completed csQueue
	seq       *seqKey                 // the partial matches under Pattern.seq (partial is then empty); nil: the general step
	nEvents   int                     // events held by the buffer's nodes
	nBytes    int64                   // raw bytes of those events and of the queued ones (Matcher.StateBytes)
	acct      *int64                  // the matcher's sum of nBytes over its keys (nil: a key being built or converted)
	nNodes    int                     // live nodes: every one is reachable from a partial match (liveNodes)
	curEv     *event                  // the event put last made nodes for ...
	curNodes  []*node                 // ... and those nodes: only the current event gets new nodes
	nextOrder uint64                  // the next event's order (event.order)
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
	ks.partial.a, ks.partial.unsorted = ks.partial.a[:0], false
	ks.completed.a, ks.completed.unsorted = ks.completed.a[:0], false
	ks.nextOrder = 0
	ks.due, ks.hidx = 0, -1
	ks.preDrain = 0
	ks.deadline = maxInt64 // start states never time out
	ks.curEv, ks.curNodes = nil, ks.curNodes[:0]
	for _, c := range p.freshStarts {
		ks.partial.offer(c)
	}
}

// idle reports whether the key holds nothing but fresh start states.
func (ks *keyState) idle() bool {
	if ks.queue.Len() > 0 || ks.completed.len() > 0 || ks.nNodes > 0 {
		return false
	}
	if ks.seq != nil {
		return ks.seq.idle()
	}
	for _, e := range ks.partial.a {
		if e.started() || e.cs.prev != nil {
			return false
		}
	}
	return true
}

// partialCount is the number of partial matches that have accepted events.
func (ks *keyState) partialCount() int {
	if ks.seq != nil {
		return ks.seq.alive + ks.completed.len()
	}
	n := 0
	for i := range ks.partial.a {
		if ks.partial.a[i].started() {
			n++
		}
	}
	return n + ks.completed.len()
}

// addBytes counts n more raw bytes held by the key, in its matcher's sum
// too: the sum moves with each event buffered or freed, so reading it costs
// nothing and it follows from the state alone.
func (ks *keyState) addBytes(n int64) {
	ks.nBytes += n
	if ks.acct != nil {
		*ks.acct += n
	}
}

// bufferedCount is the number of events the key's partial and completed
// matches hold.
func (ks *keyState) bufferedCount() int { return ks.nEvents }

// lockNode is Flink's SharedBufferAccessor.lockNode: a new reference to n
// under version ver (a partial match there, or an edge into it) locks n
// and each of its edges that ver is compatible with.
func (ks *keyState) lockNode(n *node, ver dewey) {
	if n == nil {
		return
	}
	n.refs++
	if n.index == nil && len(n.edges)-int(n.removed) < indexFrom {
		for i := range n.edges {
			if e := &n.edges[i]; !e.removed && ver.compatible(e.ver) {
				e.refs++
			}
		}
		return
	}
	var ib [32]int32
	for _, i := range n.compatibleEdges(ver, ib[:0]) {
		n.edges[i].refs++
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
	var ib [32]int32
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		cur := it.n
		if cur.index == nil && len(cur.edges)-int(cur.removed) < indexFrom {
			for i := range cur.edges {
				if e := &cur.edges[i]; !e.removed && it.ver.compatible(e.ver) && releaseCount(&e.refs) {
					cur.removeEdge(int32(i))
					if e.target != nil {
						stack = append(stack, releaseItem{e.target, e.ver})
					}
				}
			}
		} else {
			for _, i := range cur.compatibleEdges(it.ver, ib[:0]) {
				e := &cur.edges[i]
				if releaseCount(&e.refs) {
					cur.removeEdge(i)
					if e.target != nil {
						stack = append(stack, releaseItem{e.target, e.ver})
					}
				}
			}
		}
		if !releaseCount(&cur.refs) {
			cur.compact()
			continue
		}
		cur.dead = true
		ks.nNodes--
		cur.ev.refs--
		if cur.ev.refs == 0 {
			ks.nEvents--
			ks.addBytes(-int64(len(cur.ev.raw)))
		}
		for _, e := range cur.edges {
			if !e.removed && e.target != nil {
				stack = append(stack, releaseItem{e.target, e.ver})
			}
		}
		cur.edges, cur.index, cur.removed = nil, nil, 0
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

// put stores event ev at a stage for a partial match at prev with version
// ver (Flink's SharedBufferAccessor.put): into the node the event already
// has at that stage, made on first use. (A plain sequence makes a node
// per partial match instead: takeOwn.)
func (ks *keyState) put(stage int32, ev *event, prev *node, ver dewey) *node {
	ks.lockNode(prev, ver)
	if ks.curEv != ev {
		clear(ks.curNodes)
		ks.curEv, ks.curNodes = ev, ks.curNodes[:0]
	}
	var n *node
	for _, c := range ks.curNodes {
		if c.key.stage == stage && !c.dead {
			n = c
			break
		}
	}
	if n == nil {
		n = ks.newNode(nodeKey{order: ev.order, stage: stage}, ev)
		ks.curNodes = append(ks.curNodes, n)
	}
	n.addEdge(edge{target: prev, ver: ver})
	if n.index != nil {
		n.indexEdge(len(n.edges) - 1)
	}
	return n
}

// addEdge appends an edge to the node.
func (n *node) addEdge(e edge) {
	n.edges = append(n.edges, e)
	n.maxVer = max(n.maxVer, int32(len(e.ver)))
}

// bumpsInPlace reports whether a partial match at n with version ver can
// move to version ver.increase(k) without locking n under the new version
// and releasing it under the old one, because the two cancel out: no edge
// of n is as long as ver, so an edge is compatible with either version
// exactly when it equals a proper prefix of ver, which the increase leaves
// as it is; and each such edge holds a lock (the partial match's own), so
// the release cannot remove it.
func bumpsInPlace(n *node, ver dewey) bool {
	return n == nil || (!n.unlocked && int(n.maxVer) < len(ver))
}

// newNode makes the node of event ev at a stage, counting it and the event.
func (ks *keyState) newNode(k nodeKey, ev *event) *node {
	n := &node{}
	ks.initNode(n, k, ev)
	return n
}

// initNode makes *n (zero) the node of event ev at a stage, counting it and
// the event.
func (ks *keyState) initNode(n *node, k nodeKey, ev *event) {
	n.key, n.ev = k, ev
	n.edges = n.inline[:0:1]
	if ev.refs == 0 {
		ks.nEvents++
		ks.addBytes(int64(len(ev.raw)))
	}
	ev.refs++
	ks.nNodes++
}

// ownTake is what a take makes in a plain sequence (Pattern.ownPaths), in
// one allocation: the event's node of the partial match that takes it, the
// partial match that moves on from there, and (when it fits) that one's
// version, whose prefix is the node's edge.
type ownTake struct {
	n   node
	cs  compState
	ver [12]int32
}

// takeOwn is a take of event ev at a stage by partial match from, whose
// version is first increased by inc, in a plain sequence: the node the
// event gets and the partial match in state target it leads to, appended
// to out (nextStates' TAKE with put and addCS in one allocation).
func (ks *keyState) takeOwn(out []*compState, target *cstate, stage int32, ev *event, from *compState, inc int, startTs int64, startOrder uint64) []*compState {
	t := new(ownTake)
	l := len(from.ver)
	var next dewey
	if l < len(t.ver) {
		next = t.ver[: l+1 : l+1]
	} else {
		next = make(dewey, l+1)
	}
	copy(next, from.ver)
	next[l-1] += int32(inc)
	cur := next[:l:l]
	ks.lockNode(from.prev, cur)
	ks.initNode(&t.n, nodeKey{order: ev.order, stage: stage}, ev)
	t.n.addEdge(edge{target: from.prev, ver: cur})
	ks.lockNode(&t.n, next)
	t.cs = compState{state: int32(target.id), prev: &t.n, ver: next, startTs: startTs, prevTs: ev.ts, startOrder: startOrder, started: true}
	return append(out, &t.cs)
}

// liveNodes returns the key's nodes ordered by event order and stage:
// those reachable from a partial match along edges not removed, which are
// all the live ones (a node is freed once no partial match and no edge
// refers to it).
func (ks *keyState) liveNodes() []*node {
	out := make([]*node, 0, ks.nNodes)
	seen := make(map[*node]struct{}, ks.nNodes)
	var stack []*node
	for _, q := range []*csQueue{&ks.partial, &ks.completed} {
		for _, e := range q.a {
			stack = append(stack, e.cs.prev)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == nil {
			continue
		}
		if _, ok := seen[n]; ok {
			continue
		}
		seen[n] = struct{}{}
		out = append(out, n)
		for i := range n.edges {
			if !n.edges[i].removed {
				stack = append(stack, n.edges[i].target)
			}
		}
	}
	// stable: nodes of one event and stage (Pattern.ownPaths) stay in the
	// order the walk from the queues found them, which the structure decides
	slices.SortStableFunc(out, func(a, b *node) int {
		if c := cmp.Compare(a.key.order, b.key.order); c != 0 {
			return c
		}
		return cmp.Compare(a.key.stage, b.key.stage)
	})
	return out
}

// deriveLocks sets every node's and edge's lock count from the structure:
// each partial match at a node and each edge into it holds one lock on
// the node and one on each of its edges its version is compatible with
// (what lockNode did when they were made). For a state built other than
// by processing events (migration).
func (ks *keyState) deriveLocks() {
	nodes := ks.liveNodes()
	for _, n := range nodes {
		n.refs = 0
		for i := range n.edges {
			n.edges[i].refs = 0
		}
	}
	for _, n := range nodes {
		for _, e := range n.edges {
			if !e.removed {
				ks.lockNode(e.target, e.ver)
			}
		}
	}
	for _, q := range []*csQueue{&ks.partial, &ks.completed} {
		for _, e := range q.a {
			ks.lockNode(e.cs.prev, e.cs.ver)
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
		for _, i := range cur.n.compatibleEdges(cur.ver, nil) {
			e := &cur.n.edges[i]
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

// currentMatch returns the partial match's events (the path extraction
// lists first), using *scratch as the walk's buffer.
func currentMatch(c *compState, scratch *[]*node) path {
	p := appendCurrentMatch(nil, c, scratch)
	if len(p) == 0 {
		return nil
	}
	return p
}

// appendCurrentMatch appends the partial match's events (the path
// extraction lists first) to dst, using *scratch as the walk's buffer.
func appendCurrentMatch(dst []*node, c *compState, scratch *[]*node) []*node {
	if c.prev == nil {
		return dst
	}
	buf := (*scratch)[:0]
	defer func() {
		clear(buf)
		*scratch = buf[:0]
	}()
	if !firstPath(c.prev, c.ver, &buf) {
		return dst
	}
	for i := len(buf) - 1; i >= 0; i-- {
		dst = append(dst, buf[i])
	}
	return dst
}

// firstPath finds the path extract would list first (its depth-first
// search pops the last compatible edge first) without listing the others,
// leaving it in *buf from the last event backwards.
func firstPath(n *node, ver dewey, buf *[]*node) bool {
	if n == nil {
		return true
	}
	*buf = append(*buf, n)
	if len(n.edges) == 1 {
		// most nodes have a single edge
		if e := &n.edges[0]; !e.removed && ver.compatible(e.ver) && firstPath(e.target, e.ver, buf) {
			return true
		}
		*buf = (*buf)[:len(*buf)-1]
		return false
	}
	var ib [8]int32
	idx := n.compatibleEdges(ver, ib[:0])
	for k := len(idx) - 1; k >= 0; k-- {
		e := &n.edges[idx[k]]
		if firstPath(e.target, e.ver, buf) {
			return true
		}
	}
	*buf = (*buf)[:len(*buf)-1]
	return false
}

// pathWalker reads a partial match's path back from its last node, one
// node at a time, as firstPath finds it: at each node the last compatible
// edge. firstPath backtracks from a node without compatible edges; a path
// processing made has none (an edge into a node locks the edges there its
// version is compatible with, so they stay while it does), so the walk
// never meets one. Should it, lost is set and the caller reads the path
// with firstPath instead.
type pathWalker struct {
	n    *node
	ver  dewey
	lost bool
}

// next returns the next node back, nil after the first one.
func (w *pathWalker) next() *node {
	cur := w.n
	if cur == nil || w.lost {
		return nil
	}
	if len(cur.edges) == 1 {
		if e := &cur.edges[0]; !e.removed && w.ver.compatible(e.ver) {
			w.n, w.ver = e.target, e.ver
			return cur
		}
		w.lost = true
		return nil
	}
	var ib [8]int32
	idx := cur.compatibleEdges(w.ver, ib[:0])
	if len(idx) == 0 {
		w.lost = true
		return nil
	}
	e := &cur.edges[idx[len(idx)-1]]
	w.n, w.ver = e.target, e.ver
	return cur
}

// bufferedEvents returns the events the key's nodes hold, by order.
func (ks *keyState) bufferedEvents() []*event {
	out := make([]*event, 0, ks.nEvents)
	for _, n := range ks.liveNodes() {
		if len(out) == 0 || out[len(out)-1] != n.ev {
			out = append(out, n.ev)
		}
	}
	return out
}
