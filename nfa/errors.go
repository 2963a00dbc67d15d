package nfa

import (
	"fmt"
)

// PatternError reports a pattern that cannot be compiled. It names the stage
// (as a path for stages inside groups, e.g. "group1/middle") and the field, so
// that its one-line message tells a person where to look. It follows the rules
// of Flink's MalformedPatternException.
type PatternError struct {
	Pattern string // pattern name, may be empty
	Stage   string // stage path, empty for document-level fields
	Field   string // field name, empty when the whole stage is wrong
	Err     error
}

func (e *PatternError) Error() string {
	s := "pattern"
	if e.Pattern != "" {
		s += fmt.Sprintf(" %q", e.Pattern)
	}
	if e.Stage != "" {
		s += fmt.Sprintf(": stage %q", e.Stage)
	}
	if e.Field != "" {
		s += fmt.Sprintf(": field %q", e.Field)
	}
	return s + ": " + oneLine(e.Err.Error())
}

// Unwrap returns the underlying reason.
func (e *PatternError) Unwrap() error { return e.Err }

func perr(stage, field, format string, args ...any) *PatternError {
	return &PatternError{Stage: stage, Field: field, Err: fmt.Errorf(format, args...)}
}
