package nfa

import (
	"github.com/cepcluster/cep/nfa/expr"
)

// cond is a transition condition: a tree over compiled CEL leaves, mirroring
// Flink's RichAndCondition / RichNotCondition / BooleanConditions.trueFunction.
type cond struct {
	op   condOp
	leaf int // index into Pattern.leaves when op == cLeaf
	x, y *cond
}

type condOp uint8

const (
	cTrue condOp = iota
	cLeaf
	cNot
	cAnd
)

var condTrueV = &cond{op: cTrue}

func condNot(c *cond) *cond    { return &cond{op: cNot, x: c} }
func condAnd(a, b *cond) *cond { return &cond{op: cAnd, x: a, y: b} }

// predicate is a compiled condition: a CEL expression, or a
// MATCH_RECOGNIZE DEFINE clause.
type predicate interface {
	Eval(e expr.Event, ctx *evalCtx) (bool, error)
	// UsesContext reports whether the result depends on the partial match
	// (otherwise it depends on the event alone and is cached per event).
	UsesContext() bool
}

type celPredicate struct{ c *expr.Condition }

func (p celPredicate) Eval(e expr.Event, ctx *evalCtx) (bool, error) { return p.c.Eval(e, ctx) }
func (p celPredicate) UsesContext() bool                             { return p.c.UsesEvents() }

// leafInfo is one compiled condition shared by every transition using it.
type leafInfo struct {
	src        string
	prog       predicate
	usesEvents bool
	// cel is the CEL condition (nil for a custom predicate); field, when
	// not -1, is the matcher's slot for the field it compares with a
	// string (expr.Condition.FieldKey), shared by the conditions on it
	cel   *expr.Condition
	field int
	// column, for a MATCH_RECOGNIZE DEFINE comparing a column with a
	// string, is that predicate: field is then the column's slot
	column *definePredicate
	// guard, for a condition calling events(), is its part that depends on
	// the event alone (expr.Condition.Guard): evaluated once per event, and
	// when it is false the condition is false for every partial match.
	// guardField is its field slot when it is such a comparison, or -1.
	guard      *expr.Condition
	guardField int
}

type condCompiler struct {
	c      *expr.Compiler
	leaves []leafInfo
	bySrc  map[string]int
	fields map[string]int // FieldKey -> slot
}

// custom adds a predicate that is not CEL (MATCH_RECOGNIZE).
func (cc *condCompiler) custom(name string, p predicate) *cond {
	i := len(cc.leaves)
	l := leafInfo{src: name, prog: p, usesEvents: p.UsesContext(), field: -1, guardField: -1}
	if d, ok := p.(*definePredicate); ok && d.eq {
		// DEFINE A AS col = 'lit': the column is read once per event for
		// every such condition on it, as a pattern document's fields are
		l.column, l.field = d, cc.slot("sql column\x00"+d.eqCol)
	}
	cc.leaves = append(cc.leaves, l)
	return &cond{op: cLeaf, leaf: i}
}

func (cc *condCompiler) leaf(src string) (*cond, error) {
	if i, ok := cc.bySrc[src]; ok {
		return &cond{op: cLeaf, leaf: i}, nil
	}
	prog, err := cc.c.Condition(src)
	if err != nil {
		return nil, err
	}
	i := len(cc.leaves)
	guard := prog.Guard()
	cc.leaves = append(cc.leaves, leafInfo{src: src, prog: celPredicate{prog}, usesEvents: prog.UsesEvents(),
		guard: guard, guardField: cc.fieldSlot(guard), cel: prog, field: cc.fieldSlot(prog)})
	if cc.bySrc == nil {
		cc.bySrc = map[string]int{}
	}
	cc.bySrc[src] = i
	return &cond{op: cLeaf, leaf: i}, nil
}

// fieldSlot returns the field slot of a condition comparing a field with
// a string (expr.Condition.FieldKey), shared by every such condition on the
// field, or -1.
func (cc *condCompiler) fieldSlot(c *expr.Condition) int {
	if c == nil {
		return -1
	}
	key, ok := c.FieldKey()
	if !ok {
		return -1
	}
	return cc.slot(key)
}

// slot returns the field slot for key, shared by every condition on it.
func (cc *condCompiler) slot(key string) int {
	if cc.fields == nil {
		cc.fields = map[string]int{}
	}
	f, seen := cc.fields[key]
	if !seen {
		f = len(cc.fields)
		cc.fields[key] = f
	}
	return f
}

// fieldSlots is the number of distinct fields the pattern's conditions
// compare with a string (leafInfo.field).
func (p *Pattern) fieldSlots() int {
	n := 0
	for _, l := range p.leaves {
		n = max(n, l.field+1, l.guardField+1)
	}
	return n
}
