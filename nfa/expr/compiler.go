package expr

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/functions"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
	"cel.dev/cel-go/parser"
)

// Limits applied by the Compiler.
const (
	// MaxCost is the largest static cost estimate a compiled expression may
	// have, in cel-go cost units (roughly one unit per variable access,
	// comparison or loop step; string operations cost a tenth of a unit per
	// character). The estimate assumes the sizes below for the data the
	// expression reads; an expression whose worst case exceeds MaxCost is
	// rejected. The limit admits any single pass over events() with a
	// modest body (events("a").exists(x, x.user == e.user) is about 1.1
	// million) and rejects every nested iteration over events(), which
	// costs at least 10,000 × 10,000 units.
	MaxCost = 10_000_000

	// MaxRuntimeCost bounds the actual cost of one evaluation, measured on
	// the real inputs; an evaluation that reaches it stops with a "cost
	// limit exceeded" error. It protects against inputs larger than the
	// sizes the static estimate assumes (e.g. a stage with a million
	// accepted events).
	MaxRuntimeCost = MaxCost

	// EstimatedMaxEvents is the number of events a stage is assumed to
	// hold when estimating the cost of events().
	EstimatedMaxEvents = 10_000

	// EstimatedMaxString is the length assumed for strings read from events.
	EstimatedMaxString = 1024

	// EstimatedMaxContainer is the number of entries assumed for lists and
	// maps read from events.
	EstimatedMaxContainer = 1024

	// MaxSourceLen is the longest accepted expression source, in code points.
	MaxSourceLen = 16 * 1024
)

// Overload ids of the functions this package adds to CEL.
const (
	overloadEvents = "cep_events_string"
	overloadSum    = "cep_sum_list"
	overloadAvg    = "cep_avg_list"
	overloadMin    = "cep_min_list"
	overloadMax    = "cep_max_list"
	overloadFirst  = "cep_first_list"
	overloadLast   = "cep_last_list"
)

// Ctx gives a condition access to the events already accepted by the stages
// of the current partial match (Flink's ctx.getEventsForPattern).
type Ctx interface {
	EventsFor(stage string) []Event
}

// Compiler compiles CEL sources against one shared environment. It is safe
// for concurrent use.
type Compiler struct {
	env        *cel.Env
	noFastPath bool
}

// Option configures a Compiler.
type Option func(*Compiler)

// WithoutFastPath makes every compiled expression use the general CEL
// evaluator. It exists for tests and benchmarks.
func WithoutFastPath() Option {
	return func(c *Compiler) { c.noFastPath = true }
}

// NewCompiler builds the CEL environment: variable e (the current event),
// events(stage), sum/avg/min/max/first/last over lists, the string
// extensions, timestamps and durations, and cross-type numeric comparison.
func NewCompiler(opts ...Option) (*Compiler, error) {
	listDyn := cel.ListType(cel.DynType)
	env, err := cel.NewEnv(
		cel.Variable("e", cel.MapType(cel.StringType, cel.DynType)),
		cel.CrossTypeNumericComparisons(true),
		cel.DefaultUTCTimeZone(true),
		cel.ParserExpressionSizeLimit(MaxSourceLen),
		cel.RegexProgramSizeLimit(MaxRegexProgramSize),
		ext.Strings(),
		cel.Function("events",
			cel.Overload(overloadEvents, []*cel.Type{cel.StringType}, listDyn, cel.LateFunctionBinding())),
		cel.Function("sum",
			cel.Overload(overloadSum, []*cel.Type{listDyn}, cel.DynType, cel.UnaryBinding(listSum))),
		cel.Function("avg",
			cel.Overload(overloadAvg, []*cel.Type{listDyn}, cel.DynType, cel.UnaryBinding(listAvg))),
		cel.Function("min",
			cel.Overload(overloadMin, []*cel.Type{listDyn}, cel.DynType, cel.UnaryBinding(listMin))),
		cel.Function("max",
			cel.Overload(overloadMax, []*cel.Type{listDyn}, cel.DynType, cel.UnaryBinding(listMax))),
		cel.Function("first",
			cel.Overload(overloadFirst, []*cel.Type{listDyn}, cel.DynType, cel.UnaryBinding(listFirst))),
		cel.Function("last",
			cel.Overload(overloadLast, []*cel.Type{listDyn}, cel.DynType, cel.UnaryBinding(listLast))),
	)
	if err != nil {
		return nil, fmt.Errorf("expr: build CEL environment: %s", oneLine(err.Error()))
	}
	c := &Compiler{env: env}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// program is the part shared by Condition and Value.
type program struct {
	src        string
	prg        cel.Program
	usesEvents bool
	refs       []StageRef // the events() calls, in source order
	fields     []FieldRef // the reads of e's fields, in source order
}

// compile parses, checks, estimates and plans src.
func (c *Compiler) compile(src string) (p *program, a *cel.Ast, err error) {
	defer func() {
		// cel-go is not expected to panic; make sure a bad source can
		// never take the engine down if it does.
		if r := recover(); r != nil {
			p, a, err = nil, nil, fmt.Errorf("expr: internal error compiling expression: %v", r)
		}
	}()
	if n := len([]rune(src)); n > MaxSourceLen {
		return nil, nil, fmt.Errorf("expression is %d characters long, over the limit MaxSourceLen = %d (see docs/limits.md)", n, MaxSourceLen)
	}
	if strings.TrimSpace(src) == "" {
		return nil, nil, errors.New("expression is empty")
	}
	checked, iss := c.env.Compile(src)
	if iss != nil && iss.Err() != nil {
		return nil, nil, issuesError(src, iss)
	}
	if dynamicRegex(checked.NativeRep().Expr()) {
		return nil, nil, errors.New("matches() takes its regex as a string literal: a regex read from events would be compiled at every event, at a cost no limit sees in advance (see docs/limits.md)")
	}
	est, err := c.env.EstimateCost(checked, estimator{})
	if err != nil {
		return nil, nil, fmt.Errorf("estimate cost: %s", oneLine(err.Error()))
	}
	if est.Max > MaxCost {
		return nil, nil, fmt.Errorf("expression cost estimate %s is over the limit MaxCost = %d (see docs/limits.md; assuming up to %d events per stage, strings of %d bytes and containers of %d entries)",
			costString(est.Max), MaxCost, EstimatedMaxEvents, EstimatedMaxString, EstimatedMaxContainer)
	}
	prg, err := c.env.Program(checked,
		cel.CostLimit(MaxRuntimeCost),
		cel.CostTrackerOptions(
			cost.OverloadTracker(overloadSum, trackListSize),
			cost.OverloadTracker(overloadAvg, trackListSize),
			cost.OverloadTracker(overloadMin, trackListSize),
			cost.OverloadTracker(overloadMax, trackListSize),
			cost.OverloadTracker(regexOverloads[0], trackMatches),
			cost.OverloadTracker(regexOverloads[1], trackMatches),
		),
		cel.OptimizeRegex(matchesOnce),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("plan expression: %s", oneLine(err.Error()))
	}
	return &program{
		src:        src,
		prg:        prg,
		usesEvents: callsFunction(checked.NativeRep().Expr(), "events"),
		refs:       stageRefs(checked.NativeRep()),
		fields:     fieldRefs(checked.NativeRep()),
	}, checked, nil
}

func costString(c uint64) string {
	if c == ^uint64(0) {
		return "unbounded"
	}
	return fmt.Sprint(c)
}

// issuesError condenses cel-go's issue report, which gives each problem a
// line of its own followed by a source snippet and a caret line, into one
// line that quotes the expression (a pattern has many; cel-go calls each
// "<input>"): "e.a ==" at line:column: message; at line:column: ...
func issuesError(src string, iss *cel.Issues) error {
	errs := iss.Errors()
	if len(errs) == 0 {
		return errors.New(oneLine(iss.String()))
	}
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		if e.Location == nil || e.Location.Line() < 1 {
			parts = append(parts, escapeControls(e.Message))
			continue
		}
		parts = append(parts, fmt.Sprintf("at %d:%d: %s",
			e.Location.Line(), e.Location.Column()+1, escapeControls(e.Message)))
	}
	return fmt.Errorf("%s %s", quoteSource(src), strings.Join(parts, "; "))
}

// quoteSource quotes an expression for an error, on one line, its first
// maxQuoted characters of a long one.
func quoteSource(src string) string {
	const maxQuoted = 80
	if r := []rune(src); len(r) > maxQuoted {
		return strconv.Quote(string(r[:maxQuoted])) + "…"
	}
	return strconv.Quote(src)
}

// escapeControls writes line breaks and other control characters in s as
// escapes, so that s fits on one line.
func escapeControls(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var sb strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			sb.WriteString(q[1 : len(q)-1])
			continue
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

// callsFunction reports whether e contains a global call of fn.
func callsFunction(e celast.Expr, fn string) bool {
	found := false
	visit(e, func(x celast.Expr) {
		if x.Kind() == celast.CallKind && x.AsCall().FunctionName() == fn && !x.AsCall().IsMemberFunction() {
			found = true
		}
	})
	return found
}

// dynamicRegex reports whether e calls matches() with a regex that is
// not a string literal.
func dynamicRegex(e celast.Expr) bool {
	found := false
	visit(e, func(x celast.Expr) {
		if x.Kind() != celast.CallKind || x.AsCall().FunctionName() != "matches" {
			return
		}
		call := x.AsCall()
		i := 1
		if call.IsMemberFunction() {
			i = 0
		}
		if args := call.Args(); len(args) > i && args[i].Kind() != celast.LiteralKind {
			found = true
		}
	})
	return found
}

func visit(e celast.Expr, f func(celast.Expr)) {
	if e == nil {
		return
	}
	f(e)
	switch e.Kind() {
	case celast.CallKind:
		call := e.AsCall()
		if call.IsMemberFunction() {
			visit(call.Target(), f)
		}
		for _, a := range call.Args() {
			visit(a, f)
		}
	case celast.ComprehensionKind:
		comp := e.AsComprehension()
		visit(comp.IterRange(), f)
		visit(comp.AccuInit(), f)
		visit(comp.LoopCondition(), f)
		visit(comp.LoopStep(), f)
		visit(comp.Result(), f)
	case celast.ListKind:
		for _, x := range e.AsList().Elements() {
			visit(x, f)
		}
	case celast.MapKind:
		for _, entry := range e.AsMap().Entries() {
			if entry.Kind() == celast.MapEntryKind {
				visit(entry.AsMapEntry().Key(), f)
				visit(entry.AsMapEntry().Value(), f)
			}
		}
	case celast.SelectKind:
		visit(e.AsSelect().Operand(), f)
	case celast.StructKind:
		for _, field := range e.AsStruct().Fields() {
			if field.Kind() == celast.StructFieldKind {
				visit(field.AsStructField().Value(), f)
			}
		}
	}
}

// eval runs the general CEL program.
func (p *program) eval(e Event, ctx Ctx) (ref.Val, error) {
	var act interpreter.Activation
	if p.usesEvents {
		fa := &fnActivation{activation: activation{e: e}, ctx: ctx}
		fa.events = fa.callEvents
		act = fa
	} else {
		act = &activation{e: e}
	}
	out, _, err := p.prg.Eval(act)
	if err != nil {
		return nil, errors.New(escapeControls(err.Error()))
	}
	return out, nil
}

// activation binds the variable e for one evaluation.
type activation struct {
	e Event
}

func (a *activation) ResolveName(name string) (any, bool) {
	if name == "e" {
		return a.e, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// fnActivation also binds the late-bound events() function to ctx, so one
// compiled program can be evaluated against different contexts, one after
// another or concurrently.
type fnActivation struct {
	activation
	ctx    Ctx
	events functions.LateBoundOp
}

func (a *fnActivation) ResolveFunction(name string) (functions.LateBoundOp, bool) {
	if name == "events" {
		return a.events, true
	}
	return nil, false
}

var emptyList = types.NewRefValList(types.DefaultTypeAdapter, nil)

func (a *fnActivation) callEvents(_ string, args ...ref.Val) ref.Val {
	if len(args) != 1 {
		return types.NewErr("events() takes one argument")
	}
	stage, ok := args[0].(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(args[0])
	}
	if a.ctx == nil {
		return emptyList
	}
	evs := a.ctx.EventsFor(string(stage))
	if len(evs) == 0 {
		return emptyList
	}
	return types.NewDynamicList(types.DefaultTypeAdapter, evs)
}

// Condition is a compiled boolean expression. It is safe for concurrent use.
type Condition struct {
	p    *program
	fast fastBool
	// guard is the conjunction of the top-level conjuncts that do not call
	// events(), when the condition has both kinds; see Guard.
	guard *Condition
	// eq is set when the whole condition is e.PATH == "lit" (or !=); see
	// FieldKey
	eq *fieldEq
}

// Condition compiles src, which must type-check to bool or dyn.
func (c *Compiler) Condition(src string) (*Condition, error) {
	p, checked, err := c.compile(src)
	if err != nil {
		return nil, err
	}
	out := checked.OutputType()
	if !out.IsExactType(types.BoolType) && !isDyn(out) {
		return nil, fmt.Errorf("condition must be a bool expression, but it has type %s", cel.FormatCELType(out))
	}
	cond := &Condition{p: p}
	if !c.noFastPath {
		cond.fast = compileFastBool(checked.NativeRep().Expr())
		if cond.fast != nil {
			cond.eq = fieldEquality(checked.NativeRep().Expr())
		}
	}
	if p.usesEvents {
		cond.guard = c.guard(checked)
	}
	return cond, nil
}

// guard compiles the top-level conjuncts of a condition that do not call
// events() into one condition, or returns nil when there are none (or they
// cannot be printed back as source). CEL's && is false as soon as any
// operand is false, whatever the others yield (errors included), so a
// guard evaluating to false without error decides the whole condition:
// the engine evaluates it once per event, and the general program only for
// the partial matches of events that pass it.
func (c *Compiler) guard(checked *cel.Ast) *Condition {
	rep := checked.NativeRep()
	var parts []string
	var walk func(e celast.Expr) bool
	walk = func(e celast.Expr) bool {
		if e.Kind() == celast.CallKind && e.AsCall().FunctionName() == operators.LogicalAnd && !e.AsCall().IsMemberFunction() {
			for _, a := range e.AsCall().Args() {
				if !walk(a) {
					return false
				}
			}
			return true
		}
		if callsFunction(e, "events") {
			return true
		}
		s, err := parser.Unparse(e, rep.SourceInfo())
		if err != nil {
			return false
		}
		parts = append(parts, "("+s+")")
		return true
	}
	if !walk(rep.Expr()) || len(parts) == 0 {
		return nil
	}
	g, err := c.Condition(strings.Join(parts, " && "))
	if err != nil || g.p.usesEvents {
		return nil
	}
	return g
}

// Guard returns the part of the condition that depends on the event alone
// (the conjunction of its top-level conjuncts without events()), or nil.
// When Guard().Eval(e, nil) yields false without error, Eval(e, ctx) yields
// false for every ctx, so a caller may skip it; otherwise the caller must
// evaluate the whole condition.
func (c *Condition) Guard() *Condition { return c.guard }

func isDyn(t *cel.Type) bool {
	return t.Kind() == types.DynKind || t.Kind() == types.AnyKind
}

// Eval evaluates the condition for event e. ctx may be nil when the
// condition does not call events(); events() then yields an empty list. An
// evaluation error (a missing field, a type mismatch, a non-bool result, the
// runtime cost limit) is returned as err, and the result is then false.
func (c *Condition) Eval(e Event, ctx Ctx) (bool, error) {
	if c.fast != nil {
		v, err := c.fast(e, ctx)
		if err != errFallback {
			return v, err
		}
	}
	out, err := c.p.eval(e, ctx)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("condition yielded %s, not bool", out.Type().TypeName())
	}
	return bool(b), nil
}

// FieldKey identifies the field a condition e.PATH == "lit" (or !=, with
// a string literal) tests; ok is false for any other condition. Conditions
// with the same key read the same value: a caller evaluating several of
// them for one event may read it once (ReadField) and decide each with
// TestField.
func (c *Condition) FieldKey() (key string, ok bool) {
	if c.eq == nil {
		return "", false
	}
	return c.eq.key, true
}

// ReadField reads the field a FieldKey condition tests.
func (c *Condition) ReadField(e Event) (any, error) { return c.eq.p.get(e) }

// TestField decides a FieldKey condition from what ReadField returned, as
// Eval would; decided is false when only Eval can (a value the fast path
// does not model).
func (c *Condition) TestField(x any, err error) (v, decided bool, _ error) {
	if err == errFallback {
		return false, false, nil
	}
	if err != nil {
		return false, true, err
	}
	v, err = stringEquals(x, c.eq.lit, c.eq.want)
	return v, err == nil, nil
}

// UsesEvents reports whether the expression calls events().
func (c *Condition) UsesEvents() bool { return c.p.usesEvents }

// Source returns the expression source.
func (c *Condition) Source() string { return c.p.src }

// FastPath reports whether the condition is evaluated by the compiled Go fast
// path rather than the general CEL interpreter.
func (c *Condition) FastPath() bool { return c.fast != nil }

// Value is a compiled expression of any result type. It is safe for
// concurrent use.
type Value struct {
	p    *program
	path []string // non-nil when the expression is a plain e.a.b field path
	// evPath is non-nil when the expression is events("S")[N].a.b (an
	// emit field reading a matched event): stage evStage, index evIndex
	evPath  []string
	evStage string
	evIndex int
}

// Value compiles src, which may have any type.
func (c *Compiler) Value(src string) (*Value, error) {
	p, checked, err := c.compile(src)
	if err != nil {
		return nil, err
	}
	v := &Value{p: p}
	if !c.noFastPath {
		x := checked.NativeRep().Expr()
		if path, ok := fieldPath(x); ok {
			v.path = path
		}
		v.evStage, v.evIndex, v.evPath = eventsFieldPath(x)
	}
	return v, nil
}

// Eval evaluates the expression for event e and returns a native Go value:
// string, int64, uint64, float64, bool, nil (null), []byte, []any,
// map[string]any, time.Time or time.Duration. Lists and maps are fresh
// copies except when the expression is a plain field path, where scalars are
// returned directly from e.
func (v *Value) Eval(e Event, ctx Ctx) (any, error) {
	if v.path != nil {
		if x, ok := lookupScalar(e, v.path); ok {
			return x, nil
		}
	}
	if v.evPath != nil && ctx != nil {
		if evs := ctx.EventsFor(v.evStage); v.evIndex < len(evs) {
			if x, ok := lookupScalar(evs[v.evIndex], v.evPath); ok {
				return x, nil
			}
		}
	}
	out, err := v.p.eval(e, ctx)
	if err != nil {
		return nil, err
	}
	return toNative(out)
}

// UsesEvents reports whether the expression calls events().
func (v *Value) UsesEvents() bool { return v.p.usesEvents }

// Source returns the expression source.
func (v *Value) Source() string { return v.p.src }
