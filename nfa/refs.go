package nfa

import (
	"fmt"
	"strings"

	"github.com/cepcluster/cep/nfa/expr"
)

// This file checks, when a pattern is compiled, that every events("x")
// in its conditions, emit fields, key and time names a stage of the
// pattern. Flink's getEventsForPattern of an unknown name quietly yields
// nothing, so a misspelt stage made a condition see an empty list (or an
// index error at run time) and an emit field 0 or null in every record.

// stageSet is what a stage reference may name: every stage that accepts
// events (stages inside groups included), in document order, and the
// groups, which hold no events of their own.
type stageSet struct {
	names  []string
	known  map[string]bool
	groups map[string][]string // group name → its stages that accept events
}

func stagesOf(stages []Stage) *stageSet {
	ss := &stageSet{known: map[string]bool{}, groups: map[string][]string{}}
	var visit func([]Stage) []string
	visit = func(stages []Stage) []string {
		var leaves []string
		for _, st := range stages {
			if st.Group != nil {
				inner := visit(st.Group)
				ss.groups[st.Name] = inner
				leaves = append(leaves, inner...)
				continue
			}
			if !ss.known[st.Name] {
				ss.known[st.Name] = true
				ss.names = append(ss.names, st.Name)
			}
			leaves = append(leaves, st.Name)
		}
		return leaves
	}
	visit(stages)
	return ss
}

// check returns why ref names no stage, or "" when it names one.
func (ss *stageSet) check(ref expr.StageRef) string {
	if ref.Dynamic || ss.known[ref.Stage] {
		return ""
	}
	at := ""
	if ref.Line > 0 {
		at = fmt.Sprintf(" (at %d:%d)", ref.Line, ref.Column)
	}
	if inner, ok := ss.groups[ref.Stage]; ok {
		return fmt.Sprintf("events(%q)%s names a group, which holds no events of its own: name one of its stages (%s)", ref.Stage, at, strings.Join(inner, ", "))
	}
	return fmt.Sprintf("events(%q)%s names no stage of the pattern (its stages: %s)%s", ref.Stage, at, strings.Join(ss.names, ", "), suggest(ref.Stage, ss.known))
}

// checkStageRefs checks the stage references of a compiled spec: the
// conditions are cc's leaves (by source), the emit fields emit; key and
// time are compiled again only when they call events().
func checkStageRefs(s *Spec, cc *condCompiler, emit []emitField, ec *expr.Compiler) error {
	ss := stagesOf(s.Stages)
	cel := func(src string) []expr.StageRef {
		if i, ok := cc.bySrc[src]; ok && cc.leaves[i].cel != nil {
			return cc.leaves[i].cel.StageRefs()
		}
		return nil
	}
	var visit func(prefix string, stages []Stage) error
	visit = func(prefix string, stages []Stage) error {
		for _, st := range stages {
			path := prefix + st.Name
			for _, f := range []struct{ field, src string }{{"where", st.Where}, {"until", st.Until}} {
				if f.src == "" {
					continue
				}
				for _, r := range cel(f.src) {
					if why := ss.check(r); why != "" {
						return perr(path, f.field, "%s", why)
					}
				}
			}
			if err := visit(path+"/", st.Group); err != nil {
				return err
			}
		}
		return nil
	}
	if err := visit("", s.Stages); err != nil {
		return err
	}
	for _, f := range emit {
		for _, r := range f.v.StageRefs() {
			if why := ss.check(r); why != "" {
				return perr("", "emit."+f.name, "%s", why)
			}
		}
	}
	for _, f := range []struct{ field, src string }{{"key", s.Key}, {"time", s.Time}} {
		if !strings.Contains(f.src, "events") {
			continue
		}
		v, err := ec.Value(f.src)
		if err != nil {
			continue // reported where it is compiled
		}
		for _, r := range v.StageRefs() {
			if why := ss.check(r); why != "" {
				return perr("", f.field, "%s", why)
			}
		}
	}
	return nil
}

// skipTargetError is the error for a skip strategy naming no stage of the
// chain: Flink's message, with the names it accepts.
func skipTargetError(target string, last *pat) error {
	var names []string
	known := map[string]bool{}
	for p := last; p != nil; p = p.prev {
		names = append([]string{p.name}, names...)
		known[p.name] = true
	}
	return perr("", "skip", "The pattern name specified in AfterMatchSkipStrategy %q can not be found in the given Pattern (its stages: %s)%s", target, strings.Join(names, ", "), suggest(target, known))
}
