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

// leafInfo is one compiled CEL condition shared by every transition using it.
type leafInfo struct {
	src        string
	prog       *expr.Condition
	usesEvents bool
}

type condCompiler struct {
	c      *expr.Compiler
	leaves []leafInfo
	bySrc  map[string]int
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
	cc.leaves = append(cc.leaves, leafInfo{src: src, prog: prog, usesEvents: prog.UsesEvents()})
	if cc.bySrc == nil {
		cc.bySrc = map[string]int{}
	}
	cc.bySrc[src] = i
	return &cond{op: cLeaf, leaf: i}, nil
}
