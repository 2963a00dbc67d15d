package nfa

import "slices"

// A sequence of single-event stages (Pattern.seq).
//
// In a pattern of single-event stages with conditions on the event alone,
// every partial match waiting for a stage decides alike on an event: under
// followedByAny each takes it and stays (the partial matches multiply:
// CORE length 9 holds 237 per key), under followedBy each moves on with it
// or all wait, under next all move on or all end. The general step still
// visits every partial match on every event, bumps its version and
// rebuilds the queue.
//
// Here a key holds, per start event, the tree of its partial matches (a
// node per event taken, pointing at the node of the partial match that
// took it), all trees' nodes in one array in the order they were made, and
// the partial matches waiting for each stage in one list per stage, in the
// order they were made. An event is tested once per stage; only the lists
// of the stages it meets are walked, each entry appending one node and one
// entry (a take reads and writes the ends of arrays only), and a
// followedBy or next stage's list empties at once. The whole-match window
// or a skip strategy ends whole trees, always the first ones by start; a
// stage's previous-and-current window the first entries of its list.
//
// Nothing observable differs from the general step: the versions a
// partial match would hold follow from the tree (a partial match's last
// number counts the events it took and stayed after, Flink's
// calculateIncreasingSelfState when the only ignore leads back to the
// state), the queue's order is the trees' post-order (a take's result
// comes before the partial match that took it), and completed matches go
// through the key's completed queue as they do there. So a key's state
// converts to the general one exactly (seqGeneral): that is how it is
// encoded, and what a key turns into when the general step is needed (the
// partial-match bound is reached). TestSeqEqualsGeneral checks records,
// statistics, counts and the encoded state after every input line.

// seqPlan is the automaton of a sequence pattern, by stage.
type seqPlan struct {
	take  []*cond // the condition of each stage
	state []int32 // the state waiting for each stage
	stage []int32 // each stage's index in Pattern.stageNames
	kind  []uint8 // how each stage after the first follows the one before
	// window: each stage's previous-and-current window (0: none): a
	// partial match waiting for it times out that long after its last
	// event
	window []int64
	final  int32 // the final state
	// allAny: every stage after the first is followedByAny, without a
	// window of its own, so a partial match only ends with its tree
	allAny bool
	// stageWindows: some stage has a window
	stageWindows bool
}

// How a stage follows the one before (seqPlan.kind).
const (
	seqAny     = iota // followedByAny: a partial match takes the event and stays
	seqRelaxed        // followedBy: it moves on with the event, and ignores others
	seqStrict         // next: it moves on with the next event, or ends
)

// seqPlanOf returns the plan of p when it is a sequence of single-event
// stages with conditions on the event alone, nil otherwise.
func seqPlanOf(p *Pattern) *seqPlan {
	if !p.ownPaths || len(p.startStates) != 1 {
		return nil
	}
	pl := &seqPlan{}
	st := p.states[p.startStates[0]]
	for k := 0; ; k++ {
		if st.typ != stNormal || !st.eventOnly || (k > 0) == st.start {
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
		kind := uint8(seqAny)
		if k > 0 {
			switch {
			case ignore == nil:
				kind = seqStrict
			case ignore.cond == nil || ignore.cond.op == cTrue:
			case ignore.cond.op == cNot && sameCond(ignore.cond.x, take.cond):
				kind = seqRelaxed
			default:
				return nil
			}
		} else if ignore != nil && !leavesWithin(ignore.cond, take.cond) {
			// the start state's ignore is evaluated with its take: it may
			// only read the same conditions (its errors are the take's)
			return nil
		}
		pl.take = append(pl.take, take.cond)
		pl.kind = append(pl.kind, kind)
		window := int64(0)
		if st.hasWindow && st.window > 0 {
			window = st.window
			pl.stageWindows = true
		}
		pl.window = append(pl.window, window)
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
	pl.allAny = !pl.stageWindows
	for _, k := range pl.kind[1:] {
		pl.allAny = pl.allAny && k == seqAny
	}
	return pl
}

// sameCond reports whether a and b are the same condition.
func sameCond(a, b *cond) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.op == b.op && a.leaf == b.leaf && sameCond(a.x, b.x) && sameCond(a.y, b.y)
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
// A node is kept while a partial match waits there (its tree has not
// ended), a completed match ending there is in the completed queue, or a
// kept node follows it; kept nodes hold their events (the key's buffered
// events). Which nodes are kept is worked out once trees end
// (seqKey.refsOf, seqCompact), not on each take.
type seqNode struct {
	ev     *event
	parent int32 // index of the node before it in the tree; -1 for the start event
	// pv is the last number of the taking partial match's version when it
	// took the event (the start state's for the start event): the node's
	// edge is the pv of the nodes from the start event to here.
	pv    int32
	tree  int32 // the tree's number (seqGroup.id)
	depth int16 // events from the start event to here
	flags uint8
}

const (
	snWaiting = 1 << iota // a partial match waits here (while the tree lives)
	snPending             // the completed match ending here is in the completed queue
	snGone                // no longer kept, its event let go (a completed match done in a tree that lives)
)

// seqWait is a partial match waiting: its node, the events it took (the
// last number of its version) and its tree.
type seqWait struct {
	n     int32
	takes int32
	tree  int32
}

// seqGroup is the tree of the partial matches started by one event.
type seqGroup struct {
	start   *event
	id      int32 // trees are numbered in start order
	ended   bool  // its partial matches timed out or were pruned
	pending int   // completed matches in the key's completed queue
}

// seqScratch is what a Matcher keeps for its keys under Pattern.seq
// from one step to the next, so that a step allocates nothing.
type seqScratch struct {
	spare *seqKey      // a key's sequence state it no longer uses
	free  []*compState // completed matches, for reuse
	nodes []node       // the events of a step's matches (seqPath)
	paths []*node
	links [][2]int32 // seqTimedOut's: each node's first child and next sibling
	last  []int32    // seqTimedOut's: each node's last child
}

// seqKey is a key's state under Pattern.seq.
type seqKey struct {
	nodes []seqNode // every tree's nodes, in the order they were made
	// wait[d]: the partial matches that took d events, over the trees,
	// in the order they were made
	wait    [][]seqWait
	groups  []*seqGroup // the trees, by start event; ended ones only while a completed match refers to them
	nextID  int32
	maxID   int32 // Matcher.treeLimit: where nextID starts again from 0
	alive   int   // partial matches waiting
	pending int   // completed matches
	allAny  bool  // seqPlan.allAny
	starts  int32 // events the start state took (its version is 1+starts)
	start   bool  // the start state is there (not after StopStarting)
	free    []*seqGroup
	compact bool      // trees ended or completed matches went since the last seqCompact
	recount bool      // partial matches left their trees since (leave)
	cand    []seqWait // completions of the current step: node and tree
	refs    []int32   // refsOf's
	lives   []bool    // refsOf's
	remap   []int32   // seqCompact's
}

func (sk *seqKey) reset(pl *seqPlan, maxID int32) {
	stages := len(pl.take)
	sk.allAny, sk.maxID = pl.allAny, maxID
	for _, g := range sk.groups {
		sk.recycle(g)
	}
	clear(sk.groups)
	sk.groups = sk.groups[:0]
	clear(sk.nodes)
	sk.nodes = sk.nodes[:0]
	if len(sk.wait) != stages {
		sk.wait = make([][]seqWait, stages)
	}
	for d := range sk.wait {
		sk.wait[d] = sk.wait[d][:0]
	}
	sk.nextID, sk.alive, sk.pending, sk.starts, sk.start = 0, 0, 0, 0, true
	sk.compact, sk.recount = false, false
}

func (sk *seqKey) recycle(g *seqGroup) {
	*g = seqGroup{}
	if len(sk.free) < 16 {
		sk.free = append(sk.free, g)
	}
}

func (sk *seqKey) newGroup(start *event) *seqGroup {
	if sk.nextID >= sk.maxID {
		sk.renumber()
	}
	var g *seqGroup
	if n := len(sk.free); n > 0 {
		g = sk.free[n-1]
		sk.free = sk.free[:n-1]
	} else {
		g = &seqGroup{}
	}
	g.start, g.id = start, sk.nextID
	sk.nextID++
	return g
}

// maxTreeID is the number trees count up to before they are numbered
// again from 0 (a key that is never idle, e.g. one whose every event
// starts a tree of next stages, would otherwise run out of numbers).
const maxTreeID int32 = 1<<31 - 1

// treeLimit is maxTreeID, or the lower one a test set so that keys reach
// it.
func (m *Matcher) treeLimit() int32 {
	if m.test.maxTreeID > 0 {
		return m.test.maxTreeID
	}
	return maxTreeID
}

// renumber numbers the trees from 0, in order.
func (sk *seqKey) renumber() {
	if len(sk.groups) == 0 {
		sk.nextID = 0
		return
	}
	to := make(map[int32]int32, len(sk.groups))
	for i, g := range sk.groups {
		to[g.id] = int32(i)
		g.id = int32(i)
	}
	for i := range sk.nodes {
		n := &sk.nodes[i]
		if id, ok := to[n.tree]; ok {
			n.tree = id
		} else {
			n.tree = -1 // of a tree gone: the next compaction drops it
		}
	}
	for _, w := range sk.wait {
		for x := range w {
			w[x].tree = to[w[x].tree]
		}
	}
	for x := range sk.cand {
		sk.cand[x].tree = to[sk.cand[x].tree]
	}
	sk.nextID = int32(len(sk.groups))
}

// idle reports whether the key holds no partial or completed match.
func (sk *seqKey) idle() bool { return len(sk.groups) == 0 }

// group returns tree id.
func (sk *seqKey) group(id int32) *seqGroup {
	i, ok := slices.BinarySearchFunc(sk.groups, id, func(g *seqGroup, id int32) int { return int(g.id - id) })
	if !ok {
		panic("nfa: a tree that is gone")
	}
	return sk.groups[i]
}

func holdEvent(ks *keyState, ev *event, n int32) {
	if ev.refs == 0 {
		ks.nEvents++
		ks.addBytes(int64(len(ev.raw)))
	}
	ev.refs += n
}

func dropEvent(ks *keyState, ev *event) { dropEvents(ks, ev, 1) }

func dropEvents(ks *keyState, ev *event, n int32) {
	if ev.refs -= n; ev.refs == 0 {
		ks.nEvents--
		ks.addBytes(-int64(len(ev.raw)))
	}
}

// livesFrom returns whether each tree still has partial matches waiting,
// indexed by tree number minus base (the first tree's).
func (sk *seqKey) livesFrom() (base int32, lives []bool) {
	base, sk.lives = sk.livesInto(sk.lives[:0])
	return base, sk.lives
}

// livesInto is livesFrom into buf, leaving the key's scratch alone: what
// only reads the key (encoding it, while others may too) calls it with a
// buffer of its own.
func (sk *seqKey) livesInto(buf []bool) (base int32, lives []bool) {
	if len(sk.groups) == 0 {
		return 0, buf
	}
	base = sk.groups[0].id
	lives = buf
	for range sk.nextID - base {
		lives = append(lives, false)
	}
	for _, g := range sk.groups {
		lives[g.id-base] = !g.ended
	}
	return base, lives
}

// refsOf counts each node's references: a partial match waiting there, a
// completed match ending there and each kept node after it. A node is
// kept while its count is not 0.
func (sk *seqKey) refsOf() []int32 {
	sk.refs, sk.lives = sk.refsInto(sk.refs[:0], sk.lives[:0])
	return sk.refs
}

// refsInto is refsOf into buffers of the caller's (see livesInto).
func (sk *seqKey) refsInto(refs []int32, livesBuf []bool) ([]int32, []bool) {
	base, lives := sk.livesInto(livesBuf)
	for i := range sk.nodes {
		n := &sk.nodes[i]
		r := int32(0)
		if n.flags&snPending != 0 || (n.flags&snWaiting != 0 && n.tree >= base && int(n.tree-base) < len(lives) && lives[n.tree-base]) {
			r = 1
		}
		refs = append(refs, r)
	}
	for i := len(sk.nodes) - 1; i >= 0; i-- {
		if p := sk.nodes[i].parent; refs[i] > 0 && p >= 0 {
			refs[p]++
		}
	}
	return refs, lives
}

// seqCompact drops the nodes no longer kept (those of trees that ended,
// completed matches gone), with the references to their events, and
// renumbers the others.
func (ks *keyState) seqCompact() {
	sk := ks.seq
	// With followedByAny stages only, a node is kept while its tree
	// lives, unless it is a completed match gone — unless a tree that
	// ended still has completed matches queued (which such a sequence
	// does not leave: its first tree with partial matches has every
	// match a later one has). Otherwise the references say.
	var refs []int32
	if !sk.allAny || slices.ContainsFunc(sk.groups, func(g *seqGroup) bool { return g.ended && g.pending > 0 }) {
		refs = sk.refsOf()
	}
	base, lives := sk.livesFrom()
	remap := sk.remap[:0]
	w := int32(0)
	// the events let go, counted by event (a step's nodes are together)
	var dropped *event
	var ndropped int32
	for i := range sk.nodes {
		n := sk.nodes[i]
		var keep bool
		if refs != nil {
			keep = refs[i] > 0
		} else {
			keep = n.flags&snGone == 0 && n.tree >= base && len(lives) > 0 && lives[n.tree-base]
		}
		if !keep {
			if n.flags&snGone == 0 {
				if n.ev != dropped {
					if ndropped > 0 {
						dropEvents(ks, dropped, ndropped)
					}
					dropped, ndropped = n.ev, 0
				}
				ndropped++
			}
			remap = append(remap, -1)
			continue
		}
		if n.parent >= 0 {
			n.parent = remap[n.parent]
		}
		sk.nodes[w] = n
		remap = append(remap, w)
		w++
	}
	if ndropped > 0 {
		dropEvents(ks, dropped, ndropped)
	}
	clear(sk.nodes[w:])
	sk.nodes = sk.nodes[:w]
	sk.remap = remap
	if w == 0 {
		return
	}
	for d := range sk.wait {
		for x := range sk.wait[d] {
			sk.wait[d][x].n = remap[sk.wait[d][x].n]
		}
	}
	for _, e := range ks.completed.a {
		e.cs.sn = remap[e.cs.sn]
	}
}

// before reports whether node x comes before node y, both at one depth of
// one tree, in the tree's post-order (children in the order they were
// made).
func (sk *seqKey) before(x, y int32) bool {
	for {
		px, py := sk.nodes[x].parent, sk.nodes[y].parent
		if px == py {
			return x < y
		}
		x, y = px, py
	}
}

// seqDone removes a completed match from its tree.
func (m *Matcher) seqDone(ks *keyState, c *compState) {
	sk := ks.seq
	n := &sk.nodes[c.sn]
	g := sk.group(n.tree)
	g.pending--
	sk.pending--
	n.flags &^= snPending
	if !g.ended && m.p.seq.allAny {
		// the nodes before it are kept for their partial matches
		n.flags |= snGone
		dropEvent(ks, n.ev)
	} else {
		sk.compact = true
	}
	*c = compState{}
	m.sc.seq.free = append(m.sc.seq.free, c)
}

// end ends the partial matches of every tree up to tree id (a timeout or
// a skip strategy's pruning) and returns how many there were.
func (sk *seqKey) end(id int32) int {
	n := 0
	for d := range sk.wait {
		w := sk.wait[d]
		kept := w[:0]
		for _, x := range w {
			if x.tree > id {
				kept = append(kept, x)
			}
		}
		n += len(w) - len(kept)
		clear(w[len(kept):])
		sk.wait[d] = kept
	}
	sk.alive -= n
	for _, g := range sk.groups {
		if g.id > id {
			break
		}
		g.ended = true
	}
	sk.compact = true
	return n
}

// leave takes the partial matches waiting for stage k out of their trees
// (they moved on, or ended): their nodes stay while a node after them or
// a completed match needs them.
func (sk *seqKey) leave(k int) { sk.drop(k, len(sk.wait[k])) }

// drop takes the first n partial matches waiting for stage k out of their
// trees, as leave does, and returns n.
func (sk *seqKey) drop(k, n int) int {
	w := sk.wait[k]
	for x := range w[:n] {
		sk.nodes[w[x].n].flags &^= snWaiting
	}
	sk.alive -= n
	rest := copy(w, w[n:])
	clear(w[rest:])
	sk.wait[k] = w[:rest]
	sk.compact = true
	sk.recount = true
	return n
}

// recountTrees marks the trees that partial matches left (leave) as ended
// when none is left waiting.
func (sk *seqKey) recountTrees() {
	if !sk.recount {
		return
	}
	sk.recount = false
	if len(sk.groups) == 0 {
		return
	}
	base := sk.groups[0].id
	waiting := sk.refs[:0]
	for range sk.nextID - base {
		waiting = append(waiting, 0)
	}
	for _, w := range sk.wait {
		for _, x := range w {
			waiting[x.tree-base]++
		}
	}
	for _, g := range sk.groups {
		g.ended = g.ended || waiting[g.id-base] == 0
	}
	sk.refs = waiting
}

// seqSweep removes the trees nothing refers to any more and, after trees
// ended, the nodes no longer kept.
func (ks *keyState) seqSweep() {
	sk := ks.seq
	if !sk.compact {
		return
	}
	sk.compact = false
	sk.recountTrees()
	kept := sk.groups[:0]
	for _, g := range sk.groups {
		if g.ended && g.pending == 0 {
			sk.recycle(g)
			continue
		}
		kept = append(kept, g)
	}
	clear(sk.groups[len(kept):])
	sk.groups = kept
	ks.seqCompact()
}

func (sk *seqKey) firstAlive() *seqGroup {
	for _, g := range sk.groups {
		if !g.ended {
			return g
		}
	}
	return nil
}

// seqEvent is processEvent for a key under Pattern.seq.
func (m *Matcher) seqEvent(ks *keyState, ev *event) []path {
	m.nextGen()
	m.seqStep()
	sk, pl := ks.seq, m.p.seq
	ctx := &m.sc.ctx
	*ctx = evalCtx{m: m, ev: ev}
	last := len(pl.take) - 1
	// a stage's partial matches take before the previous stage's make new
	// ones there, which must not take the same event
	for k := last; k >= 1; k-- {
		w := sk.wait[k]
		if len(w) == 0 {
			continue
		}
		if !m.check(pl.take[k], ctx) {
			if pl.kind[k] == seqStrict {
				// next: the partial matches end (Flink drops them)
				sk.leave(k)
			}
			continue
		}
		hev := m.heapEvent(ev)
		nodes := sk.nodes
		if k == last {
			cand := sk.cand
			for x := range w {
				cand = append(cand, seqWait{n: int32(len(nodes)), tree: w[x].tree})
				nodes = append(nodes, seqNode{ev: hev, parent: w[x].n, pv: w[x].takes, tree: w[x].tree, depth: int16(k + 1), flags: snPending})
				w[x].takes++
			}
			sk.cand = cand
		} else {
			next := sk.wait[k+1]
			for x := range w {
				next = append(next, seqWait{n: int32(len(nodes)), tree: w[x].tree})
				nodes = append(nodes, seqNode{ev: hev, parent: w[x].n, pv: w[x].takes, tree: w[x].tree, depth: int16(k + 1), flags: snWaiting})
				w[x].takes++
			}
			sk.wait[k+1] = next
			sk.alive += len(w)
		}
		sk.nodes = nodes
		holdEvent(ks, hev, int32(len(w)))
		if pl.kind[k] != seqAny {
			// followedBy, next: they moved on
			sk.leave(k)
		}
	}
	if sk.start && m.sc.mayStart && m.check(pl.take[0], ctx) {
		hev := m.heapEvent(ev)
		g := sk.newGroup(hev)
		sk.wait[1] = append(sk.wait[1], seqWait{n: int32(len(sk.nodes)), tree: g.id})
		sk.nodes = append(sk.nodes, seqNode{ev: hev, parent: -1, pv: 1 + sk.starts, tree: g.id, depth: 1, flags: snWaiting})
		holdEvent(ks, hev, 1)
		sk.alive++
		sk.starts++
		sk.groups = append(sk.groups, g)
	}
	sk.recountTrees() // (before completed matches look for the first partial match)
	var out []path
	if len(sk.cand) > 0 {
		out = m.seqComplete(ks, ev)
	} else {
		ks.seqSweep()
	}
	m.sc.prunedPartial = false
	if limit := m.cfg.MaxPartialMatches; limit > 0 && sk.alive > limit {
		m.seqToGeneral(ks)
		m.capPartial(ks)
		m.recomputeDeadline(ks)
		return out
	}
	ks.deadline = m.seqDeadline(ks)
	return out
}

// seqComplete puts the step's completed matches in the completed queue,
// in the order the general step does (by tree, then the trees'
// post-order), and emits those that may go.
func (m *Matcher) seqComplete(ks *keyState, ev *event) []path {
	sk := ks.seq
	cand := sk.cand
	if m.p.skip.kind == skipPastLast && ks.completed.len() == 0 && m.p.seq.allAny {
		// The first match in queue order goes at once when its tree is
		// the first with partial matches waiting, and ends at this
		// event: every tree and every other match, all started no
		// later, is pruned. They need not be queued.
		best := cand[0]
		for _, c := range cand[1:] {
			if c.tree < best.tree || (c.tree == best.tree && sk.before(sk.nodes[c.n].parent, sk.nodes[best.n].parent)) {
				best = c
			}
		}
		if g := sk.firstAlive(); g != nil && g.id == best.tree {
			p := m.seqPath(sk, best.n)
			sk.end(sk.nextID - 1)
			m.sc.prunedPartial = true
			clear(cand)
			sk.cand = cand[:0]
			ks.seqSweep()
			return []path{p}
		}
	}
	slices.SortFunc(cand, func(a, b seqWait) int {
		if a.tree != b.tree {
			return int(a.tree - b.tree)
		}
		if sk.before(sk.nodes[a.n].parent, sk.nodes[b.n].parent) {
			return -1
		}
		return 1
	})
	var g *seqGroup
	for _, c := range cand {
		if g == nil || g.id != c.tree {
			g = sk.group(c.tree)
		}
		g.pending++
		sk.pending++
		var cs *compState
		if n := len(m.sc.seq.free); n > 0 {
			cs = m.sc.seq.free[n-1]
			m.sc.seq.free = m.sc.seq.free[:n-1]
		} else {
			cs = new(compState)
		}
		*cs = compState{state: m.p.seq.final, sn: c.n, startTs: g.start.ts, startOrder: g.start.order, prevTs: ev.ts, started: true}
		ks.completed.offer(cs)
	}
	clear(cand)
	sk.cand = cand[:0]
	return m.seqEmit(ks)
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
			if g := sk.firstAlive(); g != nil && cmpEvent(&event{ts: earliest.startTs, order: earliest.startOrder}, g.start) > 0 {
				break
			}
		}
		ks.completed.poll()
		p := m.seqPath(sk, earliest.sn)
		m.seqDone(ks, earliest)
		if pid := m.p.skip.pruningID(m.p, []path{p}); pid != nil {
			m.seqPrune(ks, pid)
		}
		out = append(out, p)
	}
	ks.seqSweep()
	return out
}

// seqPrune is prune on both queues for a key under Pattern.seq.
func (m *Matcher) seqPrune(ks *keyState, pid *event) {
	sk := ks.seq
	inclusive := m.p.skip.kind == skipToNext || m.p.skip.kind == skipPastLast
	drop := func(startTs int64, startOrder uint64) bool {
		d := cmpEvent(&event{ts: startTs, order: startOrder}, pid)
		return d < 0 || (inclusive && d == 0)
	}
	ks.completed.removeIf(func(c *compState) bool {
		if !drop(c.startTs, c.startOrder) {
			return false
		}
		m.seqDone(ks, c)
		return true
	})
	upTo := int32(-1)
	for _, g := range sk.groups {
		if !drop(g.start.ts, g.start.order) {
			break
		}
		upTo = g.id
	}
	if upTo >= 0 && sk.end(upTo) > 0 {
		m.sc.prunedPartial = true
	}
}

// seqStep starts a step: the paths of the last one are no longer read.
func (m *Matcher) seqStep() {
	clear(m.sc.seq.nodes)
	clear(m.sc.seq.paths)
	m.sc.seq.nodes, m.sc.seq.paths = m.sc.seq.nodes[:0], m.sc.seq.paths[:0]
}

// seqPath is the match ending at node n, as the records read it: valid
// until the key's next step (the records are built before).
func (m *Matcher) seqPath(sk *seqKey, n int32) path {
	d := int(sk.nodes[n].depth)
	// (a full array is replaced by a larger one, the paths already cut
	// keep theirs: soon one step's paths fit in one)
	if cap(m.sc.seq.nodes)-len(m.sc.seq.nodes) < d {
		m.sc.seq.nodes = make([]node, 0, max(64, 2*d, 2*cap(m.sc.seq.nodes)))
	}
	if cap(m.sc.seq.paths)-len(m.sc.seq.paths) < d {
		m.sc.seq.paths = make([]*node, 0, max(64, 2*d, 2*cap(m.sc.seq.paths)))
	}
	nodes := m.sc.seq.nodes[len(m.sc.seq.nodes) : len(m.sc.seq.nodes)+d]
	p := path(m.sc.seq.paths[len(m.sc.seq.paths) : len(m.sc.seq.paths)+d])
	m.sc.seq.nodes, m.sc.seq.paths = m.sc.seq.nodes[:len(m.sc.seq.nodes)+d], m.sc.seq.paths[:len(m.sc.seq.paths)+d]
	for i := d - 1; i >= 0; i-- {
		sn := &sk.nodes[n]
		nodes[i] = node{key: nodeKey{order: sn.ev.order, stage: m.p.seq.stage[i]}, ev: sn.ev}
		p[i] = &nodes[i]
		n = sn.parent
	}
	return p
}

// seqDeadline is when the key's earliest partial match times out.
func (m *Matcher) seqDeadline(ks *keyState) int64 {
	sk, pl := ks.seq, m.p.seq
	due := int64(maxInt64)
	if m.p.windowTime > 0 {
		if g := sk.firstAlive(); g != nil {
			due = satAdd(g.start.ts, m.p.windowTime)
		}
	}
	if pl.stageWindows {
		// a stage's list is in the order its partial matches took their
		// last event: its first one times out first
		for d, w := range sk.wait {
			if len(w) > 0 && pl.window[d] > 0 {
				due = min(due, satAdd(sk.nodes[w[0].n].ev.ts, pl.window[d]))
			}
		}
	}
	return due
}

// seqAdvanceTime is advanceTime for a key under Pattern.seq: it returns
// the matches completed since and the partial matches timed out.
func (m *Matcher) seqAdvanceTime(ks *keyState, now int64) ([]path, []timeout) {
	m.seqStep()
	sk, pl := ks.seq, m.p.seq
	upTo := int32(-1)
	for _, g := range sk.groups {
		if g.ended {
			continue
		}
		if !timedOut(now, g.start.ts, m.p.windowTime) {
			break
		}
		upTo = g.id
	}
	stale := false // a partial match outlived its stage's window
	if pl.stageWindows {
		for d, w := range sk.wait {
			if len(w) > 0 && m.seqStale(sk, d, &w[0], now) {
				stale = true
			}
		}
	}
	if upTo < 0 && !stale {
		return nil, nil
	}
	tos := m.sc.tosBuf[:0]
	if m.reportsTimeouts() {
		tos = m.seqTimedOut(sk, upTo, now, tos) // emitExpired counts them
	}
	n := 0
	if upTo >= 0 {
		n = sk.end(upTo)
	}
	if stale {
		for d, w := range sk.wait {
			// (what is left of each list is still in the order of the
			// last events: its stale partial matches come first)
			cut := 0
			for cut < len(w) && m.seqStale(sk, d, &w[cut], now) {
				cut++
			}
			if cut > 0 {
				n += sk.drop(d, cut)
			}
		}
	}
	if !m.reportsTimeouts() {
		m.stats.Timeouts += uint64(n)
	}
	m.sc.tosBuf = tos[:0]
	sk.recountTrees() // (before completed matches look for the first partial match)
	return m.seqEmit(ks), tos
}

// seqStale reports whether partial match w, waiting for stage d, has
// outlived the stage's window at time now.
func (m *Matcher) seqStale(sk *seqKey, d int, w *seqWait, now int64) bool {
	return timedOut(now, sk.nodes[w.n].ev.ts, m.p.seq.window[d])
}

// seqTimedOut appends the partial matches of the trees up to id that live,
// in queue order (by tree, each in post-order), to tos, their events to
// m.sc.toNodes.
func (m *Matcher) seqTimedOut(sk *seqKey, upTo int32, now int64, tos []timeout) []timeout {
	pl := m.p.seq
	// the partial matches that outlived their stage's window, by node,
	// with the time they timed out at
	var stale map[int32]int64
	if pl.stageWindows {
		for d, w := range sk.wait {
			for x := range w {
				if m.seqStale(sk, d, &w[x], now) {
					if stale == nil {
						stale = map[int32]int64{}
					}
					stale[w[x].n] = satAdd(sk.nodes[w[x].n].ev.ts, pl.window[d]) // as advanceTime has it
				}
			}
		}
	}
	// each node's first child and next sibling, among the partial matches
	// of those trees
	n := len(sk.nodes)
	links := m.sc.seq.links[:0]
	for range n {
		links = append(links, [2]int32{-1, -1})
	}
	m.sc.seq.links = links
	lastChild := m.sc.seq.last[:0]
	for range n {
		lastChild = append(lastChild, -1)
	}
	m.sc.seq.last = lastChild
	base, lives := sk.livesFrom()
	var roots []int32
	for i := range sk.nodes {
		nd := &sk.nodes[i]
		if (nd.tree > upTo && stale == nil) || nd.flags&(snPending|snGone) != 0 || nd.tree < base || !lives[nd.tree-base] {
			continue // (completed matches are not partial ones)
		}
		if p := nd.parent; p < 0 {
			roots = append(roots, int32(i))
		} else if lastChild[p] < 0 {
			links[p][0], lastChild[p] = int32(i), int32(i)
		} else {
			links[lastChild[p]][1], lastChild[p] = int32(i), int32(i)
		}
	}
	for _, r := range roots {
		whole := sk.nodes[r].tree <= upTo
		// post-order: children first, in the order they were made
		var visit func(i int32)
		visit = func(i int32) {
			for c := links[i][0]; c >= 0; c = links[c][1] {
				visit(c)
			}
			if sk.nodes[i].flags&snWaiting == 0 {
				return // it moved on
			}
			// (when both windows passed, the stage's is the one
			// reported, as advanceTime has it)
			at, isStale := stale[i]
			if !isStale {
				if !whole {
					return
				}
				at = satAdd(sk.nodes[r].ev.ts, m.p.windowTime)
			}
			from := len(m.sc.toNodes)
			m.sc.toNodes = append(m.sc.toNodes, m.seqPath(sk, i)...)
			tos = append(tos, timeout{from: from, to: len(m.sc.toNodes), at: at})
		}
		visit(r)
	}
	return tos
}

// seqGeneral returns the key's state as the general step holds it: the
// same partial matches, nodes, versions and queues, in the same order.
// The key is left as it is; the events are shared (their reference
// counts are set only by seqToGeneral).
func (m *Matcher) seqGeneral(ks *keyState) *keyState {
	g, _ := m.seqGeneralCounting(ks)
	return g
}

// seqGeneralCounting is seqGeneral, also returning how many of its nodes
// hold each event.
func (m *Matcher) seqGeneralCounting(ks *keyState) (*keyState, map[*event]int32) {
	sk, pl := ks.seq, m.p.seq
	out := &keyState{key: ks.key, nextOrder: ks.nextOrder, preDrain: ks.preDrain, due: ks.due, hidx: ks.hidx,
		gen: ks.gen, deadline: ks.deadline, queue: ks.queue}
	// encoding calls this under a read lock, maybe several at once: the
	// key's scratch is not for it
	refs, _ := sk.refsInto(nil, nil)
	evRefs := map[*event]int32{}
	gn := make([]*node, len(sk.nodes))
	edgeVer := func(i int32) dewey {
		v := make(dewey, sk.nodes[i].depth)
		for j := len(v) - 1; j >= 0; j-- {
			v[j] = sk.nodes[i].pv
			i = sk.nodes[i].parent
		}
		return v
	}
	verOf := func(v dewey, last int32) dewey { return append(slices.Clip(v), last) }
	children := make([][]int32, len(sk.nodes))
	var roots []int32
	for i := range sk.nodes {
		sn := &sk.nodes[i]
		if refs[i] == 0 {
			continue
		}
		n := &node{key: nodeKey{order: sn.ev.order, stage: pl.stage[sn.depth-1]}, ev: sn.ev, refs: refs[i]}
		var target *node
		if sn.parent >= 0 {
			target = gn[sn.parent]
			children[sn.parent] = append(children[sn.parent], int32(i))
		} else {
			roots = append(roots, int32(i))
		}
		n.edges = n.inline[:0:1]
		n.addEdge(edge{target: target, ver: edgeVer(int32(i)), refs: refs[i]})
		gn[i] = n
		out.nNodes++
		if evRefs[sn.ev] == 0 {
			out.nEvents++
		}
		evRefs[sn.ev]++
	}
	takes := make(map[int32]int32, sk.alive)
	for _, w := range sk.wait {
		for _, x := range w {
			takes[x.n] = x.takes
		}
	}
	// the trees in start order (their roots were made in that order),
	// each in post-order, a node's children in the order they were made
	var walk func(i int32, g *seqGroup)
	walk = func(i int32, g *seqGroup) {
		for _, c := range children[i] {
			walk(c, g)
		}
		sn := &sk.nodes[i]
		if sn.flags&snWaiting == 0 {
			return
		}
		c := &compState{state: pl.state[sn.depth], prev: gn[i], ver: verOf(edgeVer(i), takes[i]),
			startTs: g.start.ts, prevTs: sn.ev.ts, startOrder: g.start.order, started: true}
		out.partial.offer(c)
	}
	for _, r := range roots {
		if g := sk.group(sk.nodes[r].tree); !g.ended {
			walk(r, g)
		}
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
		gc := &compState{state: c.state, prev: gn[c.sn], ver: verOf(edgeVer(c.sn), 0),
			startTs: c.startTs, prevTs: c.prevTs, startOrder: c.startOrder, started: true}
		out.completed.a = append(out.completed.a, entOf(gc))
	}
	out.completed.unsorted = ks.completed.unsorted
	return out, evRefs
}

// seqToGeneral turns a key under Pattern.seq into a general one for good
// (until it is recycled).
func (m *Matcher) seqToGeneral(ks *keyState) {
	g, evRefs := m.seqGeneralCounting(ks)
	for ev, n := range evRefs {
		ev.refs = n
	}
	for _, e := range ks.completed.a {
		*e.cs = compState{}
		m.sc.seq.free = append(m.sc.seq.free, e.cs)
	}
	ks.partial, ks.completed, ks.nNodes, ks.nEvents = g.partial, g.completed, g.nNodes, g.nEvents
	sk := ks.seq
	sk.reset(m.p.seq, m.treeLimit())
	ks.seq = nil
	m.sc.seq.spare = sk
}

// seqFromGeneral turns a general key of a Pattern.seq pattern into one
// under Pattern.seq when its state is one the sequence step makes
// (checked by converting it back and encoding both), and reports whether
// it did.
func (m *Matcher) seqFromGeneral(ks *keyState) bool {
	pl := m.p.seq
	if pl == nil || m.test.noSeq {
		return false
	}
	sk := &seqKey{}
	sk.reset(pl, m.treeLimit())
	sk.start = false
	depthOf := make(map[int32]int, len(pl.state)) // waiting state -> depth
	for d, s := range pl.state {
		depthOf[s] = d
	}
	type gnode struct {
		n     *node
		sn    seqNode
		takes int32
	}
	var all []*gnode
	at := map[*node]*gnode{}
	roots := map[*event]*gnode{}
	// the nodes of a partial match, from its start event
	var chain func(n *node) *gnode
	chain = func(n *node) *gnode {
		if x, ok := at[n]; ok {
			return x
		}
		if n.dead || n.removed != 0 || len(n.edges) != 1 {
			return nil
		}
		e := &n.edges[0]
		depth := len(e.ver)
		if depth < 1 || depth > len(pl.take) || n.key.stage != pl.stage[depth-1] {
			return nil
		}
		x := &gnode{n: n, sn: seqNode{ev: n.ev, pv: e.ver[depth-1], depth: int16(depth)}}
		if e.target == nil {
			if depth != 1 || roots[n.ev] != nil {
				return nil
			}
			roots[n.ev] = x
		} else {
			// (the nodes are ordered by event below: a parent's comes first)
			p := chain(e.target)
			if p == nil || int(p.sn.depth) != depth-1 || cmpEvent(p.sn.ev, n.ev) >= 0 {
				return nil
			}
		}
		at[n] = x
		all = append(all, x)
		return x
	}
	for _, e := range ks.partial.a {
		c := e.cs
		if !c.started {
			if c.state != pl.state[0] || c.prev != nil || len(c.ver) != 1 || c.ver[0] < 1 || sk.start {
				return false
			}
			sk.start, sk.starts = true, c.ver[0]-1
			continue
		}
		d, ok := depthOf[c.state]
		if !ok || d == 0 || c.prev == nil || len(c.ver) != d+1 {
			return false
		}
		x := chain(c.prev)
		if x == nil || int(x.sn.depth) != d || x.sn.flags != 0 {
			return false
		}
		x.sn.flags, x.takes = snWaiting, c.ver[d]
	}
	for _, e := range ks.completed.a {
		c := e.cs
		if c.state != pl.final || c.prev == nil {
			return false
		}
		x := chain(c.prev)
		if x == nil || int(x.sn.depth) != len(pl.take) || x.sn.flags != 0 {
			return false
		}
		x.sn.flags = snPending
	}
	// trees in start order, nodes in the order they were made (by event,
	// then depth: a node's parent comes first)
	var starts []*event
	for ev := range roots {
		starts = append(starts, ev)
	}
	slices.SortFunc(starts, cmpEvent)
	treeOf := make(map[*event]*seqGroup, len(starts))
	for _, ev := range starts {
		g := sk.newGroup(ev)
		g.ended = true // until a partial match waits in it
		sk.groups = append(sk.groups, g)
		treeOf[ev] = g
	}
	slices.SortStableFunc(all, func(a, b *gnode) int {
		if c := cmpEvent(a.sn.ev, b.sn.ev); c != 0 {
			return c
		}
		return int(a.sn.depth) - int(b.sn.depth)
	})
	index := make(map[*node]int32, len(all))
	tree := make([]*seqGroup, len(all))
	for i, x := range all {
		index[x.n] = int32(i)
		sn := x.sn
		sn.parent = -1
		if t := x.n.edges[0].target; t != nil {
			sn.parent = index[t]
			tree[i] = tree[sn.parent]
		} else {
			tree[i] = treeOf[sn.ev]
		}
		g := tree[i]
		sn.tree = g.id
		switch {
		case sn.flags == snWaiting:
			g.ended = false
			sk.wait[sn.depth] = append(sk.wait[sn.depth], seqWait{n: int32(i), takes: x.takes, tree: g.id})
			sk.alive++
		case sn.flags == snPending:
			g.pending++
			sk.pending++
		}
		sk.nodes = append(sk.nodes, sn)
	}
	for i := range sk.nodes {
		switch g := tree[i]; {
		case sk.nodes[i].flags != 0:
		case !g.ended && sk.allAny:
			// kept for the nodes after it only: not in a tree of
			// followedByAny stages with partial matches waiting (only
			// after capPartial)
			return false
		}
	}
	completed := csQueue{unsorted: ks.completed.unsorted}
	for _, e := range ks.completed.a {
		c := e.cs
		completed.a = append(completed.a, entOf(&compState{state: c.state, sn: index[c.prev], startTs: c.startTs,
			startOrder: c.startOrder, prevTs: c.prevTs, started: true}))
	}
	// taken only when it gives back the same state
	conv := *ks
	conv.seq, conv.completed, conv.acct = sk, completed, nil
	if string(m.appendKeyState(nil, m.seqGeneral(&conv))) != string(m.appendKeyState(nil, ks)) {
		return false
	}
	ks.seq, ks.completed, ks.partial, ks.nNodes = sk, completed, csQueue{}, 0
	return true
}
