package expr

import (
	"fmt"
	"math"
	"strings"
	"time"

	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// numeric kinds used by the list aggregates.
const (
	numInt = iota
	numUint
	numDouble
)

func asLister(fn string, v ref.Val) (traits.Lister, int, ref.Val) {
	l, ok := v.(traits.Lister)
	if !ok {
		return nil, 0, types.MaybeNoSuchOverloadErr(v)
	}
	n, ok := l.Size().(types.Int)
	if !ok {
		return nil, 0, types.NewErr("%s: list has no size", fn)
	}
	return l, int(n), nil
}

func numberAt(fn string, l traits.Lister, i int) (ref.Val, int, ref.Val) {
	x := l.Get(types.Int(i))
	switch x.(type) {
	case types.Int:
		return x, numInt, nil
	case types.Uint:
		return x, numUint, nil
	case types.Double:
		return x, numDouble, nil
	case *types.Err:
		return nil, 0, x
	default:
		return nil, 0, types.NewErr("%s: element %d is %s, not a number", fn, i, x.Type().TypeName())
	}
}

func toFloat(x ref.Val) float64 {
	switch t := x.(type) {
	case types.Int:
		return float64(t)
	case types.Uint:
		return float64(t)
	case types.Double:
		return float64(t)
	}
	return math.NaN()
}

// listSum sums a list of numbers: all ints (or ints and uints) give an int,
// all uints a uint, any double a double; the empty list gives 0.
func listSum(v ref.Val) ref.Val {
	l, n, errv := asLister("sum", v)
	if errv != nil {
		return errv
	}
	var (
		hasDouble, hasInt bool
		f                 float64
		i                 int64
		u                 uint64
		iOverflow         bool
		uOverflow         bool
	)
	for k := 0; k < n; k++ {
		x, kind, errv := numberAt("sum", l, k)
		if errv != nil {
			return errv
		}
		f += toFloat(x)
		switch kind {
		case numDouble:
			hasDouble = true
		case numInt:
			hasInt = true
			xi := int64(x.(types.Int))
			s := i + xi
			if (xi > 0 && s < i) || (xi < 0 && s > i) {
				iOverflow = true
			}
			i = s
		case numUint:
			xu := uint64(x.(types.Uint))
			if xu > math.MaxInt64 {
				iOverflow = true
			} else {
				s := i + int64(xu)
				if s < i {
					iOverflow = true
				}
				i = s
			}
			s := u + xu
			if s < u {
				uOverflow = true
			}
			u = s
		}
	}
	switch {
	case hasDouble:
		return types.Double(f)
	case n == 0:
		return types.IntZero
	case hasInt:
		if iOverflow {
			return types.NewErr("sum: integer overflow")
		}
		return types.Int(i)
	default:
		if uOverflow {
			return types.NewErr("sum: unsigned integer overflow")
		}
		return types.Uint(u)
	}
}

// listAvg averages a list of numbers as a double; the empty list gives null.
func listAvg(v ref.Val) ref.Val {
	l, n, errv := asLister("avg", v)
	if errv != nil {
		return errv
	}
	if n == 0 {
		return types.NullValue
	}
	var f float64
	for k := 0; k < n; k++ {
		x, _, errv := numberAt("avg", l, k)
		if errv != nil {
			return errv
		}
		f += toFloat(x)
	}
	return types.Double(f / float64(n))
}

func listMin(v ref.Val) ref.Val { return listExtreme("min", v, types.IntNegOne) }
func listMax(v ref.Val) ref.Val { return listExtreme("max", v, types.IntOne) }

// listExtreme returns the least (want -1) or greatest (want 1) number of a
// list, comparing ints, uints and doubles numerically and returning the
// element itself; the empty list gives null. Ties keep the first element.
func listExtreme(fn string, v ref.Val, want types.Int) ref.Val {
	l, n, errv := asLister(fn, v)
	if errv != nil {
		return errv
	}
	if n == 0 {
		return types.NullValue
	}
	best, _, errv := numberAt(fn, l, 0)
	if errv != nil {
		return errv
	}
	for k := 1; k < n; k++ {
		x, _, errv := numberAt(fn, l, k)
		if errv != nil {
			return errv
		}
		c := x.(traits.Comparer).Compare(best)
		if types.IsError(c) {
			return c
		}
		if c == want {
			best = x
		}
	}
	return best
}

// listFirst returns the first element, or null for an empty list.
func listFirst(v ref.Val) ref.Val {
	l, n, errv := asLister("first", v)
	if errv != nil {
		return errv
	}
	if n == 0 {
		return types.NullValue
	}
	return l.Get(types.IntZero)
}

// listLast returns the last element, or null for an empty list.
func listLast(v ref.Val) ref.Val {
	l, n, errv := asLister("last", v)
	if errv != nil {
		return errv
	}
	if n == 0 {
		return types.NullValue
	}
	return l.Get(types.Int(n - 1))
}

// trackListSize charges one unit per element of the list argument.
func trackListSize(args []ref.Val, _ ref.Val) *uint64 {
	c := uint64(1)
	if len(args) == 1 {
		if s, ok := args[0].(traits.Sizer); ok {
			if n, ok := s.Size().(types.Int); ok && n > 0 {
				c = uint64(n)
			}
		}
	}
	return &c
}

// estimator supplies the sizes assumed for data read from events and the
// costs of this package's functions to cel-go's static cost estimator.
type estimator struct{}

func (estimator) EstimateSize(node cost.AstNode) *cost.SizeEstimate {
	if p := node.Path(); len(p) > 0 {
		// A field path from a variable: e.a.b. Element hints (e.a.@items)
		// are left to the expression-based rule below, so the sizing
		// strategy does not probe ever deeper hint paths.
		for _, s := range p {
			if strings.HasPrefix(s, "@") {
				return nil
			}
		}
		return &dataSize
	}
	// Data read through a comprehension variable or a function result
	// (x.a in events("s").all(x, ...), first(events("s")).a, l[0]).
	if x := node.Expr(); x != nil {
		switch x.Kind() {
		case celast.IdentKind, celast.SelectKind:
			return &dataSize
		case celast.CallKind:
			if x.AsCall().FunctionName() == operators.Index || x.AsCall().FunctionName() == operators.OptIndex {
				return &dataSize
			}
		}
	}
	return nil
}

// dataSize is the size assumed for a string, list or map read from an
// event, with the same assumption for the keys and elements of containers
// nested up to dataSizeDepth levels (deeper ones are unknown, so iterating
// them is rejected as unbounded).
var dataSize = nestedDataSize(dataSizeDepth)

const dataSizeDepth = 4

func nestedDataSize(depth int) cost.SizeEstimate {
	sz := cost.RangedSizeEstimate(0, max(EstimatedMaxString, EstimatedMaxContainer))
	if depth > 0 {
		inner := nestedDataSize(depth - 1)
		sz.Key = &inner
		sz.Elem = &inner
	}
	return sz
}

func (estimator) EstimateCallCost(function, overloadID string, target *cost.AstNode, args []cost.AstNode) *cost.CallEstimate {
	switch overloadID {
	case overloadEvents:
		elem := cost.RangedSizeEstimate(0, EstimatedMaxContainer)
		list := cost.ListSizeEstimate(cost.RangedSizeEstimate(0, EstimatedMaxEvents), elem)
		return cost.NewCallEstimate(cost.FixedCostEstimate(1), &list)
	case overloadSum, overloadAvg, overloadMin, overloadMax:
		sz := listArgSize(args)
		one := cost.FixedSizeEstimate(1)
		return cost.NewCallEstimate(cost.Estimate{Min: 1, Max: max(sz.Max, 1)}, &one)
	case overloadFirst, overloadLast:
		sz := listArgSize(args)
		var res *cost.SizeEstimate
		if sz.Elem != nil {
			e := *sz.Elem
			res = &e
		}
		return cost.NewCallEstimate(cost.FixedCostEstimate(1), res)
	}
	return nil
}

func listArgSize(args []cost.AstNode) cost.SizeEstimate {
	if len(args) == 1 {
		if sz := args[0].ComputedSize(); sz != nil {
			return *sz
		}
	}
	return cost.RangedSizeEstimate(0, EstimatedMaxEvents)
}

// toNative converts a CEL result into a plain Go value.
func toNative(v ref.Val) (any, error) {
	return toNativeDepth(v, 0)
}

const maxNativeDepth = 100

func toNativeDepth(v ref.Val, depth int) (any, error) {
	if depth > maxNativeDepth {
		return nil, fmt.Errorf("result is nested deeper than %d levels", maxNativeDepth)
	}
	switch t := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(t), nil
	case types.Int:
		return int64(t), nil
	case types.Uint:
		return uint64(t), nil
	case types.Double:
		return float64(t), nil
	case types.String:
		return string(t), nil
	case types.Bytes:
		return []byte(t), nil
	case types.Timestamp:
		return t.Time, nil
	case types.Duration:
		return time.Duration(t.Duration), nil
	case *types.Err:
		return nil, t
	case traits.Lister:
		n, ok := t.Size().(types.Int)
		if !ok {
			return nil, fmt.Errorf("result list has no size")
		}
		out := make([]any, int(n))
		for i := range out {
			x, err := toNativeDepth(t.Get(types.Int(i)), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case traits.Mapper:
		out := make(map[string]any)
		it := t.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			kn, err := toNativeDepth(k, depth+1)
			if err != nil {
				return nil, err
			}
			ks, err := KeyString(kn)
			if err != nil {
				return nil, fmt.Errorf("result map key: %v", err)
			}
			x, err := toNativeDepth(t.Get(k), depth+1)
			if err != nil {
				return nil, err
			}
			out[ks] = x
		}
		return out, nil
	default:
		return nil, fmt.Errorf("result of type %s cannot be converted to a Go value", v.Type().TypeName())
	}
}
