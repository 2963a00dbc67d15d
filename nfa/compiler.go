package nfa

import (
	"fmt"
	"maps"
	"strings"
)

// This file compiles a pattern chain into NFA states following the structure
// of Flink CEP's NFACompiler: the chain is walked from the last element to the
// first, each element becoming one or more states with TAKE, IGNORE and
// PROCEED transitions. Matching Flink's state graph exactly (including its
// state naming, which decides where per-state windows apply) is what makes
// the engine produce Flink's results, so the shape below deliberately mirrors
// it; see DESIGN.md.

type stateType uint8

const (
	stNormal stateType = iota
	stFinal
	stStop
	stPending
)

type action uint8

const (
	aTake action = iota
	aIgnore
	aProceed
)

const endStateName = "$endState$"
const stateNameDelim = ":"

type cstate struct {
	id        int
	name      string // unique internal name
	stage     string // the stage name it belongs to (name before ':')
	typ       stateType
	start     bool
	trans     []*transition
	window    int64 // previous-and-current window (Flink's windowTimes), 0 = none
	hasWindow bool
	// eventOnly: every condition of the decision graph from this state
	// (its transitions and those reached through PROCEED) depends on the
	// event alone, so the graph is the same for every partial match here
	eventOnly bool
}

type transition struct {
	action      action
	src, target *cstate
	cond        *cond
}

func (s *cstate) add(a action, target *cstate, c *cond) {
	s.trans = append(s.trans, &transition{action: a, src: s, target: target, cond: c})
}

type notCond struct {
	c    *cond
	name string
}

type compiler struct {
	used        map[string]bool
	stopStates  map[string]*cstate
	states      []*cstate
	windowTime  int64
	hasWindow   bool
	group       *pat // current group pattern
	firstOfLoop map[*pat]bool
	current     *pat
	following   *pat
	original    map[string]*cstate
	nextSuffix  map[string]int
}

func newCompiler(last *pat) *compiler {
	return &compiler{
		used:        map[string]bool{},
		stopStates:  map[string]*cstate{},
		firstOfLoop: map[*pat]bool{},
		original:    map[string]*cstate{},
		nextSuffix:  map[string]int{},
		current:     last,
	}
}

func (c *compiler) getWindowTime() int64 {
	if c.hasWindow {
		return c.windowTime
	}
	return 0
}

func (c *compiler) checkNames(p *pat) error {
	for ; p != nil; p = p.prev {
		if p.group != nil {
			if err := c.checkNames(p.group); err != nil {
				return err
			}
			continue
		}
		if p.alts != nil {
			// separate alternatives may name the same stage (no match
			// takes both): its states then share the stage
			all := map[string]bool{}
			for _, a := range p.alts {
				outer := c.used
				c.used = maps.Clone(outer)
				err := c.checkNames(a)
				for k := range c.used {
					all[k] = true
				}
				c.used = outer
				if err != nil {
					return err
				}
			}
			maps.Copy(c.used, all)
			continue
		}
		if c.used[p.name] {
			return perr(p.path, "name", "Duplicate pattern name: %s. Names must be unique.", p.name)
		}
		c.used[p.name] = true
	}
	return nil
}

// compile runs the whole compilation; skipTarget is the stage named by a
// skipToFirst/skipToLast strategy ("" for none).
func (c *compiler) compile(skipTarget string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(tooManyStates); !ok {
				panic(r)
			}
			err = perr("", "stages", "the pattern compiles to more than %d automaton states; use smaller times counts", maxStates)
		}
	}()
	last := c.current
	c.used[endStateName] = true
	if err := c.checkNames(last); err != nil {
		return err
	}
	c.used = map[string]bool{}
	if skipTarget != "" && !namesStage(last, skipTarget) {
		return skipTargetError(skipTarget, last)
	}
	sink := c.createEndingState()
	sink = c.createMiddleStates(sink)
	c.createStartState(sink)
	if c.hasWindow {
		for _, s := range c.states {
			if s.hasWindow && s.window > c.windowTime {
				return perr(s.stage, "within", "Window length between the previous and current event cannot be larger than the window length between the first and last event for a Pattern.")
			}
		}
	}
	if last.consume == notFollow {
		hasLast := false
		for _, s := range c.states {
			if s.name == last.name && s.hasWindow && s.window > 0 {
				hasLast = true
			}
		}
		if !hasLast && c.getWindowTime() == 0 {
			return perr(last.path, "contiguity", "NotFollowedBy is not supported without windowTime as a last part of a Pattern! (add within)")
		}
	}
	return nil
}

// namesStage reports whether the chain ending at last has a stage named
// name at its top level or in an alternative (not inside groups, as Flink
// finds skip targets).
func namesStage(last *pat, name string) bool {
	for p := last; p != nil; p = p.prev {
		if p.name == name {
			return true
		}
		for _, a := range p.alts {
			if namesStage(a, name) {
				return true
			}
		}
	}
	return false
}

// uniqueName gives the base name, or base:N with the smallest unused N
// (Flink's NFAStateNameHandler). Names are only ever added, so the search for
// each base resumes where it last stopped.
func (c *compiler) uniqueName(base string) string {
	cand := base
	if c.used[cand] {
		i := c.nextSuffix[base]
		for {
			cand = fmt.Sprintf("%s%s%d", base, stateNameDelim, i)
			i++
			if !c.used[cand] {
				break
			}
		}
		c.nextSuffix[base] = i
	}
	c.used[cand] = true
	return cand
}

func originalName(internal string) string {
	if i := strings.Index(internal, stateNameDelim); i >= 0 {
		return internal[:i]
	}
	return internal
}

// maxStates bounds the automaton's size: quantifiers like times(1, 10^9)
// or nested groups with large counts would otherwise exhaust memory.
const maxStates = 20000

type tooManyStates struct{}

func (c *compiler) createStateN(name string, typ stateType) *cstate {
	if len(c.states) >= maxStates {
		panic(tooManyStates{})
	}
	s := &cstate{name: c.uniqueName(name), typ: typ}
	s.stage = originalName(s.name)
	c.states = append(c.states, s)
	return s
}

// createStateT is Flink's createState(stateType, isTake): it names the state
// after the current pattern element and records its per-state window.
func (c *compiler) createStateT(typ stateType, isTake bool) *cstate {
	s := c.createStateN(c.current.name, typ)
	if isTake {
		p := c.current
		if !p.hasTimes {
			if p.hasWithin && p.withinPC > 0 {
				s.window, s.hasWindow = p.withinPC, true
			}
		} else if strings.Contains(s.name, stateNameDelim) && p.window > 0 {
			s.window, s.hasWindow = p.window, true
		}
	}
	return s
}

func (c *compiler) createEndingState() *cstate {
	end := c.createStateN(endStateName, stFinal)
	if c.current.hasWithinFL {
		c.windowTime, c.hasWindow = c.current.withinFL, true
	}
	return end
}

func (c *compiler) createMiddleStates(sink *cstate) *cstate {
	last := sink
	for c.current.prev != nil {
		switch c.current.consume {
		case notFollow:
			if (c.current.hasWithin || c.getWindowTime() > 0) && last.typ == stFinal {
				nf := c.createStateT(stPending, true)
				nc := c.getTakeCondition(c.current)
				stop := c.createStopState(nc, c.current.name)
				nf.add(aProceed, stop, nc)
				nf.add(aIgnore, nf, condNot(nc))
				last = nf
			}
		case notNext:
			nn := c.createStateT(stNormal, true)
			nc := c.getTakeCondition(c.current)
			stop := c.createStopState(nc, c.current.name)
			if last.typ == stFinal {
				nn.add(aIgnore, last, condNot(nc))
			} else {
				nn.add(aProceed, last, condNot(nc))
			}
			nn.add(aProceed, stop, nc)
			last = nn
		default:
			last = c.convertPattern(last)
		}
		c.following = c.current
		c.current = c.current.prev
		if c.current.hasWithinFL && (!c.hasWindow || c.current.withinFL < c.windowTime) {
			c.windowTime, c.hasWindow = c.current.withinFL, true
		}
	}
	return last
}

func (c *compiler) createStartState(sink *cstate) *cstate {
	s := c.convertPattern(sink)
	s.start = true
	return s
}

func (c *compiler) convertPattern(sink *cstate) *cstate {
	p := c.current
	var last *cstate
	switch {
	case p.alts != nil:
		last = c.createBranchState(sink)
	case p.looping:
		c.setFirstOfLoop(false)
		s := c.copyWithoutTransitiveNots(sink)
		looping := c.createLooping(s)
		c.setFirstOfLoop(true)
		last = c.createTimesState(looping, sink, p.from, p.to)
	case p.timesQ:
		last = c.createTimesState(sink, sink, p.from, p.to)
	default:
		last = c.createSingletonState(sink, sink, c.getTakeCondition(p), c.getIgnoreCondition(p), p.optional)
	}
	c.addStopStates(last)
	return last
}

func (c *compiler) createStopState(nc *cond, name string) *cstate {
	if s, ok := c.stopStates[name]; ok {
		return s
	}
	s := c.createStateN(name, stStop)
	s.add(aTake, s, nc)
	c.stopStates[name] = s
	return s
}

func (c *compiler) getCurrentNotCondition() []notCond {
	var out []notCond
	p := c.current
	for p.prev != nil && (p.prev.optional || p.prev.consume == notFollow) {
		p = p.prev
		if p.consume == notFollow {
			out = append(out, notCond{c: c.getTakeCondition(p), name: p.name})
		}
	}
	return out
}

// copyWithoutTransitiveNots: accepting an event in an optional state discards
// the NOT patterns before it, so the TAKE target is a copy without their stop
// transitions (Flink: begin(a).notFollowedBy(b).followedByAny(c).optional()...).
func (c *compiler) copyWithoutTransitiveNots(sink *cstate) *cstate {
	nots := c.getCurrentNotCondition()
	if len(nots) == 0 || !c.current.optional {
		return sink
	}
	cp := c.createStateN(sink.name, sink.typ)
	for _, t := range sink.trans {
		if t.action == aProceed {
			target := t.target
			remove := false
			if target.typ == stStop {
				for _, n := range nots {
					if target.name == n.name {
						remove = true
					}
				}
			} else {
				target = c.copyWithoutTransitiveNots(t.target)
			}
			if !remove {
				cp.add(t.action, target, t.cond)
			}
		} else {
			target := t.target
			if t.target == t.src {
				target = cp
			}
			cp.add(t.action, target, t.cond)
		}
	}
	return cp
}

func (c *compiler) copyState(s *cstate) *cstate {
	cp := c.createStateN(originalName(s.name), s.typ)
	for _, t := range s.trans {
		target := t.target
		if t.target == t.src {
			target = cp
		}
		cp.add(t.action, target, t.cond)
	}
	return cp
}

func (c *compiler) addStopStates(s *cstate) {
	for _, n := range c.getCurrentNotCondition() {
		stop := c.createStopState(n.c, n.name)
		s.add(aProceed, stop, n.c)
	}
}

func (c *compiler) addStopStateToLooping(s *cstate) {
	if c.following != nil && c.following.consume == notFollow {
		nc := c.getTakeCondition(c.following)
		stop := c.createStopState(nc, c.following.name)
		s.add(aProceed, stop, nc)
	}
}

func (c *compiler) createTimesState(sink, proceed *cstate, from, to int) *cstate {
	p := c.current
	last := sink
	c.setFirstOfLoop(false)
	innerIgnore := extendWithUntil(c.getInnerIgnoreCondition(p), p.until, false)
	take := extendWithUntil(c.getTakeCondition(p), p.until, true)
	if p.greedy && from != to {
		if p.until != nil {
			c.original[sink.name] = c.copyState(sink)
		}
		updateWithGreedyCondition(sink, take)
	}
	for i := from; i < to; i++ {
		last = c.createSingletonState(last, proceed, take, innerIgnore, true)
		c.addStopStateToLooping(last)
	}
	for i := 0; i < from-1; i++ {
		last = c.createSingletonState(last, nil, take, innerIgnore, false)
		c.addStopStateToLooping(last)
	}
	c.setFirstOfLoop(true)
	return c.createSingletonState(last, proceed, take, c.getIgnoreCondition(p), p.optional)
}

func (c *compiler) setFirstOfLoop(v bool) {
	if c.current.group != nil {
		c.firstOfLoop[c.current] = v
	}
}

func (c *compiler) isGroupFirstOfLoop() bool {
	if v, ok := c.firstOfLoop[c.group]; ok {
		return v
	}
	return true
}

func (c *compiler) headOfGroup(p *pat) bool { return c.group != nil && p.prev == nil }

func (c *compiler) isHeadOfOptionalGroup(p *pat) bool {
	return c.headOfGroup(p) && c.isGroupFirstOfLoop() && c.group.optional
}

func (c *compiler) createSingletonState(sink, proceed *cstate, take, ignore *cond, optional bool) *cstate {
	p := c.current
	if p.group != nil {
		return c.createGroupPatternState(p, sink, proceed, optional)
	}
	single := c.createStateT(stNormal, true)
	s := c.copyWithoutTransitiveNots(sink)
	single.add(aTake, s, take)
	proceedCond := c.getTrueFunction()
	if optional {
		if p.greedy {
			if p.until != nil {
				if orig := c.original[proceed.name]; orig != nil {
					single.add(aProceed, orig, condAnd(proceedCond, p.until))
				}
				single.add(aProceed, proceed, condAnd(proceedCond, condNot(p.until)))
			} else {
				single.add(aProceed, proceed, proceedCond)
			}
		} else {
			single.add(aProceed, proceed, proceedCond)
		}
	}
	if ignore != nil {
		ign := single
		if optional || c.isHeadOfOptionalGroup(p) {
			ign = c.createStateT(stNormal, false)
			ign.add(aTake, s, take)
			ign.add(aIgnore, ign, ignore)
			c.addStopStates(ign)
		}
		single.add(aIgnore, ign, ignore)
	}
	return single
}

func (c *compiler) createGroupPatternState(g *pat, sink, proceed *cstate, optional bool) *cstate {
	proceedCond := c.getTrueFunction()
	oldCur, oldFol, oldGroup := c.current, c.following, c.group
	c.group = g
	c.current = g.group
	last := c.createMiddleStates(sink)
	last = c.convertPattern(last)
	if optional {
		last.add(aProceed, proceed, proceedCond)
	}
	c.current, c.following, c.group = oldCur, oldFol, oldGroup
	return last
}

// createBranchState compiles an alternation: each alternative's chain
// into sink, and a state that proceeds to each alternative's first state.
// An alternative's first element follows what precedes the alternation
// as the alternation itself would (its own contiguity, or the enclosing
// group's at the group's head).
func (c *compiler) createBranchState(sink *cstate) *cstate {
	b := c.current
	cs := b.consume
	if c.headOfGroup(b) {
		if c.isGroupFirstOfLoop() {
			cs = c.group.consume
		} else {
			cs = c.group.inner
		}
	}
	proceedCond := c.getTrueFunction()
	oldCur, oldFol, oldGroup := c.current, c.following, c.group
	heads := make([]*cstate, len(b.alts))
	for i, alt := range b.alts {
		head := alt
		for head.prev != nil {
			head = head.prev
		}
		head.consume = cs
		c.current, c.following, c.group = alt, oldFol, nil
		last := c.createMiddleStates(sink)
		heads[i] = c.convertPattern(last)
	}
	c.current, c.following, c.group = oldCur, oldFol, oldGroup
	br := c.createStateT(stNormal, false)
	// in reverse: the decision graph visits a state's proceeds last one
	// first (a stack, as Flink's), so the leftmost alternative's takes
	// come first; of the matches of one start completed by one row, the
	// first made leaves first (the standard's preference order)
	for i := len(heads) - 1; i >= 0; i-- {
		br.add(aProceed, heads[i], proceedCond)
	}
	return br
}

func (c *compiler) createLoopingGroupPatternState(g *pat, sink *cstate) *cstate {
	proceedCond := c.getTrueFunction()
	oldCur, oldFol, oldGroup := c.current, c.following, c.group
	dummy := c.createStateT(stNormal, true)
	c.group = g
	c.current = g.group
	last := c.createMiddleStates(dummy)
	last = c.convertPattern(last)
	last.add(aProceed, sink, proceedCond)
	dummy.add(aProceed, last, proceedCond)
	c.current, c.following, c.group = oldCur, oldFol, oldGroup
	return last
}

func (c *compiler) createLooping(sink *cstate) *cstate {
	p := c.current
	if p.group != nil {
		return c.createLoopingGroupPatternState(p, sink)
	}
	ignore := extendWithUntil(c.getInnerIgnoreCondition(p), p.until, false)
	take := extendWithUntil(c.getTakeCondition(p), p.until, true)
	proceedCond := c.getTrueFunction()
	looping := c.createStateT(stNormal, true)
	if p.greedy {
		if p.until != nil {
			cp := c.copyState(sink)
			looping.add(aProceed, cp, condAnd(proceedCond, p.until))
			c.original[sink.name] = cp
			looping.add(aProceed, sink, condAnd(proceedCond, condNot(p.until)))
		} else {
			looping.add(aProceed, sink, proceedCond)
		}
		updateWithGreedyCondition(sink, c.getTakeCondition(p))
	} else {
		looping.add(aProceed, sink, proceedCond)
	}
	looping.add(aTake, looping, take)
	c.addStopStateToLooping(looping)
	if ignore != nil {
		ign := c.createStateT(stNormal, false)
		ign.add(aTake, looping, take)
		ign.add(aIgnore, ign, ignore)
		looping.add(aIgnore, ign, ignore)
		c.addStopStateToLooping(ign)
	}
	return looping
}

func extendWithUntil(c, until *cond, isTake bool) *cond {
	if until != nil && c != nil {
		return condAnd(condNot(until), c)
	}
	if until != nil && isTake {
		return condNot(until)
	}
	return c
}

func (c *compiler) ignoreFor(cs consuming, p *pat) *cond {
	var ic *cond
	switch cs {
	case skipTillNext:
		ic = condNot(p.takeCond())
	case skipTillAny:
		ic = condTrueV
	}
	if c.group != nil && c.group.until != nil {
		ic = extendWithUntil(ic, c.group.until, false)
	}
	return ic
}

func (c *compiler) getInnerIgnoreCondition(p *pat) *cond {
	cs := p.inner
	if c.headOfGroup(p) {
		cs = c.group.inner
	}
	return c.ignoreFor(cs, p)
}

func (c *compiler) getIgnoreCondition(p *pat) *cond {
	cs := p.consume
	if c.headOfGroup(p) {
		if c.isGroupFirstOfLoop() {
			cs = c.group.consume
		} else {
			cs = c.group.inner
		}
	}
	return c.ignoreFor(cs, p)
}

func (c *compiler) getTakeCondition(p *pat) *cond {
	tc := p.takeCond()
	if c.group != nil && c.group.until != nil {
		tc = extendWithUntil(tc, c.group.until, true)
	}
	return tc
}

func (c *compiler) getTrueFunction() *cond {
	tc := condTrueV
	if c.group != nil && c.group.until != nil {
		tc = extendWithUntil(tc, c.group.until, true)
	}
	return tc
}

func updateWithGreedyCondition(s *cstate, take *cond) {
	for _, t := range s.trans {
		tc := t.cond
		if tc == nil {
			tc = condTrueV
		}
		t.cond = condAnd(tc, condNot(take))
	}
}
