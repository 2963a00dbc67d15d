package expr

import (
	"slices"
	"strings"

	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
)

// StageRef is one call of events(stage) in an expression: the stage it
// names, or Dynamic when its argument is not a string literal (and so
// cannot be checked before the expression runs). Line and Column are
// 1-based, of the call.
type StageRef struct {
	Stage        string
	Dynamic      bool
	Line, Column int
}

// stageRefs lists the events() calls of a checked expression in source
// order, so that a pattern can check each names one of its stages when it
// is compiled rather than see an empty list at run time.
func stageRefs(a *celast.AST) []StageRef {
	var out []StageRef
	visit(a.Expr(), func(x celast.Expr) {
		if x.Kind() != celast.CallKind {
			return
		}
		call := x.AsCall()
		if call.FunctionName() != "events" || call.IsMemberFunction() || len(call.Args()) != 1 {
			return
		}
		r := StageRef{Dynamic: true}
		if arg := call.Args()[0]; arg.Kind() == celast.LiteralKind {
			if s, ok := arg.AsLiteral().(types.String); ok {
				r.Stage, r.Dynamic = string(s), false
			}
		}
		if loc := a.SourceInfo().GetStartLocation(x.ID()); loc.Line() > 0 {
			// the parser places a call at its '(': name the function's start
			r.Line, r.Column = loc.Line(), max(loc.Column()+1-len("events"), 1)
		}
		out = append(out, r)
	})
	return out
}

// StageRefs lists the condition's events() calls in source order.
func (c *Condition) StageRefs() []StageRef { return c.p.refs }

// StageRefs lists the expression's events() calls in source order.
func (v *Value) StageRefs() []StageRef { return v.p.refs }

// FieldRef is one read of a field of the current event (e.a.b, e["a"].b,
// has(e.a.b)): its path, dotted, from the event's top level. Line and
// Column are 1-based, of the reference's start.
type FieldRef struct {
	Path         string
	Line, Column int
}

// fieldRefs lists the longest e.x.y chains of a checked expression in
// source order, so that a pattern can check each against its source's
// declared fields before it runs rather than count failed evaluations.
// A chain broken by a computed index (e[k]) stops there.
func fieldRefs(a *celast.AST) []FieldRef {
	var out []FieldRef
	inner := map[int64]bool{} // selects that are the operand of a longer chain
	visit(a.Expr(), func(x celast.Expr) {
		if inner[x.ID()] {
			return
		}
		path, root, ok := eventPath(x, inner)
		if !ok {
			return
		}
		r := FieldRef{Path: path}
		if loc := a.SourceInfo().GetStartLocation(root); loc.Line() > 0 {
			r.Line, r.Column = loc.Line(), loc.Column()+1
		}
		out = append(out, r)
	})
	return out
}

// eventPath returns x's path when x selects a field of e (e.a.b or
// e["a"]) and the id of its e, marking the shorter chains within it in
// inner.
func eventPath(x celast.Expr, inner map[int64]bool) (string, int64, bool) {
	var parts []string
	cur := x
	for {
		switch cur.Kind() {
		case celast.SelectKind:
			s := cur.AsSelect()
			parts = append(parts, s.FieldName())
			cur = s.Operand()
			inner[cur.ID()] = true
			continue
		case celast.CallKind:
			call := cur.AsCall()
			if call.FunctionName() == "_[_]" && len(call.Args()) == 2 && call.Args()[1].Kind() == celast.LiteralKind {
				if s, ok := call.Args()[1].AsLiteral().(types.String); ok {
					parts = append(parts, string(s))
					cur = call.Args()[0]
					inner[cur.ID()] = true
					continue
				}
			}
		case celast.IdentKind:
			if cur.AsIdent() == "e" && len(parts) > 0 {
				slices.Reverse(parts)
				return strings.Join(parts, "."), cur.ID(), true
			}
		}
		return "", 0, false
	}
}

// FieldRefs lists the condition's reads of event fields in source order.
func (c *Condition) FieldRefs() []FieldRef { return c.p.fields }

// FieldRefs lists the expression's reads of event fields in source order.
func (v *Value) FieldRefs() []FieldRef { return v.p.fields }
