package expr

import (
	"errors"
	"fmt"
	"math"
	"strings"

	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// The fast path evaluates the common simple conditions — comparisons of
// event fields with literals, membership in a literal list, has(), bare
// boolean fields and bool literals combined with &&, || and ! — as Go
// closures over the event map, without the CEL interpreter.
//
// It reproduces CEL's results exactly, including which evaluations are
// errors: a missing field is an error; && and || absorb errors the way CEL
// does (false && err == false, true || err == true, err && true == err);
// ordering values of different kinds (string vs number, bool vs number,
// null vs anything) is an error, while equality of different kinds is false;
// ints and doubles compare numerically with cel-go's formulas.
//
// Whenever it meets a value it does not model (a Go type DecodeEvent never
// produces, a NaN, a has() on a non-map) it returns errFallback and the
// caller runs the general CEL program instead, so a fast result is never
// different from the CEL result.

// errFallback tells the caller to evaluate with CEL instead.
var errFallback = errors.New("expr: fast path cannot evaluate this input")

// fastBool evaluates a condition on an event.
type fastBool func(e Event, ctx Ctx) (bool, error)

// compileFastBool returns the fast evaluator for x, or nil when x is not in
// the fast-path subset.
func compileFastBool(x celast.Expr) fastBool {
	f, ok := buildBool(x)
	if !ok {
		return nil
	}
	return f
}

// value kinds seen by the fast path.
type vkind uint8

const (
	kNull vkind = iota
	kBool
	kInt
	kDouble
	kString
	kOther    // list or map: only equality (always false against a literal)
	kFallback // anything else: let CEL decide
)

type fval struct {
	k vkind
	b bool
	i int64
	f float64
	s string
}

func classify(x any) fval {
	switch t := x.(type) {
	case string:
		return fval{k: kString, s: t}
	case int64:
		return fval{k: kInt, i: t}
	case float64:
		if t != t { // NaN
			return fval{k: kFallback}
		}
		return fval{k: kDouble, f: t}
	case bool:
		return fval{k: kBool, b: t}
	case nil:
		return fval{k: kNull}
	case []any, map[string]any:
		return fval{k: kOther}
	default:
		return fval{k: kFallback}
	}
}

func literalVal(x celast.Expr) (fval, bool) {
	if x.Kind() != celast.LiteralKind {
		return fval{}, false
	}
	switch t := x.AsLiteral().(type) {
	case types.String:
		return fval{k: kString, s: string(t)}, true
	case types.Int:
		return fval{k: kInt, i: int64(t)}, true
	case types.Double:
		if math.IsNaN(float64(t)) {
			return fval{}, false
		}
		return fval{k: kDouble, f: float64(t)}, true
	case types.Bool:
		return fval{k: kBool, b: bool(t)}, true
	case types.Null:
		return fval{k: kNull}, true
	}
	return fval{}, false
}

func isNum(k vkind) bool { return k == kInt || k == kDouble }

// cmpDoubleInt and cmpDouble are cel-go's compareDoubleInt/compareDouble.
func cmpDoubleInt(d float64, i int64) int {
	if d < math.MinInt64 {
		return -1
	}
	if d > math.MaxInt64 {
		return 1
	}
	return cmpDouble(d, float64(i))
}

func cmpDouble(a, b float64) int {
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}

func cmpInt(a, b int64) int {
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}

func cmpNum(a, b fval) int {
	switch {
	case a.k == kInt && b.k == kInt:
		return cmpInt(a.i, b.i)
	case a.k == kDouble && b.k == kDouble:
		return cmpDouble(a.f, b.f)
	case a.k == kDouble: // b int
		return cmpDoubleInt(a.f, b.i)
	default: // a int, b double
		return -cmpDoubleInt(b.f, a.i)
	}
}

// equal is CEL heterogeneous equality for the modelled kinds (no NaN).
func equal(a, b fval) bool {
	if isNum(a.k) && isNum(b.k) {
		return cmpNum(a, b) == 0
	}
	if a.k != b.k {
		return false
	}
	switch a.k {
	case kNull:
		return true
	case kBool:
		return a.b == b.b
	case kString:
		return a.s == b.s
	}
	return false // kOther against a literal never happens
}

// order compares a and b for <, <=, >, >=; ok is false when CEL has no
// overload for the pair.
func order(a, b fval) (c int, ok bool) {
	switch {
	case isNum(a.k) && isNum(b.k):
		return cmpNum(a, b), true
	case a.k == kString && b.k == kString:
		return strings.Compare(a.s, b.s), true
	case a.k == kBool && b.k == kBool:
		switch {
		case a.b == b.b:
			return 0, true
		case !a.b:
			return -1, true
		default:
			return 1, true
		}
	}
	return 0, false
}

// path is a chain of field selections (e.a.b or e["a"]["b"]) rooted at e.
type path struct {
	segs   []string
	noKey  []error // noKey[i]: segs[i] is missing
	notMap []error // notMap[i]: the value holding segs[i] is not a map
}

func newPath(segs []string) *path {
	p := &path{segs: segs, noKey: make([]error, len(segs)), notMap: make([]error, len(segs))}
	for i, s := range segs {
		p.noKey[i] = fmt.Errorf("no such key: %s", escapeControls(s))
		p.notMap[i] = fmt.Errorf("cannot select field '%s' of a value that is not a map", escapeControls(s))
	}
	return p
}

// get resolves the path in e. It returns errFallback when it meets a value
// it does not model.
func (p *path) get(e Event) (any, error) {
	x, ok := e[p.segs[0]]
	if !ok {
		return nil, p.noKey[0]
	}
	for i := 1; i < len(p.segs); i++ {
		m, isMap := x.(map[string]any)
		if !isMap {
			switch x.(type) {
			case string, int64, float64, bool, nil, []any:
				return nil, p.notMap[i]
			}
			return nil, errFallback
		}
		if x, ok = m[p.segs[i]]; !ok {
			return nil, p.noKey[i]
		}
	}
	return x, nil
}

// fieldPath recognises e.a.b / e["a"]["b"] and returns its segments.
func fieldPath(x celast.Expr) ([]string, bool) { return fieldPathOf(x, "e") }

// eventsFieldPath recognises events("S")[N].a.b, a field of the N-th event
// a stage accepted, with N a literal; path is nil otherwise. (Anything
// else the value or the index turns out to be is left to CEL.)
func eventsFieldPath(x celast.Expr) (stage string, index int, path []string) {
	// the path: .f or ["f"], down to the event's index
	var rev []string
	var n types.Int
	var list celast.Expr
	for list == nil {
		switch x.Kind() {
		case celast.SelectKind:
			sel := x.AsSelect()
			if sel.IsTestOnly() {
				return "", 0, nil
			}
			rev = append(rev, sel.FieldName())
			x = sel.Operand()
		case celast.CallKind:
			idx := x.AsCall()
			if idx.FunctionName() != operators.Index || idx.IsMemberFunction() || len(idx.Args()) != 2 || idx.Args()[1].Kind() != celast.LiteralKind {
				return "", 0, nil
			}
			switch lit := idx.Args()[1].AsLiteral().(type) {
			case types.String:
				rev = append(rev, string(lit))
				x = idx.Args()[0]
			case types.Int:
				n, list = lit, idx.Args()[0]
			default:
				return "", 0, nil
			}
		default:
			return "", 0, nil
		}
	}
	if len(rev) == 0 || n < 0 || n > 1<<20 || list.Kind() != celast.CallKind {
		return "", 0, nil
	}
	call := list.AsCall()
	if call.FunctionName() != "events" || call.IsMemberFunction() || len(call.Args()) != 1 || call.Args()[0].Kind() != celast.LiteralKind {
		return "", 0, nil
	}
	s, isStr := call.Args()[0].AsLiteral().(types.String)
	if !isStr {
		return "", 0, nil
	}
	path = make([]string, len(rev))
	for i := range rev {
		path[i] = rev[len(rev)-1-i]
	}
	return string(s), int(n), path
}

// fieldPathOf recognises a field path rooted at the variable root.
func fieldPathOf(x celast.Expr, root string) ([]string, bool) {
	var rev []string
	for {
		switch x.Kind() {
		case celast.IdentKind:
			if x.AsIdent() != root || len(rev) == 0 {
				return nil, false
			}
			segs := make([]string, len(rev))
			for i := range rev {
				segs[i] = rev[len(rev)-1-i]
			}
			return segs, true
		case celast.SelectKind:
			sel := x.AsSelect()
			if sel.IsTestOnly() {
				return nil, false
			}
			rev = append(rev, sel.FieldName())
			x = sel.Operand()
		case celast.CallKind:
			call := x.AsCall()
			if call.FunctionName() != operators.Index || call.IsMemberFunction() || len(call.Args()) != 2 {
				return nil, false
			}
			idx := call.Args()[1]
			if idx.Kind() != celast.LiteralKind {
				return nil, false
			}
			s, ok := idx.AsLiteral().(types.String)
			if !ok {
				return nil, false
			}
			rev = append(rev, string(s))
			x = call.Args()[0]
		default:
			return nil, false
		}
	}
}

// lookupScalar returns the value at segs when it is a scalar of a kind
// DecodeEvent produces; ok is false otherwise (missing, container, other).
func lookupScalar(e Event, segs []string) (any, bool) {
	x, ok := e[segs[0]]
	if !ok {
		return nil, false
	}
	for _, s := range segs[1:] {
		m, isMap := x.(map[string]any)
		if !isMap {
			return nil, false
		}
		if x, ok = m[s]; !ok {
			return nil, false
		}
	}
	switch x.(type) {
	case string, int64, float64, bool, nil:
		return x, true
	}
	return nil, false
}

var (
	errNotBool = errors.New("no such overload: operand of a logical operator is not a bool")
)

func buildBool(x celast.Expr) (fastBool, bool) {
	switch x.Kind() {
	case celast.LiteralKind:
		b, ok := x.AsLiteral().(types.Bool)
		if !ok {
			return nil, false
		}
		v := bool(b)
		return func(Event, Ctx) (bool, error) { return v, nil }, true
	case celast.SelectKind:
		if x.AsSelect().IsTestOnly() {
			return buildHas(x.AsSelect())
		}
		return buildBareField(x)
	case celast.CallKind:
		call := x.AsCall()
		if call.IsMemberFunction() {
			return nil, false
		}
		args := call.Args()
		switch call.FunctionName() {
		case operators.LogicalAnd, operators.LogicalOr:
			if len(args) < 2 {
				return nil, false
			}
			terms := make([]fastBool, len(args))
			for i, a := range args {
				t, ok := buildBool(a)
				if !ok {
					return nil, false
				}
				terms[i] = t
			}
			if call.FunctionName() == operators.LogicalAnd {
				return buildAnd(terms), true
			}
			return buildOr(terms), true
		case operators.LogicalNot:
			if len(args) != 1 {
				return nil, false
			}
			t, ok := buildBool(args[0])
			if !ok {
				return nil, false
			}
			return func(e Event, ctx Ctx) (bool, error) {
				v, err := t(e, ctx)
				if err != nil {
					return false, err
				}
				return !v, nil
			}, true
		case operators.Equals, operators.NotEquals, operators.Less, operators.LessEquals,
			operators.Greater, operators.GreaterEquals:
			if len(args) != 2 {
				return nil, false
			}
			return buildCompare(call.FunctionName(), args[0], args[1])
		case operators.In:
			if len(args) != 2 {
				return nil, false
			}
			return buildIn(args[0], args[1])
		case operators.Index:
			return buildBareField(x)
		}
	}
	return nil, false
}

// buildAnd mirrors cel-go's evalAnd: any false term makes the result false,
// otherwise an error (or non-bool) term makes it an error, otherwise true.
func buildAnd(terms []fastBool) fastBool {
	if len(terms) == 2 {
		l, r := terms[0], terms[1]
		return func(e Event, ctx Ctx) (bool, error) {
			lv, lerr := l(e, ctx)
			if lerr == nil && !lv {
				return false, nil
			}
			if lerr == errFallback {
				return false, errFallback
			}
			rv, rerr := r(e, ctx)
			if rerr == nil {
				if !rv {
					return false, nil
				}
				return lv, lerr
			}
			if rerr == errFallback {
				return false, errFallback
			}
			if lerr != nil {
				return false, lerr
			}
			return false, rerr
		}
	}
	return func(e Event, ctx Ctx) (bool, error) {
		var first error
		for _, t := range terms {
			v, err := t(e, ctx)
			if err == nil {
				if !v {
					return false, nil
				}
				continue
			}
			if err == errFallback {
				return false, errFallback
			}
			if first == nil {
				first = err
			}
		}
		if first != nil {
			return false, first
		}
		return true, nil
	}
}

// buildOr mirrors cel-go's evalOr: any true term makes the result true,
// otherwise an error term makes it an error, otherwise false.
func buildOr(terms []fastBool) fastBool {
	if len(terms) == 2 {
		l, r := terms[0], terms[1]
		return func(e Event, ctx Ctx) (bool, error) {
			lv, lerr := l(e, ctx)
			if lerr == nil && lv {
				return true, nil
			}
			if lerr == errFallback {
				return false, errFallback
			}
			rv, rerr := r(e, ctx)
			if rerr == nil {
				if rv {
					return true, nil
				}
				return false, lerr
			}
			if rerr == errFallback {
				return false, errFallback
			}
			if lerr != nil {
				return false, lerr
			}
			return false, rerr
		}
	}
	return func(e Event, ctx Ctx) (bool, error) {
		var first error
		for _, t := range terms {
			v, err := t(e, ctx)
			if err == nil {
				if v {
					return true, nil
				}
				continue
			}
			if err == errFallback {
				return false, errFallback
			}
			if first == nil {
				first = err
			}
		}
		if first != nil {
			return false, first
		}
		return false, nil
	}
}

// buildBareField evaluates a field used directly as a bool operand.
func buildBareField(x celast.Expr) (fastBool, bool) {
	segs, ok := fieldPath(x)
	if !ok {
		return nil, false
	}
	p := newPath(segs)
	return func(e Event, ctx Ctx) (bool, error) {
		v, err := p.get(e)
		if err != nil {
			return false, err
		}
		switch t := v.(type) {
		case bool:
			return t, nil
		case string, int64, float64, nil, []any, map[string]any:
			return false, errNotBool
		}
		return false, errFallback
	}, true
}

// buildHas evaluates has(e.a...b): presence of the last field in the map
// the rest of the path yields.
func buildHas(sel celast.SelectExpr) (fastBool, bool) {
	field := sel.FieldName()
	op := sel.Operand()
	if op.Kind() == celast.IdentKind && op.AsIdent() == "e" {
		return func(e Event, ctx Ctx) (bool, error) {
			_, ok := e[field]
			return ok, nil
		}, true
	}
	segs, ok := fieldPath(op)
	if !ok {
		return nil, false
	}
	p := newPath(segs)
	return func(e Event, ctx Ctx) (bool, error) {
		v, err := p.get(e)
		if err != nil {
			return false, err
		}
		m, ok := v.(map[string]any)
		if !ok {
			return false, errFallback
		}
		_, ok = m[field]
		return ok, nil
	}, true
}

// fieldEq is a condition e.PATH == "lit" or e.PATH != "lit".
type fieldEq struct {
	key  string // the path's segments joined by NUL
	p    *path
	lit  string
	want bool // ==
}

// fieldEquality recognises a whole condition that compares a field path
// with a string literal for (in)equality, the shape buildCompare gives the
// string-equality fast path.
func fieldEquality(x celast.Expr) *fieldEq {
	if x.Kind() != celast.CallKind || x.AsCall().IsMemberFunction() {
		return nil
	}
	call := x.AsCall()
	op := call.FunctionName()
	if (op != operators.Equals && op != operators.NotEquals) || len(call.Args()) != 2 {
		return nil
	}
	l, r := call.Args()[0], call.Args()[1]
	if isAggregate(l) || isAggregate(r) {
		return nil
	}
	segs, ok := fieldPath(l)
	lit, lok := literalVal(r)
	if !ok {
		segs, ok = fieldPath(r)
		lit, lok = literalVal(l)
	}
	if !ok || !lok || lit.k != kString {
		return nil
	}
	return &fieldEq{key: strings.Join(segs, "\x00"), p: newPath(segs), lit: lit.s, want: op == operators.Equals}
}

// stringEquals is CEL's x == lit (want) or x != lit (!want) for a string
// literal and a decoded field value x; errFallback for a value it does not
// model.
func stringEquals(x any, lit string, want bool) (bool, error) {
	switch t := x.(type) {
	case string:
		return (t == lit) == want, nil
	case int64, float64, bool, nil, []any, map[string]any:
		return !want, nil
	}
	return false, errFallback
}

func buildCompare(op string, lhs, rhs celast.Expr) (fastBool, bool) {
	if isAggregate(lhs) || isAggregate(rhs) {
		return buildCompareOperands(op, lhs, rhs)
	}
	var (
		segs    []string
		lit     fval
		litLeft bool
		ok      bool
	)
	if segs, ok = fieldPath(lhs); ok {
		if lit, ok = literalVal(rhs); !ok {
			return nil, false
		}
	} else if segs, ok = fieldPath(rhs); ok {
		if lit, ok = literalVal(lhs); !ok {
			return nil, false
		}
		litLeft = true
	} else {
		return nil, false
	}
	p := newPath(segs)
	if op == operators.Equals || op == operators.NotEquals {
		want := op == operators.Equals
		if lit.k == kString {
			s := lit.s
			return func(e Event, ctx Ctx) (bool, error) {
				x, err := p.get(e)
				if err != nil {
					return false, err
				}
				return stringEquals(x, s, want)
			}, true
		}
		return func(e Event, ctx Ctx) (bool, error) {
			x, err := p.get(e)
			if err != nil {
				return false, err
			}
			v := classify(x)
			if v.k == kFallback {
				return false, errFallback
			}
			return equal(v, lit) == want, nil
		}, true
	}
	// Ordering. Normalise to "value OP' literal".
	if litLeft {
		switch op {
		case operators.Less:
			op = operators.Greater
		case operators.LessEquals:
			op = operators.GreaterEquals
		case operators.Greater:
			op = operators.Less
		case operators.GreaterEquals:
			op = operators.LessEquals
		}
	}
	test := orderTest(op)
	errOverload := fmt.Errorf("no such overload: %s between %s and a value of another type", opSymbol(op), kindName(lit.k))
	return func(e Event, ctx Ctx) (bool, error) {
		x, err := p.get(e)
		if err != nil {
			return false, err
		}
		v := classify(x)
		if v.k == kFallback {
			return false, errFallback
		}
		c, ok := order(v, lit)
		if !ok {
			return false, errOverload
		}
		return test(c), nil
	}, true
}

// orderTest turns the result of a three-way comparison into the value of
// the ordering operator op.
func orderTest(op string) func(c int) bool {
	switch op {
	case operators.Less:
		return func(c int) bool { return c < 0 }
	case operators.LessEquals:
		return func(c int) bool { return c <= 0 }
	case operators.Greater:
		return func(c int) bool { return c > 0 }
	default:
		return func(c int) bool { return c >= 0 }
	}
}

func buildIn(lhs, rhs celast.Expr) (fastBool, bool) {
	segs, ok := fieldPath(lhs)
	if !ok || rhs.Kind() != celast.ListKind {
		return nil, false
	}
	list := rhs.AsList()
	if len(list.OptionalIndices()) > 0 {
		return nil, false
	}
	lits := make([]fval, 0, list.Size())
	for _, el := range list.Elements() {
		l, ok := literalVal(el)
		if !ok {
			return nil, false
		}
		lits = append(lits, l)
	}
	p := newPath(segs)
	return func(e Event, ctx Ctx) (bool, error) {
		x, err := p.get(e)
		if err != nil {
			return false, err
		}
		v := classify(x)
		if v.k == kFallback {
			return false, errFallback
		}
		for _, l := range lits {
			if equal(v, l) {
				return true, nil
			}
		}
		return false, nil
	}, true
}

func opSymbol(op string) string {
	switch op {
	case operators.Less:
		return "<"
	case operators.LessEquals:
		return "<="
	case operators.Greater:
		return ">"
	case operators.GreaterEquals:
		return ">="
	}
	return op
}

func kindName(k vkind) string {
	switch k {
	case kNull:
		return "null"
	case kBool:
		return "bool"
	case kInt:
		return "int"
	case kDouble:
		return "double"
	case kString:
		return "string"
	}
	return "value"
}

// ---------------------------------------------------------------------------
// Aggregates over the partial match: size(events("s")), events("s").size(),
// and sum/avg/min/max(events("s").map(x, x.<path>)), compared with a
// literal, an event field or another aggregate. They reproduce the CEL
// program's value and error-ness: the map macro fails when an event lacks
// the field, sum/min/max/avg fail on a non-number, avg/min/max of no events
// are null, and ordering null or mixed kinds is an error. A list longer
// than the cost estimate assumes, a NaN or a value the fast path does not
// model falls back to CEL (whose runtime cost limit then applies).

// operand yields one side of a comparison.
type operand func(e Event, ctx Ctx) (fval, error)

// aggregate is a recognised aggregate over one stage's events.
type aggregate struct {
	fn    string // "size", "sum", "avg", "min" or "max"
	stage string
	elem  *path // the mapped field, nil for size
}

// eventsStage recognises events("<literal>").
func eventsStage(x celast.Expr) (string, bool) {
	if x.Kind() != celast.CallKind {
		return "", false
	}
	c := x.AsCall()
	if c.FunctionName() != "events" || c.IsMemberFunction() || len(c.Args()) != 1 || c.Args()[0].Kind() != celast.LiteralKind {
		return "", false
	}
	s, ok := c.Args()[0].AsLiteral().(types.String)
	return string(s), ok
}

// mappedField recognises the expansion of events("s").map(x, x.<path>).
func mappedField(x celast.Expr) (stage string, segs []string, ok bool) {
	if x.Kind() != celast.ComprehensionKind {
		return "", nil, false
	}
	cm := x.AsComprehension()
	if cm.HasIterVar2() {
		return "", nil, false
	}
	if stage, ok = eventsStage(cm.IterRange()); !ok {
		return "", nil, false
	}
	accu := cm.AccuVar()
	init, cond, step, res := cm.AccuInit(), cm.LoopCondition(), cm.LoopStep(), cm.Result()
	if init.Kind() != celast.ListKind || init.AsList().Size() != 0 ||
		cond.Kind() != celast.LiteralKind || cond.AsLiteral() != types.True ||
		res.Kind() != celast.IdentKind || res.AsIdent() != accu ||
		step.Kind() != celast.CallKind {
		return "", nil, false
	}
	sc := step.AsCall()
	if sc.FunctionName() != operators.Add || sc.IsMemberFunction() || len(sc.Args()) != 2 {
		return "", nil, false
	}
	a, l := sc.Args()[0], sc.Args()[1]
	if a.Kind() != celast.IdentKind || a.AsIdent() != accu || l.Kind() != celast.ListKind || l.AsList().Size() != 1 ||
		len(l.AsList().OptionalIndices()) > 0 {
		return "", nil, false
	}
	segs, ok = fieldPathOf(l.AsList().Elements()[0], cm.IterVar())
	return stage, segs, ok
}

func asAggregate(x celast.Expr) (aggregate, bool) {
	if x.Kind() != celast.CallKind {
		return aggregate{}, false
	}
	c := x.AsCall()
	switch fn := c.FunctionName(); fn {
	case "size":
		var arg celast.Expr
		switch {
		case c.IsMemberFunction() && len(c.Args()) == 0:
			arg = c.Target()
		case !c.IsMemberFunction() && len(c.Args()) == 1:
			arg = c.Args()[0]
		default:
			return aggregate{}, false
		}
		stage, ok := eventsStage(arg)
		return aggregate{fn: fn, stage: stage}, ok
	case "sum", "avg", "min", "max":
		if c.IsMemberFunction() || len(c.Args()) != 1 {
			return aggregate{}, false
		}
		stage, segs, ok := mappedField(c.Args()[0])
		if !ok {
			return aggregate{}, false
		}
		return aggregate{fn: fn, stage: stage, elem: newPath(segs)}, true
	}
	return aggregate{}, false
}

func isAggregate(x celast.Expr) bool {
	_, ok := asAggregate(x)
	return ok
}

var errAggregate = errors.New("aggregate over events(): an element is not a number")

func (a aggregate) eval(ctx Ctx) (fval, error) {
	var evs []Event
	if ctx != nil {
		evs = ctx.EventsFor(a.stage)
	}
	if len(evs) > EstimatedMaxEvents {
		return fval{}, errFallback
	}
	if a.fn == "size" {
		return fval{k: kInt, i: int64(len(evs))}, nil
	}
	// the map macro first: every event must have the field
	var buf [16]fval
	vals := buf[:0]
	for _, ev := range evs {
		x, err := a.elem.get(ev)
		if err != nil {
			return fval{}, err
		}
		v := classify(x)
		if v.k == kFallback {
			return fval{}, errFallback
		}
		vals = append(vals, v)
	}
	for _, v := range vals {
		if !isNum(v.k) {
			return fval{}, errAggregate
		}
	}
	if len(vals) == 0 {
		if a.fn == "sum" {
			return fval{k: kInt}, nil
		}
		return fval{k: kNull}, nil
	}
	switch a.fn {
	case "min", "max":
		want := 1
		if a.fn == "min" {
			want = -1
		}
		best := vals[0]
		for _, v := range vals[1:] {
			if cmpNum(v, best) == want {
				best = v
			}
		}
		return best, nil
	}
	// sum and avg: a float64 total in order, as the CEL functions keep it
	var f float64
	var i int64
	hasDouble, overflow := false, false
	for _, v := range vals {
		if v.k == kDouble {
			hasDouble = true
			f += v.f
			continue
		}
		f += float64(v.i)
		s := i + v.i
		if (v.i > 0 && s < i) || (v.i < 0 && s > i) {
			overflow = true
		}
		i = s
	}
	switch {
	case a.fn == "avg":
		f /= float64(len(vals))
	case !hasDouble:
		if overflow {
			return fval{}, errAggregate
		}
		return fval{k: kInt, i: i}, nil
	}
	if math.IsNaN(f) {
		return fval{}, errFallback
	}
	return fval{k: kDouble, f: f}, nil
}

// buildOperand builds a literal, an event field or an aggregate.
func buildOperand(x celast.Expr) (operand, bool) {
	if a, ok := asAggregate(x); ok {
		return func(_ Event, ctx Ctx) (fval, error) { return a.eval(ctx) }, true
	}
	if lit, ok := literalVal(x); ok {
		return func(Event, Ctx) (fval, error) { return lit, nil }, true
	}
	if segs, ok := fieldPath(x); ok {
		p := newPath(segs)
		return func(e Event, _ Ctx) (fval, error) {
			x, err := p.get(e)
			if err != nil {
				return fval{}, err
			}
			v := classify(x)
			if v.k == kFallback {
				return fval{}, errFallback
			}
			return v, nil
		}, true
	}
	return nil, false
}

// buildCompareOperands compares two operands, at least one an aggregate.
// CEL evaluates both sides; an error on either makes the comparison an
// error, and a fallback on either defers to CEL.
func buildCompareOperands(op string, lhs, rhs celast.Expr) (fastBool, bool) {
	l, ok1 := buildOperand(lhs)
	r, ok2 := buildOperand(rhs)
	if !ok1 || !ok2 {
		return nil, false
	}
	errOverload := fmt.Errorf("no such overload: %s between values of different types", opSymbol(op))
	var test func(c int) bool
	if op != operators.Equals && op != operators.NotEquals {
		test = orderTest(op)
	}
	want := op == operators.Equals
	return func(e Event, ctx Ctx) (bool, error) {
		a, aerr := l(e, ctx)
		b, berr := r(e, ctx)
		if aerr == errFallback || berr == errFallback {
			return false, errFallback
		}
		if aerr != nil {
			return false, aerr
		}
		if berr != nil {
			return false, berr
		}
		if test == nil {
			return equal(a, b) == want, nil
		}
		c, ok := order(a, b)
		if !ok {
			return false, errOverload
		}
		return test(c), nil
	}, true
}
