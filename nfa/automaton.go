package nfa

import "strings"

// Automaton is the compiled NFA of a pattern as plain data, for drawing
// and explaining it (nfa/explain): its states in the compiler's order, each
// with its transitions, and the settings that act on every state.
type Automaton struct {
	Pattern string
	States  []AutomatonState
	// Window is the window on the whole match (firstAndLast), in ms; 0
	// for none.
	Window int64
	// Skip is the after-match skip strategy as written in pattern-v1
	// (noSkip, skipToNext, skipPastLastEvent, skipToFirst:STAGE, ...).
	Skip string
	// SQL reports a MATCH_RECOGNIZE query, whose conditions are its DEFINE
	// clauses.
	SQL bool
}

// StateKind says what a state does with a partial match that reaches it.
type StateKind string

const (
	// StateNormal waits for an event.
	StateNormal StateKind = "normal"
	// StateFinal completes the match.
	StateFinal StateKind = "final"
	// StateStop discards the partial match (a NOT stage matched).
	StateStop StateKind = "stop"
	// StatePending waits for the window to pass (notFollowedBy at the end).
	StatePending StateKind = "pending"
)

// AutomatonState is one state of the NFA.
type AutomatonState struct {
	// Name is unique: the stage's name, stage:N for further states of the
	// same stage (Flink's naming), $endState$ for the final state.
	Name  string
	Stage string
	Kind  StateKind
	Start bool
	// Window is the state's previous-and-current window in ms (0: none).
	Window int64
	Edges  []AutomatonEdge
}

// Action is what a transition does with the event.
type Action string

const (
	// ActionTake adds the event to the partial match.
	ActionTake Action = "take"
	// ActionIgnore skips the event, staying in place or moving on.
	ActionIgnore Action = "ignore"
	// ActionProceed moves on without consuming the event.
	ActionProceed Action = "proceed"
)

// AutomatonEdge is one transition, in the order the engine tries them.
type AutomatonEdge struct {
	Action Action
	Target int    // index into Automaton.States
	Cond   string // the condition as written, "true" for none
}

// Automaton returns the pattern's compiled NFA.
func (p *Pattern) Automaton() Automaton {
	a := Automaton{Pattern: p.Name(), Window: p.windowTime, Skip: p.spec.Skip, SQL: p.sql}
	if a.Skip == "" {
		a.Skip = "noSkip"
	}
	kinds := [...]StateKind{stNormal: StateNormal, stFinal: StateFinal, stStop: StateStop, stPending: StatePending}
	actions := [...]Action{aTake: ActionTake, aIgnore: ActionIgnore, aProceed: ActionProceed}
	for _, s := range p.states {
		as := AutomatonState{Name: s.name, Stage: s.stage, Kind: kinds[s.typ], Start: s.start}
		if s.hasWindow {
			as.Window = s.window
		}
		for _, t := range s.trans {
			as.Edges = append(as.Edges, AutomatonEdge{Action: actions[t.action], Target: t.target.id, Cond: p.condText(t.cond)})
		}
		a.States = append(a.States, as)
	}
	return a
}

// condText is a condition as a person reads it: the where and until
// expressions (a query's DEFINE clauses) joined by &&, ! and parentheses.
func (p *Pattern) condText(c *cond) string {
	switch c.op {
	case cTrue:
		return "true"
	case cNot:
		x := p.condText(c.x)
		if x == "true" {
			return "false" // an ignore of a stage without a where
		}
		return "!(" + x + ")"
	case cAnd:
		x, y := p.conjunct(c.x), p.conjunct(c.y)
		// the compiler's "true && c" of a greedy or until condition
		switch {
		case x == "false" || y == "false":
			return "false"
		case x == "true":
			return y
		case y == "true":
			return x
		}
		return x + " && " + y
	}
	l := p.leaves[c.leaf]
	if d, ok := l.prog.(*definePredicate); ok && d.e != nil {
		return d.e.String()
	}
	return l.src
}

// conjunct is an operand of && as text, in parentheses when it is an
// expression that binds less tightly (||, ?:).
func (p *Pattern) conjunct(c *cond) string {
	s := p.condText(c)
	if c.op == cLeaf && strings.ContainsAny(s, "|?") {
		return "(" + s + ")"
	}
	return s
}
