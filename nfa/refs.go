package nfa

import (
	"fmt"
	"strings"

	"github.com/cepcluster/cep/nfa/expr"
)

// This file checks that every events("x") in a pattern's conditions,
// emit fields, key and time names a stage of the pattern. Flink's
// getEventsForPattern of an unknown name quietly yields nothing, so a
// misspelt stage made a condition see an empty list (or an index error at
// run time) and an emit field 0 or null in every record.

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

// CheckStageRefs reports the first reference to a stage that names none:
// events("x") in a where, until, emit, key or time expression whose x is
// not a stage accepting events (a group's name holds none of its own).
// An events() whose argument is computed is left to run. The error is a
// *PatternError naming the field, the reference and the stages there are.
//
// It is not part of Compile, which a shard runs on every pattern its log
// deploys: a pattern deployed before the check existed must compile the
// same way on every replica and from every snapshot. Deploys, validation
// and offline runs call it on new documents.
func (p *Pattern) CheckStageRefs() error {
	if err := p.checkStageRefs(); err != nil {
		err.Pattern = p.Name()
		return err
	}
	return nil
}

func (p *Pattern) checkStageRefs() *PatternError {
	s := p.spec
	ss := stagesOf(s.Stages)
	bySrc := map[string]*expr.Condition{}
	for _, l := range p.leaves {
		if l.cel != nil {
			bySrc[l.src] = l.cel
		}
	}
	var visit func(prefix string, stages []Stage) *PatternError
	visit = func(prefix string, stages []Stage) *PatternError {
		for _, st := range stages {
			path := prefix + st.Name
			for _, f := range []struct{ field, src string }{{"where", st.Where}, {"until", st.Until}} {
				c := bySrc[f.src]
				if f.src == "" || c == nil {
					continue
				}
				for _, r := range c.StageRefs() {
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
	for _, f := range p.emit {
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
		ec, err := exprCompiler()
		if err != nil {
			continue
		}
		v, err := ec.Value(f.src)
		if err != nil {
			continue // it compiled once; nothing to check then
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

// CheckFields reports the first read of an event field (e.a.b in a
// where, until, emit, key or time expression) that missing refuses:
// missing returns nil for a field the pattern's source may have, else why
// not (the field, the source, the closest declared field). The error is
// a *PatternError naming the stage and field, with the reference's
// position in its expression. A query's columns are checked by
// CompileSQLColumns instead.
//
// Like CheckStageRefs it is for new documents, not part of Compile.
func (p *Pattern) CheckFields(missing func(path string) error) error {
	if err := p.checkFields(missing); err != nil {
		err.Pattern = p.Name()
		return err
	}
	return nil
}

func (p *Pattern) checkFields(missing func(path string) error) *PatternError {
	check := func(stage, field string, refs []expr.FieldRef) *PatternError {
		for _, r := range refs {
			if err := missing(r.Path); err != nil {
				if r.Line > 0 {
					err = fmt.Errorf("%w (e.%s at %d:%d)", err, r.Path, r.Line, r.Column)
				}
				return &PatternError{Stage: stage, Field: field, Err: err}
			}
		}
		return nil
	}
	s := p.spec
	bySrc := map[string]*expr.Condition{}
	for _, l := range p.leaves {
		if l.cel != nil {
			bySrc[l.src] = l.cel
		}
	}
	var visit func(prefix string, stages []Stage) *PatternError
	visit = func(prefix string, stages []Stage) *PatternError {
		for _, st := range stages {
			path := prefix + st.Name
			for _, f := range []struct{ field, src string }{{"where", st.Where}, {"until", st.Until}} {
				if c := bySrc[f.src]; f.src != "" && c != nil {
					if err := check(path, f.field, c.FieldRefs()); err != nil {
						return err
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
	for _, f := range p.emit {
		if err := check("", "emit."+f.name, f.v.FieldRefs()); err != nil {
			return err
		}
	}
	for _, f := range []struct{ field, src string }{{"key", s.Key}, {"time", s.Time}} {
		if f.src == "" {
			continue
		}
		ec, err := exprCompiler()
		if err != nil {
			continue
		}
		v, err := ec.Value(f.src)
		if err != nil {
			continue // it compiled once; nothing to check then
		}
		if err := check("", f.field, v.FieldRefs()); err != nil {
			return err
		}
	}
	return nil
}
