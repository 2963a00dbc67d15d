package nfa

import "slices"

// A sequence of followedByAny stages (Pattern.seq).
//
// In a pattern whose stages are single events, each after the first
// connected by followedByAny, with conditions on the event alone, a
// partial match never leaves its state but to time out or be pruned: each
// event its next stage accepts adds a partial match that took it and keeps
// the one that did not. A key's partial matches multiply (CORE length 9:
// 237 per key) and the general step visits every one of them on every
// event, bumps its version and rebuilds the queue, although all that can
// change is which of them take the event.
//
// Here a key holds, per start event, the tree of its partial matches (a
// node per event taken, pointing at the partial match that took it), with
// the partial matches waiting for each stage listed. An event is looked
// at once per stage; only the partial matches waiting for a stage whose
// condition it meets are touched, each adding one node; a window times out
// or a skip strategy prunes a start event's tree at once.
//
// Nothing observable differs from the general step: the versions a
// partial match would hold follow from the tree (a partial match's last
// number counts the events it took, Flink's calculateIncreasingSelfState
// when the only ignore leads back to the state), the queue's order is the trees' post-order (a take's result comes before
// the partial match that took it), and completed matches go through the
// key's completed queue as they do there. So a key's state converts to
// the general one exactly (seqGeneral): that is how it is encoded, and
// what a key turns into when the general step is needed (the partial-match
// bound is reached, or timeouts are reported). TestSeqEqualsGeneral checks
// records, statistics and the encoded state after every input line.

// seqPlan is the automaton of a sequence pattern, by stage.
type seqPlan struct {
	take  []*cond // the condition of each stage
	state []int32 // the state waiting for each stage
	stage []int32 // each stage's index in Pattern.stageNames
	final int32   // the final state
}

// seqPlanOf returns the plan of p when it is a sequence of followedByAny
// stages with conditions on the event alone, nil otherwise.
func seqPlanOf(p *Pattern) *seqPlan {
	if !p.ownPaths || p.sql || p.tieLess != nil || p.rowFn != nil || p.stageWindows || len(p.startStates) != 1 {
		return nil
	}
	pl := &seqPlan{}
	st := p.states[p.startStates[0]]
	for k := 0; ; k++ {
		if st.typ != stNormal || st.hasWindow || !st.eventOnly || (k > 0) == st.start {
			return nil
		}
		var take, ignore *transition
		for _, t := range st.trans {
			switch {
			case t.action == aTake && take == nil:
				take = t
			case t.action == aIgnore && ignore == nil && t.target == st:
				ignore = t
			default:
				return nil
			}
		}
		if take == nil || take.cond == nil {
			return nil
		}
		if k > 0 {
			// followedByAny: the partial match stays whether it takes or not
			if ignore == nil || (ignore.cond != nil && ignore.cond.op != cTrue) {
				return nil
			}
		} else if ignore != nil && !leavesWithin(ignore.cond, take.cond) {
			// the start state's ignore is evaluated with its take: it may
			// only read the same conditions (its errors are the take's)
			return nil
		}
		pl.take = append(pl.take, take.cond)
		pl.state = append(pl.state, int32(st.id))
		pl.stage = append(pl.stage, p.stageOf[st.id])
		if take.target.typ == stFinal {
			pl.final = int32(take.target.id)
			break
		}
		if len(pl.take) > len(p.states) {
			return nil
		}
		st = take.target
	}
	if len(pl.take) < 2 {
		return nil
	}
	return pl
}

// leavesWithin reports whether every condition c reads is one of those in.
func leavesWithin(c, in *cond) bool {
	if c == nil {
		return true
	}
	if c.op == cLeaf {
		var has func(x *cond) bool
		has = func(x *cond) bool {
			return x != nil && ((x.op == cLeaf && x.leaf == c.leaf) || has(x.x) || has(x.y))
		}
		return has(in)
	}
	return leavesWithin(c.x, in) && leavesWithin(c.y, in)
}

// seqNode is an event taken by a partial match of a start event's tree.
// It refers to nothing but its parent, so that a take reads and writes
// only the ends of arrays (the parent's count of takes is in its wait
// entry): a node is kept, holding its event, while a partial match waits
// there, a completed match ends there or a kept node follows it, which in
// a tree with partial matches waiting is every node but the completed
// matches left; a tree whose partial matches ended works it out
// (seqGroup.rekeep).
type seqNode struct {
	ev     *event
	parent int32 // index of the node before it in the tree; -1 for the start event
	// pv is the last number of the taking partial match's version when it
	// took the event (the start state's for the start event): the node's
	// edge is the pv of the nodes from the start event to here.
	pv    int32
	depth int16 // events from the start event to here
	flags uint8
}

const (
	snAlive   = 1 << iota // a partial match waits here for the next stage
	snPending             // a completed match ending here is in the completed queue
	snKept                // the node holds its event
)

// seqWait is a partial match waiting in a tree: its node and the events it
// took (the last number of its version).
type seqWait struct {
	n     int32
	takes int32
}

// seqGroup is the tree of the partial matches started by one event.
type seqGroup struct {
	start *event
	nodes []seqNode
	// wait[d]: the partial matches that took d events, in the order they
	// were made
	wait    [][]seqWait
	alive   int // partial matches waiting
	live    int // nodes kept
	pending int // completed matches in the key's completed queue
	refs    []int32
}

// seqKey is a key's state under Pattern.seq: its trees by start event.
type seqKey struct {
	groups []*seqGroup
	count  []int // partial matches waiting for each stage, over the groups
	alive  int   // their sum
	starts int32 // events the start state took (its version is 1+starts)
	start  bool  // the start state is there (not after StopStarting)
	free   []*seqGroup
	cand   []seqCand // completions of the current step
}

type seqCand struct {
	g *seqGroup
	n int32
}

func (sk *seqKey) reset(stages int) {
	for _, g := range sk.groups {
		sk.recycle(g)
	}
	clear(sk.groups)
	sk.groups = sk.groups[:0]
	if len(sk.count) != stages {
		sk.count = make([]int, stages)
	}
	clear(sk.count)
	sk.alive, sk.starts, sk.start = 0, 0, true
}

func (sk *seqKey) recycle(g *seqGroup) {
	clear(g.nodes)
	g.nodes = g.nodes[:0]
	for d := range g.wait {
		g.wait[d] = g.wait[d][:0]
	}
	g.start, g.alive, g.live, g.pending = nil, 0, 0, 0
	if len(sk.free) < 64 {
		sk.free = append(sk.free, g)
	}
}

func (sk *seqKey) newGroup(stages int, start *event) *seqGroup {
	var g *seqGroup
	if n := len(sk.free); n > 0 {
		g = sk.free[n-1]
		sk.free = sk.free[:n-1]
	} else {
		g = &seqGroup{}
	}
	if len(g.wait) != stages {
		g.wait = make([][]seqWait, stages)
	}
	g.start = start
	return g
}

// idle reports whether the key holds no partial or completed match.
func (sk *seqKey) idle() bool { return len(sk.groups) == 0 }

func holdEvent(ks *keyState, ev *event, n int32) {
	if ev.refs == 0 {
		ks.nEvents++
	}
	ev.refs += n
}

func dropEvent(ks *keyState, ev *event) {
	if ev.refs--; ev.refs == 0 {
		ks.nEvents--
	}
}

// refsOf counts each node's references: a partial match waiting there, a
// completed match ending there and each kept node after it.
func (g *seqGroup) refsOf() []int32 {
	refs := g.refs[:0]
	for i := range g.nodes {
		r := int32(0)
		if g.nodes[i].flags&(snAlive|snPending) != 0 {
			r = 1
		}
		refs = append(refs, r)
	}
	for i := len(g.nodes) - 1; i >= 0; i-- {
		if p := g.nodes[i].parent; refs[i] > 0 && p >= 0 {
			refs[p]++
		}
	}
	g.refs = refs
	return refs
}

// rekeep lets go of the nodes nothing refers to any more.
func (g *seqGroup) rekeep(ks *keyState) {
	refs := g.refsOf()
	for i := range g.nodes {
		if n := &g.nodes[i]; n.flags&snKept != 0 && refs[i] == 0 {
			n.flags &^= snKept
			g.live--
			dropEvent(ks, n.ev)
		}
	}
}

// seqDone removes completed match n of g from the tree.
func (ks *keyState) seqDone(g *seqGroup, n int32) {
	g.pending--
	g.nodes[n].flags &^= snPending
	if g.alive > 0 {
		// the nodes before it have partial matches waiting
		g.nodes[n].flags &^= snKept
		g.live--
		dropEvent(ks, g.nodes[n].ev)
		return
	}
	g.rekeep(ks)
}

// seqEnd ends every partial match of g (a timeout or a skip strategy's
// pruning); the tree goes once no completed match refers to it.
func (ks *keyState) seqEnd(g *seqGroup) {
	sk := ks.seq
	for d := range g.wait {
		sk.count[d] -= len(g.wait[d])
		for _, w := range g.wait[d] {
			g.nodes[w.n].flags &^= snAlive
		}
		g.wait[d] = g.wait[d][:0]
	}
	sk.alive -= g.alive
	g.alive = 0
	if g.pending > 0 {
		g.rekeep(ks)
		return
	}
	for i := range g.nodes {
		if g.nodes[i].flags&snKept != 0 {
			dropEvent(ks, g.nodes[i].ev)
		}
	}
	g.live = 0
}

// seqSweep removes the trees nothing refers to any more.
func (sk *seqKey) sweep() {
	kept := sk.groups[:0]
	for _, g := range sk.groups {
		if g.live == 0 {
			sk.recycle(g)
			continue
		}
		kept = append(kept, g)
	}
	clear(sk.groups[len(kept):])
	sk.groups = kept
}

// group returns the tree of the partial match started at (ts, seq).
func (sk *seqKey) group(ts int64, seq uint64) *seqGroup {
	i, ok := slices.BinarySearchFunc(sk.groups, qent{ts: ts, seq: seq}, func(g *seqGroup, k qent) int {
		e := qent{ts: g.start.ts, seq: g.start.seq}
		return cmpEnt(&e, &k)
	})
	if !ok {
		panic("nfa: completed match of a tree that is gone")
	}
	return sk.groups[i]
}

// before reports whether node x comes before node y, both at one depth,
// in the tree's post-order (children in the order they were made).
func (g *seqGroup) before(x, y int32) bool {
	for {
		px, py := g.nodes[x].parent, g.nodes[y].parent
		if px == py {
			return x < y
		}
		x, y = px, py
	}
}

// seqEvent is processEvent for a key under Pattern.seq.
func (m *Matcher) seqEvent(ks *keyState, ev *event) []path {
	m.nextGen()
	sk, pl := ks.seq, m.p.seq
	ctx := &m.ctx
	*ctx = evalCtx{m: m, ev: ev}
	last := len(pl.take) - 1
	// a stage's partial matches take before the previous stage's make new
	// ones there, which must not take the same event
	for k := last; k >= 1; k-- {
		if sk.count[k] == 0 || !m.check(pl.take[k], ctx) {
			continue
		}
		hev := m.heapEvent(ev)
		made := 0
		for _, g := range sk.groups {
			w := g.wait[k]
			if len(w) == 0 {
				continue
			}
			made += len(w)
			if k == last {
				for x := range w {
					g.nodes = append(g.nodes, seqNode{ev: hev, parent: w[x].n, pv: w[x].takes, depth: int16(k + 1), flags: snPending | snKept})
					w[x].takes++
					sk.cand = append(sk.cand, seqCand{g: g, n: int32(len(g.nodes) - 1)})
				}
				g.pending += len(w)
				g.live += len(w)
				continue
			}
			next := g.wait[k+1]
			for x := range w {
				next = append(next, seqWait{n: int32(len(g.nodes))})
				g.nodes = append(g.nodes, seqNode{ev: hev, parent: w[x].n, pv: w[x].takes, depth: int16(k + 1), flags: snAlive | snKept})
				w[x].takes++
			}
			g.wait[k+1] = next
			g.alive += len(w)
			g.live += len(w)
		}
		holdEvent(ks, hev, int32(made))
		if k < last {
			sk.count[k+1] += made
			sk.alive += made
		}
	}
	if sk.start && m.mayStart && m.check(pl.take[0], ctx) {
		hev := m.heapEvent(ev)
		g := sk.newGroup(len(pl.take), hev)
		g.nodes = append(g.nodes, seqNode{ev: hev, parent: -1, pv: 1 + sk.starts, depth: 1, flags: snAlive | snKept})
		g.wait[1] = append(g.wait[1], seqWait{n: 0})
		g.alive, g.live = 1, 1
		holdEvent(ks, hev, 1)
		sk.count[1]++
		sk.alive++
		sk.starts++
		sk.groups = append(sk.groups, g)
	}
	var out []path
	if len(sk.cand) > 0 {
		// completed in queue order: by tree (as made), then post-order
		cand := sk.cand
		for i := 0; i < len(cand); {
			j := i + 1
			for j < len(cand) && cand[j].g == cand[i].g {
				j++
			}
			g := cand[i].g
			slices.SortFunc(cand[i:j], func(a, b seqCand) int {
				if g.before(g.nodes[a.n].parent, g.nodes[b.n].parent) {
					return -1
				}
				return 1
			})
			i = j
		}
		for _, c := range cand {
			ks.completed.offer(&compState{state: pl.final, sn: c.n, startTs: c.g.start.ts, startSeq: c.g.start.seq,
				prevTs: ev.ts, started: true})
		}
		clear(cand)
		sk.cand = cand[:0]
		out = m.seqEmit(ks)
	}
	m.prunedPartial = false
	if limit := m.MaxPartialMatches; limit > 0 && sk.alive > limit {
		m.seqToGeneral(ks)
		m.capPartial(ks)
		m.recomputeDeadline(ks)
		return out
	}
	ks.deadline = m.seqDeadline(ks)
	return out
}

// seqEmit is emitCompleted for a key under Pattern.seq.
func (m *Matcher) seqEmit(ks *keyState) []path {
	sk := ks.seq
	var out []path
	for {
		earliest := ks.completed.peek()
		if earliest == nil {
			break
		}
		if m.p.skip.kind != skipNone {
			if g := sk.firstAlive(); g != nil && cmpEvent(&event{ts: earliest.startTs, seq: earliest.startSeq}, g.start) > 0 {
				break
			}
		}
		ks.completed.poll()
		g := sk.group(earliest.startTs, earliest.startSeq)
		p := m.seqPath(g, earliest.sn)
		// (the general step releases the match after pruning: the state
		// after both is the same, and the trees pruned have no completed
		// match left then)
		ks.seqDone(g, earliest.sn)
		if pid := m.p.skip.pruningID(m.p, []path{p}); pid != nil {
			m.seqPrune(ks, pid)
		}
		out = append(out, p)
		sk.sweep()
	}
	return out
}

func (sk *seqKey) firstAlive() *seqGroup {
	for _, g := range sk.groups {
		if g.alive > 0 {
			return g
		}
	}
	return nil
}

// seqPrune is prune on both queues for a key under Pattern.seq.
func (m *Matcher) seqPrune(ks *keyState, pid *event) {
	sk := ks.seq
	inclusive := m.p.skip.kind == skipToNext || m.p.skip.kind == skipPastLast
	drop := func(start *event) bool {
		d := cmpEvent(start, pid)
		return d < 0 || (inclusive && d == 0)
	}
	ks.completed.removeIf(func(c *compState) bool {
		if !drop(&event{ts: c.startTs, seq: c.startSeq}) {
			return false
		}
		ks.seqDone(sk.group(c.startTs, c.startSeq), c.sn)
		return true
	})
	for _, g := range sk.groups {
		if !drop(g.start) {
			break
		}
		if g.alive > 0 {
			ks.seqEnd(g)
			m.prunedPartial = true
		}
	}
}

// seqPath is the match ending at node n of g, as the records read it.
func (m *Matcher) seqPath(g *seqGroup, n int32) path {
	d := int(g.nodes[n].depth)
	nodes := make([]node, d)
	p := make(path, d)
	for i := d - 1; i >= 0; i-- {
		sn := &g.nodes[n]
		nodes[i] = node{key: nodeKey{seq: sn.ev.seq, stage: m.p.seq.stage[i]}, ev: sn.ev}
		p[i] = &nodes[i]
		n = sn.parent
	}
	return p
}

// seqDeadline is when the key's earliest partial match times out.
func (m *Matcher) seqDeadline(ks *keyState) int64 {
	if m.p.windowTime <= 0 {
		return maxInt64
	}
	if g := ks.seq.firstAlive(); g != nil {
		return satAdd(g.start.ts, m.p.windowTime)
	}
	return maxInt64
}

// seqAdvanceTime is advanceTime for a key under Pattern.seq whose timeouts
// are not reported: it returns the matches completed since and counts the
// partial matches timed out.
func (m *Matcher) seqAdvanceTime(ks *keyState, now int64) []path {
	sk := ks.seq
	changed := false
	for _, g := range sk.groups {
		if g.alive == 0 {
			continue
		}
		if !timedOut(now, g.start.ts, m.p.windowTime) {
			break
		}
		m.stats.Timeouts += uint64(g.alive)
		ks.seqEnd(g)
		changed = true
	}
	if !changed {
		return nil
	}
	sk.sweep()
	return m.seqEmit(ks)
}

// seqGeneral returns the key's state as the general step holds it: the
// same partial matches, nodes, versions and queues, in the same order.
// The key is left as it is; the events are shared.
func (m *Matcher) seqGeneral(ks *keyState) *keyState {
	sk, pl := ks.seq, m.p.seq
	out := &keyState{key: ks.key, nextSeq: ks.nextSeq, preDrain: ks.preDrain, due: ks.due, hidx: ks.hidx,
		gen: ks.gen, deadline: ks.deadline, nEvents: ks.nEvents, queue: ks.queue}
	nodes := make(map[*seqGroup][]*node, len(sk.groups))
	edgeVer := func(g *seqGroup, i int32) dewey {
		n := &g.nodes[i]
		v := make(dewey, n.depth)
		for j := int(n.depth) - 1; j >= 0; j-- {
			v[j] = g.nodes[i].pv
			i = g.nodes[i].parent
		}
		return v
	}
	verOf := func(v dewey, last int32) dewey { return append(slices.Clip(v), last) }
	for _, g := range sk.groups {
		refs := g.refsOf()
		gn := make([]*node, len(g.nodes))
		for i := range g.nodes {
			sn := &g.nodes[i]
			if refs[i] == 0 {
				continue
			}
			n := &node{key: nodeKey{seq: sn.ev.seq, stage: pl.stage[sn.depth-1]}, ev: sn.ev, refs: refs[i]}
			var target *node
			if sn.parent >= 0 {
				target = gn[sn.parent]
			}
			n.edges = n.inline[:0:1]
			n.addEdge(edge{target: target, ver: edgeVer(g, int32(i)), refs: refs[i]})
			gn[i] = n
			out.nNodes++
		}
		nodes[g] = gn
		if g.alive == 0 {
			continue
		}
		// post-order, a node's children in the order they were made
		children := make([][]int32, len(g.nodes))
		for i := range g.nodes {
			if p := g.nodes[i].parent; p >= 0 && refs[i] > 0 {
				children[p] = append(children[p], int32(i))
			}
		}
		takes := make(map[int32]int32, g.alive)
		for _, w := range g.wait {
			for _, x := range w {
				takes[x.n] = x.takes
			}
		}
		var walk func(i int32)
		walk = func(i int32) {
			for _, c := range children[i] {
				walk(c)
			}
			sn := &g.nodes[i]
			if sn.flags&snAlive == 0 {
				return
			}
			c := &compState{state: pl.state[sn.depth], prev: gn[i], ver: verOf(edgeVer(g, i), takes[i]),
				startTs: g.start.ts, prevTs: sn.ev.ts, startSeq: g.start.seq, started: true}
			out.partial.offer(c)
		}
		walk(0)
	}
	if sk.start {
		start := m.p.freshStarts[0]
		if sk.starts > 0 {
			start = &compState{state: start.state, ver: dewey{1 + sk.starts}, startTs: -1, prevTs: -1}
		}
		out.partial.offer(start)
	}
	for _, e := range ks.completed.a {
		c := e.cs
		g := sk.group(c.startTs, c.startSeq)
		gc := &compState{state: c.state, prev: nodes[g][c.sn], ver: verOf(edgeVer(g, c.sn), 0),
			startTs: c.startTs, prevTs: c.prevTs, startSeq: c.startSeq, started: true}
		out.completed.a = append(out.completed.a, entOf(gc))
	}
	out.completed.unsorted = ks.completed.unsorted
	return out
}

// seqToGeneral turns a key under Pattern.seq into a general one for good
// (until it is recycled).
func (m *Matcher) seqToGeneral(ks *keyState) {
	g := m.seqGeneral(ks)
	sk := ks.seq
	for _, gr := range sk.groups {
		sk.recycle(gr)
	}
	clear(sk.groups)
	sk.groups = sk.groups[:0]
	ks.partial, ks.completed, ks.nNodes = g.partial, g.completed, g.nNodes
	ks.seq = nil
	m.spareSeq = sk
}

// seqFromGeneral turns a general key of a Pattern.seq pattern into one
// under Pattern.seq when its state is one the sequence step makes
// (checked by encoding both), and reports whether it did.
func (m *Matcher) seqFromGeneral(ks *keyState) bool {
	pl := m.p.seq
	if pl == nil || m.noSeq {
		return false
	}
	sk := &seqKey{}
	sk.reset(len(pl.take))
	sk.start = false
	depthOf := make(map[int32]int, len(pl.state)) // waiting state -> depth
	for d, s := range pl.state {
		depthOf[s] = d
	}
	type place struct {
		g *seqGroup
		i int32
	}
	at := map[*node]place{}
	takes := map[place]int32{}
	groups := map[uint64]*seqGroup{}
	// the nodes of a partial match, from its start event
	var chain func(n *node) (place, bool)
	chain = func(n *node) (place, bool) {
		if p, ok := at[n]; ok {
			return p, true
		}
		if n.dead || len(n.edges)-int(n.removed) != 1 || len(n.edges) != 1 {
			return place{}, false
		}
		e := &n.edges[0]
		var g *seqGroup
		parent := int32(-1)
		if e.target == nil {
			if len(e.ver) != 1 || groups[n.ev.seq] != nil {
				return place{}, false
			}
			g = sk.newGroup(len(pl.take), n.ev)
			groups[n.ev.seq] = g
			sk.groups = append(sk.groups, g)
		} else {
			pp, ok := chain(e.target)
			if !ok {
				return place{}, false
			}
			g, parent = pp.g, pp.i
		}
		depth := len(e.ver)
		if depth > len(pl.take) || n.key.stage != pl.stage[depth-1] {
			return place{}, false
		}
		g.nodes = append(g.nodes, seqNode{ev: n.ev, parent: parent, pv: e.ver[depth-1], depth: int16(depth)})
		p := place{g: g, i: int32(len(g.nodes) - 1)}
		at[n] = p
		return p, true
	}
	for _, e := range ks.partial.a {
		c := e.cs
		if !c.started {
			if c.state != pl.state[0] || c.prev != nil {
				return false
			}
			if len(c.ver) != 1 || c.ver[0] < 1 {
				return false
			}
			sk.start, sk.starts = true, c.ver[0]-1
			continue
		}
		d, ok := depthOf[c.state]
		if !ok || d == 0 || c.prev == nil {
			return false
		}
		p, ok := chain(c.prev)
		if !ok || int(p.g.nodes[p.i].depth) != d || p.g.nodes[p.i].flags != 0 || len(c.ver) != d+1 {
			return false
		}
		p.g.nodes[p.i].flags = snAlive
		takes[p] = c.ver[d]
	}
	var completed csQueue
	for _, e := range ks.completed.a {
		c := e.cs
		if c.state != pl.final || c.prev == nil {
			return false
		}
		p, ok := chain(c.prev)
		if !ok || int(p.g.nodes[p.i].depth) != len(pl.take) || p.g.nodes[p.i].flags != 0 {
			return false
		}
		p.g.nodes[p.i].flags = snPending
		p.g.pending++
		completed.a = append(completed.a, entOf(&compState{state: c.state, sn: p.i, startTs: c.startTs, startSeq: c.startSeq,
			prevTs: c.prevTs, started: true}))
	}
	completed.unsorted = ks.completed.unsorted
	// trees by start event, nodes in the order they were made (by event;
	// parents first), references counted from the structure
	slices.SortFunc(sk.groups, func(a, b *seqGroup) int { return cmpEvent(a.start, b.start) })
	for _, g := range sk.groups {
		order := make([]int32, len(g.nodes))
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortStableFunc(order, func(a, b int32) int {
			x, y := &g.nodes[a], &g.nodes[b]
			if c := cmpEvent(x.ev, y.ev); c != 0 {
				return c
			}
			return int(x.depth) - int(y.depth)
		})
		newIdx := make([]int32, len(order))
		for ni, oi := range order {
			newIdx[oi] = int32(ni)
		}
		nodes := make([]seqNode, len(order))
		for ni, oi := range order {
			nodes[ni] = g.nodes[oi]
			if nodes[ni].parent >= 0 {
				nodes[ni].parent = newIdx[nodes[ni].parent]
			}
		}
		g.nodes = nodes
		for i := range completed.a {
			if c := completed.a[i].cs; c.startSeq == g.start.seq && c.startTs == g.start.ts {
				c.sn = newIdx[c.sn]
			}
		}
		for ni, oi := range order {
			n := &g.nodes[ni]
			n.flags |= snKept
			if n.flags&snAlive != 0 {
				g.wait[n.depth] = append(g.wait[n.depth], seqWait{n: int32(ni), takes: takes[place{g: g, i: oi}]})
				g.alive++
				sk.count[n.depth]++
				sk.alive++
			}
		}
		g.live = len(g.nodes)
		if g.alive > 0 {
			// seqDone counts on every node of a tree with partial
			// matches waiting having one (not so after capPartial)
			for i := range g.nodes {
				if g.nodes[i].flags&(snAlive|snPending) == 0 {
					return false
				}
			}
		}
	}
	// the conversion is taken only when it gives back the same state
	saved := *ks
	conv := *ks
	conv.seq, conv.completed = sk, completed
	if string(m.appendKeyState(nil, m.seqGeneral(&conv))) != string(m.appendKeyState(nil, &saved)) {
		return false
	}
	ks.seq, ks.completed, ks.partial, ks.nNodes = sk, completed, csQueue{}, 0
	return true
}
