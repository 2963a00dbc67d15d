package nfa

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Runner drives several patterns side by side over one bounded input of JSON
// lines, the way `cepctl run` does: each line is an event object or a
// {"$watermark": T} marker. It does no IO itself; the caller reads lines and
// writes records.
type Runner struct {
	// IngestTime, when set, is the time each event line is read at
	// (milliseconds; `cepctl run`: the wall clock, or --now): an event
	// more than maxFutureSkew ahead of it is dead-lettered, as a shard
	// does against its leader's logged ingest time (Matcher.CheckTimeAt).
	// nil: not known, only the bound against the event time applies.
	IngestTime func() int64

	matchers []*Matcher
	line     int
	out      []Record
	dead     []DeadLetter
	admitted []Admitted // per matcher: Line's decisions, taken once all are made
}

// DeadLetter is an event one pattern refused, as a cluster dead-letters it
// on cep.deadletter.<source>: today a refused event time (TimeError).
type DeadLetter struct {
	Source   string          `json:"source"`
	Pattern  string          `json:"pattern,omitempty"`
	Position uint64          `json:"position"`
	Reason   string          `json:"reason"`
	Data     json.RawMessage `json:"data,omitempty"`
}

// DeadLetters returns the events the patterns refused on the last Line
// call (valid until the next call). The other patterns took them.
func (r *Runner) DeadLetters() []DeadLetter { return r.dead }

// NewRunner returns a Runner for the given patterns, in order, each
// matcher with DefaultConfig.
func NewRunner(patterns ...*Pattern) *Runner { return NewRunnerWith(DefaultConfig(), patterns...) }

// NewRunnerWith returns a Runner for the given patterns, in order, each
// matcher with cfg.
func NewRunnerWith(cfg Config, patterns ...*Pattern) *Runner {
	r := &Runner{}
	for _, p := range patterns {
		r.matchers = append(r.matchers, NewMatcherWith(p, cfg))
	}
	return r
}

// Matchers returns the runner's matchers, one per pattern.
func (r *Runner) Matchers() []*Matcher { return r.matchers }

// InputError is a bad input line.
type InputError struct {
	Line int
	Err  error
}

func (e *InputError) Error() string {
	return fmt.Sprintf("input line %d: %s", e.Line, oneLine(e.Err.Error()))
}

// Unwrap returns the reason.
func (e *InputError) Unwrap() error { return e.Err }

// ParseLine decodes one input line: an event, or a watermark marker (isWM).
func ParseLine(line []byte) (in Input, wm int64, isWM bool, err error) {
	line = bytes.TrimSpace(line)
	data, ref := DecodeInput(line, 0) // a line's bound is the reader's
	if ref != nil {
		return Input{}, 0, false, ref.Err
	}
	if v, ok := data["$watermark"]; ok {
		if len(data) != 1 {
			return Input{}, 0, false, errors.New(`a watermark line has only the "$watermark" field`)
		}
		switch t := v.(type) {
		case int64:
			return Input{}, t, true, nil
		case float64:
			if t == math.Trunc(t) && math.Abs(t) < 1<<62 {
				return Input{}, int64(t), true, nil
			}
		}
		return Input{}, 0, false, fmt.Errorf(`"$watermark" must be an integer of milliseconds, got %s`, mustJSON(v))
	}
	return Input{Data: data, Raw: append([]byte(nil), line...)}, 0, false, nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Line feeds one input line (blank lines are skipped). On error nothing was
// applied; the error names the line number. The records returned stay
// valid until the next call (Line or Finish).
func (r *Runner) Line(line []byte) ([]Record, error) {
	r.line++
	r.out = r.out[:0]
	r.dead = r.dead[:0]
	if len(bytes.TrimSpace(line)) == 0 {
		return nil, nil
	}
	in, wm, isWM, err := ParseLine(line)
	if err != nil {
		return nil, &InputError{Line: r.line, Err: err}
	}
	in.Pos = uint64(r.line)
	if isWM {
		for _, m := range r.matchers {
			r.out = append(r.out, m.Watermark(wm)...)
		}
		return r.out, nil
	}
	// every pattern admits the event first, so a bad event changes nothing
	arr := Arrival{In: in, Ingest: NoIngestTime}
	if r.IngestTime != nil {
		arr.Ingest = r.IngestTime() // once per line: every pattern decides on the same
	}
	r.admitted = r.admitted[:0]
	for _, m := range r.matchers {
		a, ref := m.Admit(&arr)
		if ref != nil && ref.Malformed() {
			// the input's fault, not the pattern's: the run stops at it
			return nil, &InputError{Line: r.line, Err: fmt.Errorf("pattern %s: %w", m.p.spec.Name, ref.Err)}
		}
		if ref != nil {
			// refused by this pattern alone, as a shard dead-letters it
			var src string
			if len(m.p.spec.Source) > 0 {
				src = m.p.spec.Source[0]
			}
			r.dead = append(r.dead, DeadLetter{Source: src, Pattern: m.p.spec.Name, Position: in.Pos, Reason: ref.Reason, Data: in.Raw})
		}
		r.admitted = append(r.admitted, a)
	}
	for i, m := range r.matchers {
		if a := &r.admitted[i]; a.Moves() {
			r.out = append(r.out, m.Take(a)...)
		}
	}
	return r.out, nil
}

// Finish ends the input (see Matcher.Finish).
func (r *Runner) Finish(final bool) []Record {
	r.out = r.out[:0]
	for _, m := range r.matchers {
		r.out = append(r.out, m.Finish(final)...)
	}
	return r.out
}
