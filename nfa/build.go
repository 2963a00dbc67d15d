package nfa

import (
	"fmt"
	"strings"
)

// This file turns a Spec into a chain of pattern elements (pat), applying the
// same checks, in the same order, as Flink's Pattern builder methods do. The
// chain is then compiled into NFA states by compiler.go.

type consuming uint8

const (
	strict consuming = iota
	skipTillNext
	skipTillAny
	notNext
	notFollow
)

type pat struct {
	name    string
	path    string // stage path for errors
	cond    *cond  // where; nil = true
	consume consuming
	inner   consuming // inside a loop

	looping, timesQ, optional, greedy bool

	from, to int   // times; valid when looping || timesQ
	window   int64 // times/oneOrMore window (ms), 0 = none
	hasTimes bool

	until *cond

	withinFL, withinPC     int64
	hasWithinFL, hasWithin bool // hasWithin: previousAndCurrent present

	group *pat // raw pattern (last element of the inner chain) for group patterns
	// alts: an alternation (MATCH_RECOGNIZE's '|'): the last element of
	// each alternative's chain, in preference order
	alts []*pat
	prev *pat
}

func (p *pat) isSingle() bool { return !p.looping && !p.timesQ }

// mayTakeNothing reports whether the chain ending at last can complete
// without taking an event: each of its elements optional, negative, or a
// group that may itself take nothing.
func mayTakeNothing(last *pat) bool {
	for q := last; q != nil; q = q.prev {
		if !q.optional && !q.isNot() && (q.group == nil || !mayTakeNothing(q.group)) && (q.alts == nil || !anyTakesNothing(q.alts)) {
			return false
		}
	}
	return true
}

func anyTakesNothing(alts []*pat) bool {
	for _, a := range alts {
		if mayTakeNothing(a) {
			return true
		}
	}
	return false
}
func (p *pat) isNot() bool { return p.consume == notNext || p.consume == notFollow }

// takeCond is Pattern.getCondition(): the where condition, true when absent.
func (p *pat) takeCond() *cond {
	if p.cond == nil {
		return condTrueV
	}
	return p.cond
}

type builder struct {
	conds *condCompiler
	preds map[string]predicate
}

// buildChain builds the chain for a list of stages; it returns the last element.
func (b *builder) buildChain(stages []Stage, prefix string) (*pat, error) {
	if len(stages) == 0 {
		if prefix == "" {
			return nil, perr("", "stages", "a pattern needs at least one stage")
		}
		return nil, perr(strings.TrimSuffix(prefix, "/"), "group", "a group needs at least one stage")
	}
	var last *pat
	for i := range stages {
		st := &stages[i]
		path := prefix + st.Name
		if st.Name == "" {
			path = fmt.Sprintf("%s#%d", prefix, i+1)
			return nil, perr(path, "name", "every stage needs a name")
		}
		if strings.Contains(st.Name, ":") {
			return nil, perr(path, "name", "a stage name cannot contain ':'")
		}
		if strings.HasPrefix(st.Name, "$") {
			return nil, perr(path, "name", "a stage name cannot start with '$'")
		}
		p := &pat{name: st.Name, path: path, inner: skipTillNext, withinFL: 0}
		// how it follows the previous element
		if last == nil {
			p.consume = skipTillNext // Pattern.begin
		} else {
			switch st.Contiguity {
			case "next":
				p.consume = strict
			case "", "followedBy":
				p.consume = skipTillNext
			case "followedByAny":
				p.consume = skipTillAny
			case "notNext", "notFollowedBy":
				if last.optional {
					return nil, perr(path, "contiguity", "Specifying a pattern with an optional path to NOT condition is not supported yet (the previous stage %q is optional)", last.name)
				}
				if st.Group != nil {
					return nil, perr(path, "contiguity", "a group cannot be a negative (%s) stage", st.Contiguity)
				}
				if st.Contiguity == "notNext" {
					p.consume = notNext
				} else {
					p.consume = notFollow
				}
			default:
				return nil, perr(path, "contiguity", "unknown contiguity %q (want next, followedBy, followedByAny, notNext or notFollowedBy)", st.Contiguity)
			}
		}
		p.prev = last
		if st.Alts != nil {
			if st.Group != nil || st.Where != "" {
				return nil, perr(path, "group", "an alternation has neither where nor group")
			}
			for i, alt := range st.Alts {
				a, err := b.buildChain(alt, fmt.Sprintf("%s|%d/", path, i+1))
				if err != nil {
					return nil, err
				}
				p.alts = append(p.alts, a)
			}
		} else if st.Group != nil {
			if st.Where != "" {
				return nil, perr(path, "where", "a stage has either where or group, not both")
			}
			raw, err := b.buildChain(st.Group, path+"/")
			if err != nil {
				return nil, err
			}
			p.group = raw
		} else if pr := b.preds[st.Name]; pr != nil && st.Where == "" {
			p.cond = b.conds.custom(st.Name, pr)
		} else if st.Where != "" {
			c, err := b.conds.leaf(st.Where)
			if err != nil {
				return nil, perr(path, "where", "%v", err)
			}
			p.cond = c
		}
		if err := b.applyQuantifiers(p, st); err != nil {
			return nil, err
		}
		if p.group != nil && mayTakeNothing(p.group) {
			// repeated, a group that takes no event is a loop without end
			// (the automaton went round it for ever on one event); once,
			// it matches twice what skipping it matches (make the group
			// optional instead)
			return nil, perr(path, "group", "a group must take an event, but every stage in it may be skipped (optional, times from 0, or negative); make the group itself optional instead")
		}
		last = p
	}
	return last, nil
}

func (b *builder) applyQuantifiers(p *pat, st *Stage) error {
	path := p.path
	nq := 0
	if st.Times != nil {
		nq++
	}
	if st.TimesOrMore != nil {
		nq++
	}
	if st.OneOrMore {
		nq++
	}
	if nq > 0 && p.isNot() {
		return perr(path, quantField(st), "Option not applicable to NOT pattern")
	}
	if nq > 1 {
		return perr(path, quantField(st), "Already applied quantifier to this Pattern: use only one of times, timesOrMore and oneOrMore")
	}
	window := int64(0)
	if st.Window != nil {
		if nq == 0 {
			return perr(path, "window", "a window needs times, timesOrMore or oneOrMore on the same stage")
		}
		window = st.Window.Millis
	}
	switch {
	case st.Times != nil:
		from, to := st.Times.From, st.Times.To
		if from == to {
			if from <= 0 {
				return perr(path, "times", "You should give a positive number greater than 0.")
			}
		} else {
			if from < 0 {
				return perr(path, "times", "The from should be a non-negative number greater than or equal to 0.")
			}
			if to < from {
				return perr(path, "times", "The to should be a number greater than or equal to from: %d.", from)
			}
			if from == 0 {
				p.optional = true
				from = 1
			}
		}
		p.timesQ, p.from, p.to, p.hasTimes = true, from, to, true
	case st.TimesOrMore != nil:
		if *st.TimesOrMore <= 0 {
			return perr(path, "timesOrMore", "The from should be a positive number greater than 0.")
		}
		p.looping, p.from, p.to, p.hasTimes = true, *st.TimesOrMore, *st.TimesOrMore, true
	case st.OneOrMore:
		p.looping, p.from, p.to, p.hasTimes = true, 1, 1, true
	}
	p.window = window
	if st.Optional {
		if p.prev != nil && p.prev.greedy {
			return perr(path, "optional", "Optional pattern cannot be preceded by greedy pattern")
		}
		if p.optional {
			return perr(path, "optional", "Optional already applied (times with from 0 is optional)")
		}
		if p.isNot() {
			return perr(path, "optional", "NOT pattern cannot be optional")
		}
		p.optional = true
	}
	if st.Consecutive && st.AllowCombinations {
		return perr(path, "consecutive", "consecutive and allowCombinations exclude each other")
	}
	if st.Consecutive {
		if p.isSingle() {
			return perr(path, "consecutive", "consecutive is only applicable to looping or times stages")
		}
		p.inner = strict
	}
	if st.AllowCombinations {
		if p.isSingle() {
			return perr(path, "allowCombinations", "allowCombinations is only applicable to looping or times stages")
		}
		p.inner = skipTillAny
	}
	if st.Greedy {
		if p.isNot() {
			return perr(path, "greedy", "Option not applicable to NOT pattern")
		}
		if p.group != nil {
			return perr(path, "greedy", "Option not applicable to group pattern")
		}
		if p.inner == skipTillAny {
			return perr(path, "greedy", "Option not applicable to FollowedByAny pattern (allowCombinations)")
		}
		if p.isSingle() {
			return perr(path, "greedy", "greedy is only applicable to looping or times stages, not to a singleton")
		}
		p.greedy = true
	}
	if st.Until != "" {
		if !p.looping {
			return perr(path, "until", "The until condition is only applicable to looping states.")
		}
		c, err := b.conds.leaf(st.Until)
		if err != nil {
			return perr(path, "until", "%v", err)
		}
		p.until = c
	}
	if st.Within != nil {
		switch st.WithinType {
		case "", "firstAndLast":
			p.withinFL, p.hasWithinFL = st.Within.Millis, true
		case "previousAndCurrent":
			p.withinPC, p.hasWithin = st.Within.Millis, true
		default:
			return perr(path, "withinType", "unknown withinType %q (want firstAndLast or previousAndCurrent)", st.WithinType)
		}
	} else if st.WithinType != "" {
		return perr(path, "withinType", "withinType needs within on the same stage")
	}
	return nil
}

func quantField(st *Stage) string {
	switch {
	case st.Times != nil:
		return "times"
	case st.TimesOrMore != nil:
		return "timesOrMore"
	default:
		return "oneOrMore"
	}
}
