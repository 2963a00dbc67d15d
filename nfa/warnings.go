package nfa

import (
	"fmt"

	"github.com/dustin/go-humanize"
)

// Warnings lists what is valid in the pattern but likely to hurt in
// production, one line each, naming the stage and field as errors do:
//
//   - no key: every event has the key "", so one key holds every partial
//     match, and in a cluster one shard applies every event;
//   - no window bounding the whole match while a partial match can wait
//     in a state without a window of its own: a partial match that never
//     completes keeps its events for ever (Flink's classic state leak);
//   - on top of that, followedByAny stages or loops with
//     allowCombinations: a key's partial matches can then double with
//     every event they take, for ever, up to the Matcher's bound.
//
// Flink accepts all of these silently; a deploy or validate reports them so
// that a person decides.
func (p *Pattern) Warnings() []string {
	var out []string
	warn := func(stage, field, format string, args ...any) {
		e := &PatternError{Pattern: p.Name(), Stage: stage, Field: field, Err: fmt.Errorf(format, args...)}
		out = append(out, e.Error())
	}
	if p.keyExpr == "" {
		field := "key"
		if p.sql {
			field = "PARTITION BY"
		}
		warn("", field, `none: every event has the key "", so one key holds all the pattern's partial matches and, in a cluster, one shard applies all its events`)
	}
	if p.windowTime > 0 || !p.waitsUnbounded() {
		return out
	}
	field := "within"
	if p.sql {
		field = "WITHIN"
	}
	if p.hasWindows {
		warn("", field, "only previousAndCurrent windows, which bound their own stages: a partial match waiting at another stage that never completes keeps its events for ever, and so does its key; give the pattern a firstAndLast window")
	} else {
		warn("", field, "none: a partial match that never completes keeps its events for ever, and so does its key; give the pattern a window")
	}
	var visit func(prefix string, stages []Stage)
	visit = func(prefix string, stages []Stage) {
		for i, st := range stages {
			path := prefix + st.Name
			if i > 0 && st.Contiguity == "followedByAny" {
				warn(path, "contiguity", "followedByAny without a window on the whole match: each partial match that takes an event also stays, so a key's partial matches can double with every such event, for ever (a key keeps at most %s)", humanize.Comma(DefaultMaxPartialMatches))
			}
			if st.AllowCombinations {
				warn(path, "allowCombinations", "without a window on the whole match: each partial match that takes an event also stays, so a key's partial matches can double with every such event, for ever (a key keeps at most %s)", humanize.Comma(DefaultMaxPartialMatches))
			}
			visit(path+"/", st.Group)
		}
	}
	visit("", p.spec.Stages)
	return out
}

// waitsUnbounded reports whether a partial match holding events can wait
// in a state that has no window of its own (with no window on the whole
// match, it then waits until it completes, if ever).
func (p *Pattern) waitsUnbounded() bool {
	for _, st := range p.states {
		if !st.start && st.typ != stFinal && st.typ != stStop && !st.hasWindow {
			return true
		}
	}
	return false
}
