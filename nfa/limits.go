package nfa

import (
	"fmt"

	"github.com/cepcluster/cep/nfa/expr"
)

// Limits on what a pattern may cost, checked when it is compiled, so that
// validate, deploy and `cepctl run` refuse the same documents. Each bounds
// a cost that grows with the document: without them a 2.7 MB document
// took 22 s to deploy and `A{1,19000} B` 45 s of CPU for 1,000 events. The
// values admit every example, conformance case and benchmark with room to
// spare; docs/limits.md lists them with what they cost at the limit.
const (
	// MaxDocumentBytes bounds a pattern document or MATCH_RECOGNIZE query.
	MaxDocumentBytes = 256 << 10

	// MaxQuantifier bounds the numbers of a quantifier: times n, the upper
	// bound of times [from, to], timesOrMore n, and SQL's {n}, {n,}, {n,m}.
	// Each iteration up to it is a state of its own, and a key's partial
	// matches can each hold that many events: A{1,100} B over 1,000 events
	// of one key takes about 2 s of CPU, A{1,1000} B over a minute.
	MaxQuantifier = 100

	// MaxExpandedStages bounds the stages after quantifiers are expanded:
	// a stage counts once per iteration it spells out (times [1, 50] is
	// 50, timesOrMore 3 is 4, oneOrMore 2), a group its inner stages times
	// its own count.
	MaxExpandedStages = 1000

	// MaxStates and MaxTransitions bound the compiled automaton, which
	// each key's partial matches walk.
	MaxStates      = 4 * MaxExpandedStages
	MaxTransitions = 4 * MaxStates

	// MaxEmitFields bounds the fields of emit, each a CEL program
	// evaluated once per match; MaxEmitNameBytes a field's name and
	// MaxEmitExprBytes its expression.
	MaxEmitFields    = 256
	MaxEmitNameBytes = 128
	MaxEmitExprBytes = 4096

	// MaxExpressionBytes bounds the CEL expressions of a document
	// together (key, time, where, until and emit): compiling one takes
	// some 10 to 25 µs per byte, so this keeps a deploy's compiling well under
	// about a second.
	MaxExpressionBytes = 16 << 10

	// MaxSQLPatternVars bounds the variables a MATCH_RECOGNIZE PATTERN
	// lists (each a stage).
	MaxSQLPatternVars = 256

	// MaxKeysLimit is the largest maxKeys a pattern may ask for.
	MaxKeysLimit = 100_000_000

	// MaxStateBytesLimit is the largest maxStateBytes a pattern may ask
	// for (1 TiB).
	MaxStateBytesLimit = 1 << 40
)

// LimitError is a pattern refused for going over one of the limits above
// (or expr.MaxCost and expr.MaxSourceLen). It is the Err of a
// *PatternError, which names where.
type LimitError struct {
	Limit string // the constant's name, e.g. "MaxQuantifier"
	What  string // what was measured, e.g. "times upper bound"
	Value int64
	Max   int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s is %d, over the limit %s = %d (see docs/limits.md)", e.What, e.Value, e.Limit, e.Max)
}

func overLimit(stage, field, limit, what string, value, maxv int64) *PatternError {
	return &PatternError{Stage: stage, Field: field, Err: &LimitError{Limit: limit, What: what, Value: value, Max: maxv}}
}

func checkDocumentSize(n int) error {
	if n > MaxDocumentBytes {
		return overLimit("", "", "MaxDocumentBytes", "document size in bytes", int64(n), MaxDocumentBytes)
	}
	return nil
}

// checkSpecLimits checks a spec before anything is compiled, so that the
// cost of refusing it stays proportional to its size.
func checkSpecLimits(s *Spec) error {
	if s.MaxKeys != nil && (*s.MaxKeys < 0 || *s.MaxKeys > MaxKeysLimit) {
		if *s.MaxKeys < 0 {
			return perr("", "maxKeys", "maxKeys %d is negative (leave it out for the cluster's default)", *s.MaxKeys)
		}
		return overLimit("", "maxKeys", "MaxKeysLimit", "maxKeys", int64(*s.MaxKeys), MaxKeysLimit)
	}
	if s.MaxStateBytes != nil && (*s.MaxStateBytes < 0 || *s.MaxStateBytes > MaxStateBytesLimit) {
		if *s.MaxStateBytes < 0 {
			return perr("", "maxStateBytes", "maxStateBytes %d is negative (leave it out for the cluster's default)", *s.MaxStateBytes)
		}
		return overLimit("", "maxStateBytes", "MaxStateBytesLimit", "maxStateBytes", *s.MaxStateBytes, MaxStateBytesLimit)
	}
	if n := len(s.Emit); n > MaxEmitFields {
		return overLimit("", "emit", "MaxEmitFields", "number of emit fields", int64(n), MaxEmitFields)
	}
	for _, k := range sortedKeys(s.Emit) {
		if n := len(k); n > MaxEmitNameBytes {
			return overLimit("", "emit", "MaxEmitNameBytes", fmt.Sprintf("emit field name %.32q… length in bytes", k), int64(n), MaxEmitNameBytes)
		}
		if n := len(s.Emit[k]); n > MaxEmitExprBytes {
			return overLimit("", "emit."+k, "MaxEmitExprBytes", "expression length in bytes", int64(n), MaxEmitExprBytes)
		}
	}
	if n := expressionBytes(s); n > MaxExpressionBytes {
		return overLimit("", "", "MaxExpressionBytes", "total length of the CEL expressions in bytes", n, MaxExpressionBytes)
	}
	total, err := expandedStages(s.Stages, "")
	if err != nil {
		return err
	}
	if total > MaxExpandedStages {
		return overLimit("", "stages", "MaxExpandedStages", "number of stages after expanding quantifiers", total, MaxExpandedStages)
	}
	return nil
}

func expressionBytes(s *Spec) int64 {
	n := int64(len(s.Key) + len(s.Time))
	for _, v := range s.Emit {
		n += int64(len(v))
	}
	var walk func([]Stage)
	walk = func(stages []Stage) {
		for i := range stages {
			n += int64(len(stages[i].Where) + len(stages[i].Until))
			walk(stages[i].Group)
			for _, a := range stages[i].Alts {
				walk(a)
			}
		}
	}
	walk(s.Stages)
	return n
}

// expandedStages counts stages as MaxExpandedStages does, saturating
// (nested groups multiply) and checking each quantifier on the way.
func expandedStages(stages []Stage, prefix string) (int64, error) {
	var total int64
	for i := range stages {
		st := &stages[i]
		path := prefix + st.Name
		if st.Name == "" {
			path = fmt.Sprintf("%s#%d", prefix, i+1)
		}
		n := int64(1)
		switch {
		case st.Times != nil:
			if v := max(st.Times.From, st.Times.To); v > MaxQuantifier {
				what := "times"
				if st.Times.From != st.Times.To {
					what = "times upper bound"
				}
				return 0, overLimit(path, "times", "MaxQuantifier", what, int64(v), MaxQuantifier)
			}
			n = int64(max(st.Times.To, 1))
		case st.TimesOrMore != nil:
			if v := *st.TimesOrMore; v > MaxQuantifier {
				return 0, overLimit(path, "timesOrMore", "MaxQuantifier", "timesOrMore", int64(v), MaxQuantifier)
			}
			n = int64(max(*st.TimesOrMore, 1)) + 1
		case st.OneOrMore:
			n = 2
		}
		if st.Group != nil {
			inner, err := expandedStages(st.Group, path+"/")
			if err != nil {
				return 0, err
			}
			n *= inner
		}
		for _, a := range st.Alts {
			inner, err := expandedStages(a, path+"/")
			if err != nil {
				return 0, err
			}
			n += inner
		}
		total += n
		if total > MaxExpandedStages {
			// the exact count no longer matters, only that it is over
			return total, nil
		}
	}
	return total, nil
}

// checkAutomatonLimits checks the compiled automaton's size.
func checkAutomatonLimits(states []*cstate) error {
	if n := len(states); n > MaxStates {
		return overLimit("", "stages", "MaxStates", "number of automaton states", int64(n), MaxStates)
	}
	trans := 0
	for _, st := range states {
		trans += len(st.trans)
	}
	if trans > MaxTransitions {
		return overLimit("", "stages", "MaxTransitions", "number of automaton transitions", int64(trans), MaxTransitions)
	}
	return nil
}

// Limit describes one of the limits for documentation and tests.
type Limit struct {
	Name  string
	Value int64
}

// Limits lists the limits a pattern is checked against, in the order
// docs/limits.md gives them.
func Limits() []Limit {
	return []Limit{
		{"MaxDocumentBytes", MaxDocumentBytes},
		{"MaxQuantifier", MaxQuantifier},
		{"MaxExpandedStages", MaxExpandedStages},
		{"MaxStates", MaxStates},
		{"MaxTransitions", MaxTransitions},
		{"MaxEmitFields", MaxEmitFields},
		{"MaxEmitNameBytes", MaxEmitNameBytes},
		{"MaxEmitExprBytes", MaxEmitExprBytes},
		{"MaxExpressionBytes", MaxExpressionBytes},
		{"MaxSQLPatternVars", MaxSQLPatternVars},
		{"MaxCost", expr.MaxCost},
		{"MaxSourceLen", expr.MaxSourceLen},
		{"MaxKeysLimit", MaxKeysLimit},
		{"MaxStateBytesLimit", MaxStateBytesLimit},
	}
}
