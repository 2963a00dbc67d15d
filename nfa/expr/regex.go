package expr

import (
	"regexp"
	"sync"

	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// Limits on matches(). Go's regexp runs in time linear in the string, but
// the factor is the size of the regex's compiled program: a bounded
// repetition such as [a-z]{0,1000} is spelt out a thousand times.
const (
	// MaxRegexProgramSize bounds the compiled program of a regex
	// (cel-go's regex program size: its instructions). A constant regex
	// over it is refused when the expression is compiled, one read from
	// an event when it is evaluated.
	MaxRegexProgramSize = 2000

	// MaxRegexWork bounds one match of a constant regex: the string's
	// length in bytes times the regex's program size. A longer string
	// makes the evaluation fail before it is scanned (about 0.2 s of
	// scanning at the bound).
	MaxRegexWork = 64 << 20

	// regexCostDivisor turns a match's work (length × program size) into
	// cost units, for MaxRuntimeCost: a unit is about ten of its steps.
	regexCostDivisor = 8
)

// matchesOnce compiles a constant regex of matches() once, when the
// program is planned (cel-go would compile it at every evaluation: a
// 16 KB regex cost seconds per event), and refuses a string whose scan
// would be over MaxRegexWork before scanning it.
var matchesOnce = &interpreter.RegexOptimization{
	Function:   "matches",
	RegexIndex: 1,
	Factory: func(call interpreter.InterpretableCall, pattern string) (interpreter.InterpretableCall, error) {
		size, err := types.RegexProgramSize(pattern)
		if err != nil {
			return nil, err
		}
		re, err := regexp.Compile(pattern)
		if err != nil {
			return nil, err
		}
		return interpreter.NewCall(call.ID(), call.Function(), call.OverloadID(), call.Args(), func(values ...ref.Val) ref.Val {
			if len(values) != 2 {
				return types.NoSuchOverloadErr()
			}
			in, ok := values[0].Value().(string)
			if !ok {
				return types.NoSuchOverloadErr()
			}
			if work := len(in) * size; work > MaxRegexWork {
				return types.NewErr("matches: a string of %d bytes against a regex of program size %d is over the limit MaxRegexWork = %d (length × program size; see docs/limits.md)", len(in), size, MaxRegexWork)
			}
			return types.Bool(re.MatchString(in))
		}), nil
	},
}

// regexSizes caches the program sizes of the regexes trackMatches has
// seen, bounded: a regex read from events may differ at every event.
var regexSizes = struct {
	sync.Mutex
	m map[string]int
}{m: map[string]int{}}

const regexSizesMax = 1024

func regexSize(pattern string) int {
	regexSizes.Lock()
	size, ok := regexSizes.m[pattern]
	regexSizes.Unlock()
	if ok {
		return size
	}
	size, err := types.RegexProgramSize(pattern)
	if err != nil {
		size = 1
	}
	regexSizes.Lock()
	if len(regexSizes.m) < regexSizesMax {
		regexSizes.m[pattern] = size
	}
	regexSizes.Unlock()
	return size
}

// trackMatches charges a match its work: the string's length times the
// regex's program size (cel-go charges the regex's length in characters,
// which [a-z]{0,1000}x makes 14 where its program has about 2,000
// instructions), so that MaxRuntimeCost bounds regexes read from events
// too.
func trackMatches(args []ref.Val, result ref.Val) *uint64 {
	c := uint64(1)
	if types.IsError(result) {
		return &c // refused without a scan (MaxRegexWork), or no match done
	}
	if len(args) == 2 {
		in, ok1 := args[0].Value().(string)
		pattern, ok2 := args[1].Value().(string)
		if ok1 && ok2 {
			c += uint64(len(in)) * uint64(regexSize(pattern)) / regexCostDivisor
		}
	}
	return &c
}

// regexOverloads are the overloads of matches() trackMatches prices.
var regexOverloads = []string{overloads.Matches, overloads.MatchesString}
