package expr

import (
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
