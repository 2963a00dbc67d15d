package nfa

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/cepcluster/cep/nfa/expr"
)

type skipKind uint8

const (
	skipNone skipKind = iota
	skipToNext
	skipPastLast
	skipToFirst
	skipToLast
)

type skipStrategy struct {
	kind  skipKind
	stage string
}

func parseSkip(s string) (skipStrategy, error) {
	switch {
	case s == "" || s == "noSkip":
		return skipStrategy{kind: skipNone}, nil
	case s == "skipToNext":
		return skipStrategy{kind: skipToNext}, nil
	case s == "skipPastLastEvent":
		return skipStrategy{kind: skipPastLast}, nil
	case strings.HasPrefix(s, "skipToFirst:"):
		return skipStrategy{kind: skipToFirst, stage: strings.TrimPrefix(s, "skipToFirst:")}, nil
	case strings.HasPrefix(s, "skipToLast:"):
		return skipStrategy{kind: skipToLast, stage: strings.TrimPrefix(s, "skipToLast:")}, nil
	}
	return skipStrategy{}, fmt.Errorf("unknown skip strategy %q (want noSkip, skipToNext, skipPastLastEvent, skipToFirst:STAGE or skipToLast:STAGE)", s)
}

// pruningID is the event relative to which a skip strategy prunes after a
// match (Flink's AfterMatchSkipStrategy.getPruningId); nil means no pruning.
func (s skipStrategy) pruningID(p *Pattern, paths []path) *event {
	var id *event
	for _, pa := range paths {
		var cand *event
		switch s.kind {
		case skipNone:
			return nil
		case skipToNext:
			if len(pa) > 0 {
				cand = pa[0].ev
			}
			if cand != nil && (id == nil || cmpEvent(cand, id) < 0) {
				id = cand
			}
			continue
		case skipPastLast:
			if len(pa) > 0 {
				cand = pa[len(pa)-1].ev
			}
		case skipToFirst, skipToLast:
			for _, n := range pa {
				if p.stageNames[n.key.stage] == s.stage {
					cand = n.ev
					if s.kind == skipToFirst {
						break
					}
				}
			}
		}
		if cand != nil && (id == nil || cmpEvent(cand, id) > 0) {
			id = cand
		}
	}
	return id
}

// Pattern is a compiled pattern: its automaton, its CEL programs and its time
// settings. A Pattern is immutable and may be shared by any number of
// Matchers, including concurrently.
type Pattern struct {
	spec        *Spec
	states      []*cstate
	startStates []int
	// freshStarts are the partial matches a key starts with, one per start
	// state: shared by every key (partial matches are never modified once
	// made, and these hold no event)
	freshStarts []*compState
	// holdStates are the states a partial match can wait in (neither final
	// nor stop) when every one of them is eventOnly and normal: then an
	// event that leaves all of them as they are passes a key by without
	// visiting its partial matches (Matcher.passesBy). Nil otherwise.
	holdStates []*cstate
	windowTime int64
	leaves     []leafInfo
	stageNames []string
	stageIdx   map[string]int32 // stage name → index into stageNames
	stageOf    []int32          // state id → stage index
	skip       skipStrategy
	keyFn      func(expr.Event) (string, error)
	timeFn     func(expr.Event) (int64, error)
	emit       []emitField
	ooo        int64
	bounds     timeBounds // what an event time may be (eventtime.go)

	// MATCH_RECOGNIZE
	project     func(expr.Event) (expr.Event, bool, error) // FROM (SELECT ...)
	tieLess     func(a, b expr.Event) bool                 // ORDER BY columns after the time
	rowFn       func(m *Matcher, p path) []Field           // MEASURES
	sql         bool                                       // records carry fields only; no timeouts
	sqlTimeouts bool                                       // but timeouts after all (SHOW TIMEOUT MATCHES)
	// sqlFields are the query's event fields (FieldsRead)
	sqlFields []string

	hasWindows bool // some partial match can time out
	// stageWindows: some state has a previous-and-current window
	stageWindows bool
	// ownPaths: every partial match's extracted events are its own history
	// (see ownPaths), so the events a step takes get a node per partial
	// match instead of one per stage shared through versioned edges.
	ownPaths bool
	// seq: a sequence of single-event stages, run per start event (seq.go)
	seq     *seqPlan
	keyExpr string
}

type emitField struct {
	name string
	v    *expr.Value
}

// Name is the pattern's name.
func (p *Pattern) Name() string { return p.spec.Name }

// Spec returns the document the pattern was compiled from. Callers must not
// modify it.
func (p *Pattern) Spec() *Spec { return p.spec }

// EventTime reports whether the pattern orders events by a time expression
// (otherwise it runs in arrival order on processing time).
func (p *Pattern) EventTime() bool { return p.timeFn != nil }

var (
	compilerOnce   sync.Once
	sharedCompiler *expr.Compiler
	compilerErr    error
)

func exprCompiler() (*expr.Compiler, error) {
	compilerOnce.Do(func() { sharedCompiler, compilerErr = expr.NewCompiler() })
	return sharedCompiler, compilerErr
}

// Compile validates a spec and compiles it. Errors are *PatternError values
// whose message is one line naming the stage and field.
func Compile(s *Spec) (*Pattern, error) {
	p, err := compile(s)
	if err != nil {
		if pe, ok := err.(*PatternError); ok && pe.Pattern == "" {
			pe.Pattern = s.Name
		}
		return nil, err
	}
	return p, nil
}

// CompileNamed compiles a document (pattern or MATCH_RECOGNIZE query) that
// is deployed under name: a query takes the name, a pattern document must
// carry it.
func CompileNamed(doc []byte, name string) (*Pattern, error) {
	if IsSQL(doc) {
		return CompileSQL(string(doc), name)
	}
	p, err := CompileBytes(doc)
	if err != nil {
		return nil, err
	}
	if name != "" && p.Name() != name {
		return nil, perr("", "name", "the document is named %q, not %q", p.Name(), name)
	}
	return p, nil
}

// KeyExpr is the pattern's key expression as written ("" for none; for a
// query, its PARTITION BY columns as e.col, comma-separated).
func (p *Pattern) KeyExpr() string { return p.keyExpr }

// Projected reports whether the pattern sees its events through a
// projection (a MATCH_RECOGNIZE query reading FROM a subquery), so that its
// key is computed from the projected event.
func (p *Pattern) Projected() bool { return p.project != nil }

// Sources lists the sources a pattern reads: the spec's source field, or a
// query's FROM.
func (p *Pattern) Sources() []string { return append([]string(nil), p.spec.Source...) }

// CompileBytes compiles a pattern document (JSON or YAML) or a
// MATCH_RECOGNIZE query (text starting with SELECT).
func CompileBytes(data []byte) (*Pattern, error) {
	if IsSQL(data) {
		return CompileSQL(string(data), "")
	}
	s, err := ParseSpec(data)
	if err != nil {
		return nil, err
	}
	return Compile(s)
}

func compile(s *Spec) (*Pattern, error) { return compileWith(s, nil) }

// compileWith compiles a spec whose stages may take their conditions from
// preds (by stage name) instead of CEL.
func compileWith(s *Spec, preds map[string]predicate) (*Pattern, error) {
	if s.Name == "" {
		return nil, perr("", "name", "a pattern needs a name")
	}
	if !nameRE.MatchString(s.Name) {
		return nil, perr("", "name", "%q is not a valid name: use lower-case letters, digits and '-', at most 63 characters, starting with a letter or digit", s.Name)
	}
	if err := checkSpecLimits(s); err != nil {
		return nil, err
	}
	ec, err := exprCompiler()
	if err != nil {
		return nil, err
	}
	b := &builder{conds: &condCompiler{c: ec}, preds: preds}
	stages := s.Stages
	if s.Within != nil && len(stages) > 0 {
		// the top-level within is within() called on the last stage
		last := stages[len(stages)-1]
		if last.Within != nil {
			return nil, perr(last.Name, "within", "both the pattern and its last stage set within; set it once")
		}
		last.Within = s.Within
		last.WithinType = s.WithinType
		stages = append(append([]Stage(nil), stages[:len(stages)-1]...), last)
	} else if s.WithinType != "" {
		return nil, perr("", "withinType", "withinType needs within")
	}
	chain, err := b.buildChain(stages, "")
	if err != nil {
		return nil, err
	}
	skip, err := parseSkip(s.Skip)
	if err != nil {
		return nil, perr("", "skip", "%v", err)
	}
	c := newCompiler(chain)
	if err := c.compile(skip.stage); err != nil {
		return nil, err
	}
	if err := checkAutomatonLimits(c.states); err != nil {
		return nil, err
	}
	p := &Pattern{spec: s, leaves: b.conds.leaves, skip: skip}
	if c.hasWindow {
		p.windowTime = c.windowTime
	}
	p.hasWindows = p.windowTime > 0
	stageIdx := map[string]int32{}
	for i, st := range c.states {
		if st.hasWindow && st.window > 0 {
			p.hasWindows, p.stageWindows = true, true
		}
		st.id = i
		p.states = append(p.states, st)
		if st.start {
			p.startStates = append(p.startStates, i)
			p.freshStarts = append(p.freshStarts, &compState{state: int32(i), ver: dewey{1}, startTs: -1, prevTs: -1})
		}
		idx, ok := stageIdx[st.stage]
		if !ok {
			idx = int32(len(p.stageNames))
			stageIdx[st.stage] = idx
			p.stageNames = append(p.stageNames, st.stage)
		}
		p.stageOf = append(p.stageOf, idx)
	}
	p.stageIdx = stageIdx
	p.ownPaths = ownPaths(p)
	holdable := true
	for _, st := range p.states {
		st.eventOnly = p.graphEventOnly(st)
		switch {
		case st.typ == stFinal || st.typ == stStop:
		case st.typ == stNormal && st.eventOnly:
			p.holdStates = append(p.holdStates, st)
		default:
			holdable = false
		}
		for _, t := range st.trans {
			if t.target.start && !(t.target == st && t.action == aIgnore) {
				// a partial match could then wait in a start state with
				// events, which an ignore would not leave unchanged
				holdable = false
			}
		}
	}
	if !holdable {
		p.holdStates = nil
	}
	p.keyExpr = s.Key
	if s.Key != "" {
		v, err := ec.Value(s.Key)
		if err != nil {
			return nil, perr("", "key", "%v", err)
		}
		src := s.Key
		p.keyFn = func(e expr.Event) (string, error) {
			x, err := v.Eval(e, nil)
			if err == nil {
				var k string
				if k, err = expr.KeyString(x); err == nil {
					return k, nil
				}
			}
			return "", fmt.Errorf("key %s: %s", src, oneLine(err.Error()))
		}
	}
	if s.Time != "" {
		v, err := ec.Value(s.Time)
		if err != nil {
			return nil, perr("", "time", "%v", err)
		}
		src := s.Time
		p.timeFn = func(e expr.Event) (int64, error) {
			x, err := v.Eval(e, nil)
			if err == nil {
				var ts int64
				if ts, err = expr.TimeMillis(x); err == nil {
					return ts, nil
				}
			}
			return 0, fmt.Errorf("time %s: %s", src, oneLine(err.Error()))
		}
	}
	if s.OutOfOrderness != nil {
		p.ooo = s.OutOfOrderness.Millis
	}
	if s.MaxFutureSkew != nil && s.MaxFutureSkew.Millis <= 0 {
		return nil, perr("", "maxFutureSkew", "maxFutureSkew must be positive (it bounds how far ahead of its source's event time an event may be)")
	}
	names := make([]string, 0, len(s.Emit))
	for k := range s.Emit {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v, err := ec.Value(s.Emit[k])
		if err != nil {
			return nil, perr("", "emit."+k, "%v", err)
		}
		p.emit = append(p.emit, emitField{name: k, v: v})
	}
	p.seq = seqPlanOf(p)
	p.bounds = p.computeTimeBounds()
	return p, nil
}

// Describe prints the automaton, one state per line, for debugging and tests.
func (p *Pattern) Describe() string {
	var sb strings.Builder
	for _, s := range p.states {
		kind := [...]string{"normal", "final", "stop", "pending"}[s.typ]
		if s.start {
			kind += ",start"
		}
		fmt.Fprintf(&sb, "%s (%s)", s.name, kind)
		if s.hasWindow {
			fmt.Fprintf(&sb, " window=%d", s.window)
		}
		sb.WriteString("\n")
		for _, t := range s.trans {
			fmt.Fprintf(&sb, "  %s -> %s if %s\n", [...]string{"take", "ignore", "proceed"}[t.action], t.target.name, p.condString(t.cond))
		}
	}
	return sb.String()
}

func (p *Pattern) condString(c *cond) string {
	switch c.op {
	case cTrue:
		return "true"
	case cNot:
		return "!(" + p.condString(c.x) + ")"
	case cAnd:
		return "(" + p.condString(c.x) + " && " + p.condString(c.y) + ")"
	}
	return p.leaves[c.leaf].src
}

// graphEventOnly reports whether no condition reachable in s's decision
// graph calls events().
func (p *Pattern) graphEventOnly(s *cstate) bool {
	seen := map[*cstate]bool{s: true}
	stack := []*cstate{s}
	for len(stack) > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, t := range cur.trans {
			if p.condUsesContext(t.cond) {
				return false
			}
			if t.action == aProceed && !seen[t.target] {
				seen[t.target] = true
				stack = append(stack, t.target)
			}
		}
	}
	return true
}

func (p *Pattern) condUsesContext(c *cond) bool {
	switch c.op {
	case cTrue:
		return false
	case cLeaf:
		return p.leaves[c.leaf].usesEvents
	case cNot:
		return p.condUsesContext(c.x)
	}
	return p.condUsesContext(c.x) || p.condUsesContext(c.y)
}

// ownPaths reports whether the automaton is a plain sequence: one state
// per stage, a start state and a final one, each state taking an event
// into a later stage's state and at most ignoring it in place, with no
// PROCEED, looping, stop or pending state. Then a partial match's
// version is one number longer per event it took, so the versions of the
// edges of a (event, stage) node all have the length of the stage's
// depth, and only the one that is a prefix of a partial match's version
// is compatible with it: Flink's extraction (and lock, release) of a
// partial match follows exactly the events it took itself, whether the
// node is shared or not. Nodes are then made per partial match
// (keyState.takeOwn), which keeps each node at a single edge: a node
// shared by a long followedByAny pattern can have thousands of them.
func ownPaths(p *Pattern) bool {
	if len(p.startStates) != 1 {
		return false
	}
	perStage := make([]int, len(p.stageNames))
	for _, st := range p.states {
		switch st.typ {
		case stFinal:
			if len(st.trans) != 0 {
				return false
			}
			continue
		case stNormal:
		default:
			return false
		}
		perStage[p.stageOf[st.id]]++
		for _, t := range st.trans {
			switch {
			case t.action == aTake && t.target != st && (t.target.typ == stNormal || t.target.typ == stFinal):
			case t.action == aIgnore && t.target == st:
			default:
				return false
			}
		}
	}
	for _, n := range perStage {
		if n > 1 {
			return false
		}
	}
	// takes lead forward: no state is reached again by taking events
	const (
		unseen = iota
		onPath
		done
	)
	mark := make([]int, len(p.states))
	var acyclic func(st *cstate) bool
	acyclic = func(st *cstate) bool {
		switch mark[st.id] {
		case onPath:
			return false
		case done:
			return true
		}
		mark[st.id] = onPath
		for _, t := range st.trans {
			if t.action == aTake && !acyclic(t.target) {
				return false
			}
		}
		mark[st.id] = done
		return true
	}
	return acyclic(p.states[p.startStates[0]])
}
