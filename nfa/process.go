package nfa

import (
	"fmt"
	"slices"

	"github.com/cepcluster/cep/nfa/expr"
	"github.com/cepcluster/cep/watermark"
)

// evalCtx is the condition context of one partial match while one event is
// tested (Flink's ConditionContext). It materialises the partial match only
// when a condition calls events().
type evalCtx struct {
	m    *Matcher
	cs   *compState
	ev   *event
	done bool           // evs is set
	evs  [][]expr.Event // per stage: the partial match's events, once a condition asked
	// lastRow: the condition just evaluated read at most the partial
	// match's last row (a SQL DEFINE's LAST(B.x, 1) at a B): its value
	// holds for every partial match at the same node (see nodeMemo)
	lastRow bool
}

// matchedRow is one event of a partial match with the stage that took it.
type matchedRow struct {
	stage string
	ts    int64
	data  expr.Event
}

// rows returns the partial match's events in order.
func (c *evalCtx) rows() []matchedRow {
	p := currentMatch(c.cs, &c.m.sc.pathBuf)
	out := make([]matchedRow, len(p))
	for i, n := range p {
		out[i] = matchedRow{stage: c.m.p.stageNames[n.key.stage], ts: n.ev.ts, data: n.ev.data}
	}
	return out
}

// EventsFor implements expr.Ctx. The lists are the matcher's buffers,
// reused for the next partial match (a condition yields a bool, so nothing
// keeps them beyond its evaluation), or the partial match's own cache.
func (c *evalCtx) EventsFor(stage string) []expr.Event {
	if !c.done {
		c.done = true
		c.evs = c.stageEvents()
	}
	i, ok := c.m.p.stageIdx[stage]
	if !ok || len(c.evs[i]) == 0 {
		return nil
	}
	return c.evs[i]
}

// stageEvents lists the partial match's events by stage, walking its path
// in the shared buffer. A partial match that conditions ask about on a
// second event keeps the lists: its path can no longer change. (Its last
// node is an earlier event's, which gets no new edges, and the edges a walk
// from it can meet stay locked while the partial match holds its node, so
// the walk's first complete path stays the same; a partial match whose last
// node is the current event's is not cached, since other partial matches
// taking the same event may still add edges there.) In the relaxed loop of
// a pattern such as `b+ where e.v > max(events("a")...)` a partial match is
// asked on every candidate event and moves on only some of them.
func (c *evalCtx) stageEvents() [][]expr.Event {
	m, cs := c.m, c.cs
	if cs.evs != nil {
		m.test.evCacheHits++
		return cs.evs.byStage
	}
	lists := m.walkStageEvents(cs)
	stable := cs.prev != nil && cs.prev.key.order != c.ev.order && !m.test.noEvCache
	if stable && cs.walked {
		cs.evs = &evCache{byStage: ownedCopy(lists)}
		return cs.evs.byStage
	}
	cs.walked = cs.walked || stable
	return lists
}

// walkStageEvents lists a partial match's events by stage in the matcher's
// scratch lists, valid until the next call.
func (m *Matcher) walkStageEvents(cs *compState) [][]expr.Event {
	if m.sc.ctxEvents == nil {
		m.sc.ctxEvents = make([][]expr.Event, len(m.p.stageNames))
	}
	for i := range m.sc.ctxEvents {
		clear(m.sc.ctxEvents[i])
		m.sc.ctxEvents[i] = m.sc.ctxEvents[i][:0]
	}
	if cs.prev != nil {
		buf := m.sc.pathBuf[:0]
		if firstPath(cs.prev, cs.ver, &buf) {
			for i := len(buf) - 1; i >= 0; i-- {
				n := buf[i]
				m.sc.ctxEvents[n.key.stage] = append(m.sc.ctxEvents[n.key.stage], n.ev.data)
			}
		}
		clear(buf)
		m.sc.pathBuf = buf[:0]
	}
	return m.sc.ctxEvents
}

// ownedCopy copies scratch lists into memory of their own: one array cut
// by stage.
func ownedCopy(lists [][]expr.Event) [][]expr.Event {
	total := 0
	for _, l := range lists {
		total += len(l)
	}
	flat := make([]expr.Event, total)
	out := make([][]expr.Event, len(lists))
	at := 0
	for i, l := range lists {
		if len(l) > 0 {
			out[i] = flat[at : at+len(l) : at+len(l)]
			at += copy(out[i], l)
		}
	}
	return out
}

func (m *Matcher) check(c *cond, ctx *evalCtx) bool {
	switch c.op {
	case cTrue:
		return true
	case cNot:
		return !m.check(c.x, ctx)
	case cAnd:
		return m.check(c.x, ctx) && m.check(c.y, ctx)
	}
	l := &m.p.leaves[c.leaf]
	if !l.usesEvents {
		if m.sc.cacheGen[c.leaf] == m.sc.gen32 {
			return m.sc.cacheVal[c.leaf]
		}
	} else if l.guard != nil {
		if m.sc.guardGen[c.leaf] != m.sc.gen32 {
			// an error here is not counted: the whole condition is
			// evaluated then, and counts it if it errors too
			var v, decided bool
			var err error
			if f := l.guardField; f >= 0 && !m.test.noFieldCache {
				// e.PATH == "lit": the field read is shared with the
				// other conditions on it
				v, decided, err = l.guard.TestField(m.readField(f, l.guard, ctx.ev.data))
			}
			if !decided {
				v, err = l.guard.Eval(ctx.ev.data, nil)
			}
			m.sc.guardGen[c.leaf] = m.sc.gen32
			m.sc.guardFalse[c.leaf] = err == nil && !v
		}
		if m.sc.guardFalse[c.leaf] {
			return false
		}
	}
	if l.usesEvents {
		// the same partial match and event: a condition used by several
		// transitions (take, and the negated ignore) is evaluated once
		if m.sc.memoGen[c.leaf] == m.sc.ctxGen {
			return m.sc.memoVal[c.leaf]
		}
		if nm := &m.sc.nodeMemo[c.leaf]; nm.gen == m.sc.gen32 && ctx.cs != nil && ctx.cs.prev != nil && nm.n == ctx.cs.prev {
			m.sc.memoGen[c.leaf], m.sc.memoVal[c.leaf] = m.sc.ctxGen, nm.v
			m.test.nodeMemoHits++
			return nm.v
		}
	}
	ctx.lastRow = false
	var ok, decided bool
	var err error
	if l.field >= 0 && !m.test.noFieldCache {
		// e.PATH == "lit" (or a DEFINE's col = 'lit'): the field is read
		// once per event for every such condition on it
		if l.column != nil {
			ok, decided = l.column.testColumn(m.readColumn(l.field, l.column.eqCol, ctx.ev.data))
		} else {
			ok, decided, err = l.cel.TestField(m.readField(l.field, l.cel, ctx.ev.data))
		}
	}
	if !decided {
		ok, err = l.prog.Eval(ctx.ev.data, ctx)
	}
	if err != nil {
		if m.sc.probing {
			// not counted, not cached: the partial matches are visited
			// and count it for the conditions they reach
			m.sc.probeErr = true
			return false
		}
		m.stats.ConditionErrors++
		if m.firstCondErr == "" {
			m.firstCondErr = oneLine(fmt.Sprintf("%s: %v", l.src, err))
		}
		ok = false
	}
	if !l.usesEvents {
		m.sc.cacheGen[c.leaf] = m.sc.gen32
		m.sc.cacheVal[c.leaf] = ok
	} else {
		m.sc.memoGen[c.leaf] = m.sc.ctxGen
		m.sc.memoVal[c.leaf] = ok
		if ctx.lastRow && err == nil && ctx.cs != nil && ctx.cs.prev != nil {
			m.sc.nodeMemo[c.leaf] = nodeMemo{gen: m.sc.gen32, n: ctx.cs.prev, v: ok}
		}
	}
	return ok
}

// nodeMemo is the value of a condition over the partial matches' events
// for the event of generation gen and every partial match at node n, set
// by one whose evaluation read no row before n's (evalCtx.lastRow): n is
// (event, stage), the last row of each of them. In a loop every partial
// match that took the previous event there is at one node, so a condition
// such as B.x < LAST(B.x, 1) is evaluated once per event instead of once
// per partial match. (An evaluation error is not kept: each counts.)
type nodeMemo struct {
	gen uint32
	n   *node
	v   bool
}

// readField reads field slot f of the current event with c (a condition
// on that field), once per event.
func (m *Matcher) readField(f int, c *expr.Condition, e expr.Event) (any, error) {
	if m.sc.fieldGen[f] != m.sc.gen32 {
		m.sc.fieldVal[f], m.sc.fieldErr[f] = c.ReadField(e)
		m.sc.fieldGen[f] = m.sc.gen32
	}
	return m.sc.fieldVal[f], m.sc.fieldErr[f]
}

// readColumn reads column col of the current event into field slot f
// (a DEFINE's col = 'lit'), once per event.
func (m *Matcher) readColumn(f int, col string, e expr.Event) any {
	if m.sc.fieldGen[f] != m.sc.gen32 {
		m.sc.fieldVal[f], m.sc.fieldErr[f] = e[col], nil
		m.sc.fieldGen[f] = m.sc.gen32
	}
	return m.sc.fieldVal[f]
}

// graphMemo is a state's decision graph for the event of generation gen.
type graphMemo struct {
	gen uint32
	og  outgoing
	// idle: the event leaves a partial match in this (normal) state as it
	// is — its only transitions are ignores back to the state that change
	// no version (a start state: no take, and the partial match holds no
	// event)
	idle bool
	// keep: idle, in a state other than a start state, and no test asks
	// to visit every partial match: keeps holds for every queue entry here
	keep bool
}

// idleGraph reports whether og leaves a partial match in state st (of type
// normal) unchanged; for a start state only one that holds no event.
func idleGraph(st *cstate, og *outgoing) bool {
	if st.typ != stNormal || og.totalTake != 0 || og.totalIgnore != 0 {
		return false
	}
	if st.start {
		return true
	}
	if len(og.edges) == 0 {
		return false // the partial match would end
	}
	for _, e := range og.edges {
		if e.action != aIgnore || e.target != st {
			return false
		}
	}
	return true
}

type outgoing struct {
	edges       []*transition
	totalTake   int
	totalIgnore int
}

// decisionGraph collects the TAKE and IGNORE transitions reachable from the
// partial match's state through PROCEED transitions whose conditions hold.
//
// Its edges are in the matcher's scratch buffer, valid until the next call.
func (m *Matcher) decisionGraph(ctx *evalCtx, cur *cstate) outgoing {
	out := outgoing{edges: m.sc.graphBuf[:0]}
	defer func() { m.sc.graphBuf = out.edges[:0] }()
	stack := m.sc.stateStack[:0]
	stack = append(stack, cur)
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, t := range s.trans {
			ok := m.check(t.cond, ctx)
			if m.tr != nil && m.tr.rec {
				m.tr.checks = append(m.tr.checks, traceCheck{t: t, ok: ok})
			}
			if !ok {
				continue
			}
			switch t.action {
			case aProceed:
				stack = append(stack, t.target)
			default:
				if !(t.action == aIgnore && t.target == cur) {
					if t.action == aIgnore {
						out.totalIgnore++
					} else {
						out.totalTake++
					}
				}
				out.edges = append(out.edges, t)
			}
		}
	}
	m.sc.stateStack = stack
	return out
}

func (m *Matcher) finalAfterProceed(ctx *evalCtx, s *cstate) *cstate {
	stack := []*cstate{s}
	for len(stack) > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, t := range cur.trans {
			if t.action == aProceed && m.check(t.cond, ctx) {
				if t.target.typ == stFinal {
					return t.target
				}
				stack = append(stack, t.target)
			}
		}
	}
	return nil
}

// eventGraph is the decision graph of an eventOnly state: the same for
// every partial match in it, so computed once per event (its edges kept,
// not reallocated). When passesBy's probe meets a condition error the
// graph is not kept (the erring condition was neither counted nor cached).
func (m *Matcher) eventGraph(ctx *evalCtx, cur *cstate) outgoing {
	if m.sc.graphs == nil {
		m.sc.graphs = make([]graphMemo, len(m.p.states))
	}
	g := &m.sc.graphs[cur.id]
	if g.gen != m.sc.gen32 {
		og := m.decisionGraph(ctx, cur)
		if m.sc.probeErr {
			return og
		}
		g.og = outgoing{edges: append(g.og.edges[:0], og.edges...), totalTake: og.totalTake, totalIgnore: og.totalIgnore}
		g.idle = idleGraph(cur, &g.og)
		g.keep = g.idle && !cur.start && !m.visitAll()
		g.gen = m.sc.gen32
	}
	return g.og
}

// passesBy reports whether the current event leaves every partial match of
// the pattern where it is, unchanged: in each state a partial match can
// wait in, the event's only transitions are ignores back to that state
// that change no version (a start state: no take at all). Then processing
// the event changes nothing and the partial matches need not be visited
// (CORE's noise events). Its conditions are evaluated as visiting would
// (the graphs are kept for it), except that a condition error ends the
// probe uncounted and the partial matches are visited.
//
// Probing costs a decision graph per state, so it is tried only for a key
// with at least passByFrom partial matches (start states included).
func (m *Matcher) passesBy(ev *event) bool {
	if m.p.holdStates == nil || m.visitAll() {
		return false
	}
	if m.sc.passGen == m.sc.gen32 {
		return m.sc.passVal
	}
	ctx := &m.sc.ctx
	*ctx = evalCtx{m: m, ev: ev}
	m.sc.probing, m.sc.probeErr = true, false
	pass := true
	for _, st := range m.p.holdStates {
		m.eventGraph(ctx, st)
		if m.sc.probeErr || !m.sc.graphs[st.id].idle {
			pass = false
			break
		}
	}
	m.sc.probing, m.sc.probeErr = false, false
	m.sc.passGen, m.sc.passVal = m.sc.gen32, pass
	if pass {
		m.test.passedBy++
	}
	return pass
}

const passByFrom = 8

func incSelf(ignore, take int) int {
	if take == 0 && ignore == 0 {
		return 0
	}
	return ignore + max(1, take)
}

// addCS adds a partial match, locking its node under its version.
func (ks *keyState) addCS(out []*compState, s *cstate, prev *node, ver dewey, startTs, prevTs int64, startOrder uint64, started bool) []*compState {
	ks.lockNode(prev, ver)
	return append(out, &compState{state: int32(s.id), prev: prev, ver: ver, startTs: startTs, prevTs: prevTs, startOrder: startOrder, started: started})
}

func (m *Matcher) nextStates(ks *keyState, cs *compState, ev *event) []*compState {
	cur := m.p.states[cs.state]
	ctx := &m.sc.ctx
	*ctx = evalCtx{m: m, cs: cs, ev: ev}
	m.sc.ctxGen++
	if m.sc.ctxGen == 0 { // wrapped: forget the memo
		clear(m.sc.memoGen)
		m.sc.ctxGen = 1
	}
	var og outgoing
	if cur.eventOnly && m.tr == nil {
		og = m.eventGraph(ctx, cur)
	} else {
		if m.tr != nil {
			m.tr.rec = true
		}
		og = m.decisionGraph(ctx, cur)
		if m.tr != nil {
			m.tr.rec = false
		}
	}
	takeToVisit := max(0, og.totalTake-1)
	ignoreToVisit := og.totalIgnore
	takeToSkip := max(0, og.totalTake-1)
	res := m.sc.resBuf[:0]
	reused := false
	bump := 0 // increase of cs's own version, once the old one is no longer read
	// extend: the only take may append to cs's version in place (see
	// dewey): cs then ends here, and a take's version is cs's plus a 0.
	extend := !cur.start && og.totalTake == 1 && !m.test.noExtend
	for _, e := range og.edges {
		if extend && e.action == aIgnore && e.target == cur {
			extend = false // cs stays
		}
	}
	for _, e := range og.edges {
		switch e.action {
		case aIgnore:
			if cur.start {
				continue
			}
			var ver dewey
			if e.target == cur {
				inc := incSelf(og.totalIgnore, og.totalTake)
				if inc == 0 {
					// the event only passes by: the partial match is unchanged
					res = append(res, cs)
					reused = true
					continue
				}
				if bump == 0 && !m.test.noBump && bumpsInPlace(cs.prev, cs.ver) {
					// the partial match stays, under a version that
					// locks what its old one did
					res = append(res, cs)
					reused, bump = true, inc
					continue
				}
				ver = cs.ver.increase(inc)
			} else {
				ver = cs.ver.increaseAddStage(takeToSkip + ignoreToVisit)
				ignoreToVisit--
			}
			res = ks.addCS(res, e.target, cs.prev, ver, cs.startTs, cs.prevTs, cs.startOrder, cs.started)
		case aTake:
			ev = m.heapEvent(ev)
			startTs, startOrder := cs.startTs, cs.startOrder
			if cur.start {
				startTs, startOrder = ev.ts, ev.order
			}
			if m.p.ownPaths && !m.test.shareNodes {
				res = ks.takeOwn(res, e.target, m.p.stageOf[e.src.id], ev, cs, takeToVisit, startTs, startOrder)
				takeToVisit--
				continue
			}
			var nextVer dewey
			if extend {
				nextVer = append(cs.ver, 0)
				m.test.extended++
			} else {
				nextVer = cs.ver.increaseAddStage(takeToVisit)
			}
			curVer := nextVer[: len(nextVer)-1 : len(nextVer)-1]
			takeToVisit--
			entry := ks.put(m.p.stageOf[e.src.id], ev, cs.prev, curVer)
			res = ks.addCS(res, e.target, entry, nextVer, startTs, ev.ts, startOrder, true)
			if f := m.finalAfterProceed(ctx, e.target); f != nil {
				// a version of its own: the other one may change in place
				res = ks.addCS(res, f, entry, slices.Clone(nextVer), startTs, ev.ts, startOrder, true)
			}
		}
	}
	if cur.start {
		if inc := incSelf(og.totalIgnore, og.totalTake); inc == 0 && cs.prev == nil {
			res = append(res, cs) // unchanged: reuse it
		} else {
			res = append(res, &compState{state: cs.state, ver: cs.ver.increase(inc), startTs: -1, prevTs: -1})
		}
	}
	if !reused {
		ks.releaseNode(cs.prev, cs.ver)
	}
	if bump != 0 {
		cs.ver[len(cs.ver)-1] += int32(bump)
		m.test.bumped++
	}
	if m.tr != nil {
		m.traceStep(ks, cs, cur, res, reused)
	}
	m.sc.resBuf = res
	return res
}

// heapEvent returns the stored copy of the event being processed, making it
// on first use: most events are taken by no partial match and never stored.
func (m *Matcher) heapEvent(ev *event) *event {
	if ev != &m.sc.curEv {
		return ev
	}
	if m.sc.curEvHeap == nil {
		e := *ev
		m.sc.curEvHeap = &e
	}
	return m.sc.curEvHeap
}

// processEvent feeds one event to the key's automaton and returns the
// completed matches (Flink's NFA.process).
func (m *Matcher) processEvent(ks *keyState, ev *event) []path {
	m.sc.beginStep()
	if ks.seq != nil {
		return m.seqEvent(ks, ev)
	}
	m.nextGen()
	if len(ks.partial.a) >= m.test.passFrom && m.passesBy(ev) {
		return nil
	}
	newPartial, potential := m.scratchQueues()
	deadline := int64(maxInt64)
	a, sorted := ks.partial.a, !ks.partial.unsorted && !m.test.noPassBy
	for i := 0; i < len(a); {
		if m.keeps(&a[i], ev) {
			// a run of partial matches the event leaves as they are: offered
			// together (appended as they are while the queue stays sorted)
			j := i + 1
			for j < len(a) {
				if g := &m.sc.graphs[a[j].state]; g.gen == m.sc.gen32 && g.keep {
					j++ // (keeps, answered from the state's graph)
					continue
				}
				if !m.keeps(&a[j], ev) {
					break
				}
				j++
			}
			newPartial.appendRun(a[i:j], sorted)
			if m.p.hasWindows {
				deadline = min(deadline, m.runDeadline(a[i:j], sorted))
			}
			i = j
			continue
		}
		if m.overSteps() {
			// the rest lose the event: started ones are discarded
			for _, e := range a[i:] {
				if e.started() || e.cs.prev != nil {
					if m.tr != nil {
						m.traceDrop(ks, e.cs, DropSteps, "", 0)
					}
					ks.releaseNode(e.cs.prev, e.cs.ver)
					m.stats.Dropped++
				} else {
					newPartial.offerEnt(e)
				}
			}
			break
		}
		e := &a[i]
		i++
		m.sc.steps++
		next := m.nextStates(ks, e.cs, ev)
		discard := false
		retain := next[:0]
		for _, n := range next {
			switch m.p.states[n.state].typ {
			case stFinal:
				potential.offer(n)
			case stStop:
				discard = true
				ks.releaseNode(n.prev, n.ver)
			default:
				retain = append(retain, n)
			}
		}
		if discard {
			if m.tr != nil {
				for _, n := range next {
					if m.p.states[n.state].typ != stFinal { // completed all the same
						m.traceDrop(ks, n, DropStop, "", 0)
					}
				}
			}
			for _, r := range retain {
				ks.releaseNode(r.prev, r.ver)
			}
		} else {
			for _, r := range retain {
				re := entOf(r)
				newPartial.offerEnt(re)
				if m.p.hasWindows {
					deadline = min(deadline, m.deadlineOf(&re))
				}
			}
		}
	}
	m.sc.prunedPartial = false
	out := m.emitCompleted(ks, &potential, &newPartial)
	m.adoptPartial(ks, &newPartial, &potential)
	m.capPartial(ks)
	if m.sc.stepCapped {
		m.stats.StepCapped++
		m.capPartialTo(ks, (ks.partialCount()-ks.completed.len()+1)/2)
	}
	// the key's deadline stays exact: the earliest over the partial matches
	// just kept, unless a skip strategy pruned some of them since
	if m.sc.prunedPartial {
		m.recomputeDeadline(ks)
	} else {
		ks.deadline = deadline
	}
	return out
}

// nextGen starts a new event generation: what was cached for the last
// event is stale.
func (m *Matcher) nextGen() {
	m.sc.gen32++
	if m.sc.gen32 == 0 { // wrapped: clear the cache
		clear(m.sc.cacheGen)
		clear(m.sc.guardGen)
		clear(m.sc.fieldGen)
		clear(m.sc.nodeMemo)
		for i := range m.sc.graphs {
			m.sc.graphs[i].gen = 0
		}
		m.sc.passGen = 0
		m.sc.gen32 = 1
	}
}

// keeps reports whether the event leaves the partial match of queue entry e
// as it is, so that it need not be visited (nor loaded: the entry has what
// is needed): a start state while the matcher starts nothing, or a state
// whose decision graph depends on the event alone (the same for every
// partial match there) and leaves it in place. (A start state's partial
// match never holds events; checked so that one that did would be
// visited.)
func (m *Matcher) keeps(e *qent, ev *event) bool {
	st := m.p.states[e.state]
	if !m.sc.mayStart && st.start {
		return true // draining: this event starts nothing
	}
	if !st.eventOnly || m.visitAll() || (st.start && e.started()) {
		return false
	}
	if g := &m.sc.graphs[st.id]; g.gen == m.sc.gen32 {
		return g.idle
	}
	ctx := &m.sc.ctx
	*ctx = evalCtx{m: m, ev: ev}
	m.eventGraph(ctx, st)
	return m.sc.graphs[st.id].idle
}

// runDeadline is the earliest deadline of a run of queue entries: its
// first one's when it is sorted (by start) and only the whole-match window
// applies (start states, which never time out, sort last).
func (m *Matcher) runDeadline(run []qent, sorted bool) int64 {
	if sorted && !m.p.stageWindows {
		return m.deadlineOf(&run[0])
	}
	d := int64(maxInt64)
	for i := range run {
		d = min(d, m.deadlineOf(&run[i]))
	}
	return d
}

// scratchQueues returns the matcher's two scratch queues, empty, for the
// partial matches a step keeps and the matches it completes.
func (m *Matcher) scratchQueues() (partial, potential csQueue) {
	return csQueue{a: m.sc.entBuf[0][:0]}, csQueue{a: m.sc.entBuf[1][:0]}
}

// swapFrom is the queue length from which adoptPartial swaps arrays.
const swapFrom = 64

// adoptPartial makes partial (built in a scratch queue) the key's partial
// matches and gives the scratch queues back, emptied.
func (m *Matcher) adoptPartial(ks *keyState, partial, potential *csQueue) {
	if n := len(partial.a); n >= swapFrom && cap(partial.a) <= 2*n {
		// a long queue becomes the key's instead of being copied, its old
		// array the next scratch (not when the scratch has grown for a
		// larger key: a key keeps an array of about its own size). A short
		// one is copied: the scratch stays in the cache for the next key.
		ks.partial.a, partial.a = partial.a, ks.partial.a
	} else {
		ks.partial.a = append(ks.partial.a[:0], partial.a...)
	}
	ks.partial.unsorted = partial.unsorted
	clear(partial.a)
	clear(potential.a)
	m.sc.entBuf[0], m.sc.entBuf[1] = partial.a[:0], potential.a[:0]
}

// timeout is a timed-out partial match: its events are
// Matcher.toNodes[from:to].
type timeout struct {
	from, to int
	at       int64
}

func timedOut(now, from, window int64) bool {
	if window <= 0 {
		return false
	}
	return watermark.Since(now, from) >= uint64(window)
}

// advanceTime discards partial matches whose windows have passed at time now
// (Flink's NFA.advanceTime): it returns the timed-out partial matches and the
// matches completed by pending notFollowedBy states.
func (m *Matcher) advanceTime(ks *keyState, now int64) ([]path, []timeout) {
	m.sc.beginStep() // completions read here count apart from any event
	newPartial, potential := m.scratchQueues()
	tos := m.sc.tosBuf[:0]
	defer func() { m.sc.tosBuf = tos[:0] }()
	changed := false
	a, sorted := ks.partial.a, !ks.partial.unsorted && !m.test.noPassBy
	// sorted by start with only the whole-match window, the partial matches
	// that time out are a prefix (start states sort last)
	prefix := sorted && !m.p.stageWindows
	kept := 0 // a[kept:i] stay: offered together when a partial match leaves
	report := m.reportsTimeouts()
	for i := range a {
		e := &a[i]
		st := m.p.states[e.state]
		if st.start {
			if prefix {
				break
			}
			continue
		}
		// outside a start state a partial match holds events: e.ts is its
		// start time
		toPrev := st.hasWindow && timedOut(now, e.cs.prevTs, st.window)
		toFirst := timedOut(now, e.ts, m.p.windowTime)
		if !toPrev && !toFirst {
			if prefix {
				break
			}
			continue
		}
		newPartial.appendRun(a[kept:i], sorted)
		kept = i + 1
		changed = true
		cs := e.cs
		if m.tr != nil {
			m.traceTime(ks, now)
		}
		if st.typ == stPending {
			potential.offerEnt(*e)
			continue
		}
		at := satAdd(cs.startTs, m.p.windowTime)
		if toPrev {
			at = satAdd(cs.prevTs, st.window)
		}
		from := len(m.sc.toNodes)
		if report {
			m.sc.toNodes = appendCurrentMatch(m.sc.toNodes, cs, &m.sc.pathBuf)
		}
		tos = append(tos, timeout{from: from, to: len(m.sc.toNodes), at: at})
		if m.tr != nil {
			reason := DropWithin
			if toPrev {
				reason = DropWindow
			}
			m.traceDrop(ks, cs, reason, "", at)
		}
		ks.releaseNode(cs.prev, cs.ver)
	}
	if !changed {
		m.sc.entBuf[0], m.sc.entBuf[1] = newPartial.a[:0], potential.a[:0]
		clear(newPartial.a)
		return nil, nil
	}
	newPartial.appendRun(a[kept:], sorted)
	out := m.emitCompleted(ks, &potential, &newPartial)
	m.adoptPartial(ks, &newPartial, &potential)
	return out, tos
}

// emitCompleted is Flink's processMatchesAccordingToSkipStrategy: completed
// matches leave in start order, and under a skip strategy only once no
// earlier partial match can still complete; each emitted match prunes the
// partial and completed matches its skip strategy rules out.
func (m *Matcher) emitCompleted(ks *keyState, potential, partial *csQueue) []path {
	for _, e := range potential.a {
		ks.completed.offerEnt(e)
	}
	var out []path
	for {
		earliest := ks.completed.peek()
		if earliest == nil {
			break
		}
		if m.p.skip.kind != skipNone {
			if ep := partial.peek(); ep != nil && cmpCS(earliest, ep) > 0 {
				break
			}
		}
		if m.overSteps() {
			// the completed matches not read yet are discarded
			for ks.completed.len() > 0 {
				c := ks.completed.poll()
				if m.tr != nil {
					m.traceDrop(ks, c, DropSteps, "", 0)
				}
				ks.releaseNode(c.prev, c.ver)
				m.stats.Dropped++
			}
			break
		}
		ks.completed.poll()
		paths := extract(earliest.prev, earliest.ver)
		for _, p := range paths {
			m.sc.steps += len(p)
		}
		if m.tr != nil {
			m.tr.pruner = pmName(m.tr.pmID(earliest))
		}
		m.prune(ks, partial, paths)
		m.prune(ks, &ks.completed, paths)
		if len(paths) > 0 {
			out = append(out, paths[0])
			if m.tr != nil {
				m.traceCompleted(earliest)
			}
		} else if m.tr != nil {
			delete(m.tr.ids, earliest)
		}
		ks.releaseNode(earliest.prev, earliest.ver)
	}
	return out
}

// capPartial keeps at most MaxPartialMatches partial matches holding events
// on the key: the earliest in queue order (start time, start event, then
// array position), discarding the others as a skip strategy's pruning does
// (see Config.MaxPartialMatches).
func (m *Matcher) capPartial(ks *keyState) { m.capPartialTo(ks, m.cfg.MaxPartialMatches) }

// overSteps reports whether the current event's step reached
// MaxStepsPerEvent, noting it.
func (m *Matcher) overSteps() bool {
	if m.cfg.MaxStepsPerEvent > 0 && m.sc.steps >= m.cfg.MaxStepsPerEvent {
		m.sc.stepCapped = true
	}
	return m.sc.stepCapped
}

// capPartialTo keeps at most limit partial matches holding events on the
// key (none kept out when limit <= 0), as capPartial.
func (m *Matcher) capPartialTo(ks *keyState, limit int) {
	if limit <= 0 || len(ks.partial.a) <= limit {
		return
	}
	keys := m.sc.capKeys[:0]
	for _, e := range ks.partial.a {
		if e.started() {
			keys = append(keys, qent{ts: e.ts, order: e.order})
		}
	}
	m.sc.capKeys = keys[:0]
	if len(keys) <= limit {
		return
	}
	slices.SortFunc(keys, func(x, y qent) int { return cmpEnt(&x, &y) })
	cut := keys[limit-1]
	// of the partial matches starting at the cut's event, those first in
	// the array stay
	ties := 0
	for i := limit - 1; i >= 0 && cmpEnt(&keys[i], &cut) == 0; i-- {
		ties++
	}
	drop := func(c *compState) bool {
		if !c.started {
			return false
		}
		e := entOf(c)
		switch d := cmpEnt(&e, &cut); {
		case d < 0:
			return false
		case d == 0 && ties > 0:
			ties--
			return false
		}
		if m.tr != nil {
			m.traceDrop(ks, c, DropBound, "", 0)
		}
		ks.releaseNode(c.prev, c.ver)
		m.stats.Dropped++
		return true
	}
	ks.partial.removeIf(drop)
	m.sc.prunedPartial = true
}

func (m *Matcher) prune(ks *keyState, q *csQueue, paths []path) {
	pid := m.p.skip.pruningID(m.p, paths)
	if pid == nil {
		return
	}
	inclusive := m.p.skip.kind == skipToNext || m.p.skip.kind == skipPastLast
	drop := func(c *compState) bool {
		if !c.started {
			return false
		}
		d := cmpEvent(&event{ts: c.startTs, order: c.startOrder}, pid)
		return d < 0 || (inclusive && d == 0)
	}
	for _, e := range q.a {
		if c := e.cs; drop(c) {
			if m.tr != nil {
				m.traceDrop(ks, c, DropSkip, m.tr.pruner, 0)
			}
			ks.releaseNode(c.prev, c.ver)
			if q != &ks.completed {
				m.sc.prunedPartial = true
			}
		}
	}
	q.removeIf(drop)
}

func cmpEvent(a, b *event) int {
	switch {
	case a.ts < b.ts:
		return -1
	case a.ts > b.ts:
		return 1
	case a.order < b.order:
		return -1
	case a.order > b.order:
		return 1
	}
	return 0
}
