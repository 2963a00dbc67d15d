package nfa

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/cepcluster/cep/watermark"
)

// TraceWriter writes trace entries for a person (text: one block per
// event, its lines aligned) or for tools (JSON lines). Its Trace method
// is a Tracer; Flush writes what is buffered (the last block).
type TraceWriter struct {
	w    io.Writer
	json bool
	// ShowPattern names the pattern in each block's header (several
	// patterns traced into one writer).
	ShowPattern bool
	// Keep, when set, selects the entries written.
	Keep func(*TraceEntry) bool

	head string
	rows [][]string // the block's lines, by column
	err  error
}

// NewTraceWriter returns a writer of text, or of JSON lines when asJSON.
func NewTraceWriter(w io.Writer, asJSON bool) *TraceWriter {
	return &TraceWriter{w: w, json: asJSON}
}

// Err is the first write error.
func (t *TraceWriter) Err() error { return t.err }

// Trace writes one entry (a Tracer).
func (t *TraceWriter) Trace(e *TraceEntry) {
	if t.Keep != nil && !t.Keep(e) {
		return
	}
	if t.json {
		b, err := json.Marshal(e)
		if err == nil {
			b = append(b, '\n')
			_, err = t.w.Write(b)
		}
		t.setErr(err)
		return
	}
	switch e.Kind {
	case TraceEvent, TraceHeld, TraceLate, TraceTime:
		t.Flush()
		t.head = t.header(e)
		if e.Kind == TraceHeld || e.Kind == TraceLate {
			t.Flush() // a line of its own
		}
		return
	}
	if t.head == "" {
		// an entry without its event (filtered out, or a restored state)
		t.head = fmt.Sprintf("%skey %s", t.patternPrefix(e), e.Key)
	}
	t.rows = append(t.rows, t.row(e))
}

func (t *TraceWriter) setErr(err error) {
	if err != nil && t.err == nil {
		t.err = err
	}
}

func (t *TraceWriter) patternPrefix(e *TraceEntry) string {
	if t.ShowPattern {
		return e.Pattern + ": "
	}
	return ""
}

// header is a block's first line.
func (t *TraceWriter) header(e *TraceEntry) string {
	var b strings.Builder
	b.WriteString(t.patternPrefix(e))
	switch e.Kind {
	case TraceEvent:
		fmt.Fprintf(&b, "event %s  t=%s  wm=%s", e.Key, timeText(e.Time), timeText(e.Watermark))
	case TraceHeld:
		fmt.Fprintf(&b, "held  %s  t=%s  wm=%s  waits for the watermark", e.Key, timeText(e.Time), timeText(e.Watermark))
	case TraceLate:
		fmt.Fprintf(&b, "late  %s  t=%s  wm=%s  refused: at or below the watermark", e.Key, timeText(e.Time), timeText(e.Watermark))
	case TraceTime:
		fmt.Fprintf(&b, "time  %s  t=%s  wm=%s", e.Key, timeText(e.Time), timeText(e.Watermark))
	}
	if e.Pos != 0 {
		fmt.Fprintf(&b, "  line %d", e.Pos)
	}
	if len(e.Event) > 0 {
		b.WriteString("  ")
		b.Write(e.Event)
	}
	return b.String()
}

// row is an entry's columns: partial match, what, state, the rest.
func (t *TraceWriter) row(e *TraceEntry) []string {
	pm := e.PM
	if pm == "" {
		pm = "-"
	}
	switch e.Kind {
	case TraceCheck:
		v := "false"
		if e.Value != nil && *e.Value {
			v = "true"
		}
		return []string{pm, e.State, e.Action, "-> " + e.Target, v, e.Cond}
	case TraceStart:
		return []string{pm, "started", "", "-> " + e.State, "", ""}
	case TraceExtend, TraceMove:
		what := "took it"
		if e.Kind == TraceMove {
			what = "moved"
		}
		rest := ""
		if e.From != "" {
			rest = "branch of " + e.From
		}
		return []string{pm, what, "", "-> " + e.State, "", rest}
	case TraceComplete:
		rest := ""
		if e.Record != nil {
			b, err := e.Record.AppendJSON(nil)
			if err == nil {
				rest = string(b)
			}
		}
		return []string{pm, "matched", "", "", "", rest}
	case TraceDrop:
		at := ""
		if e.State != "" {
			at = "in " + e.State
		}
		if len(e.Waiting) > 0 {
			at += ", waiting for " + strings.Join(e.Waiting, " or ")
		}
		return []string{pm, "dropped", "", at, "", dropText(e)}
	}
	return []string{pm, string(e.Kind), "", "", "", ""}
}

// dropText says why a partial match ended.
func dropText(e *TraceEntry) string {
	switch e.Reason {
	case DropWithin:
		return "within ran out at " + timeText(e.Deadline)
	case DropWindow:
		return "the stage's window ran out at " + timeText(e.Deadline)
	case DropImpossible:
		return "impossible: no edge holds for this event"
	case DropStop:
		return "a not stage's condition held"
	case DropSkip:
		return "pruned by the skip strategy after " + e.From + "'s match"
	case DropBound:
		return "over the key's bound on partial matches"
	case DropSteps:
		return "the event's step reached its bound"
	}
	return e.Reason
}

func timeText(t int64) string {
	switch t {
	case watermark.MinTime:
		return "-inf"
	case watermark.MaxTime:
		return "+inf"
	}
	return strconv.FormatInt(t, 10)
}

// Flush writes the block buffered.
func (t *TraceWriter) Flush() {
	if t.json || (t.head == "" && len(t.rows) == 0) {
		return
	}
	var b strings.Builder
	b.WriteString(t.head)
	b.WriteByte('\n')
	var width [5]int
	for _, r := range t.rows {
		for i := range width {
			width[i] = max(width[i], len(r[i]))
		}
	}
	for _, r := range t.rows {
		b.WriteString("  ")
		for i, c := range r {
			if i < len(width) && width[i] == 0 {
				continue // a column no line of the block uses
			}
			b.WriteString(c)
			if i < len(width) && anyAfter(r[i+1:]) {
				b.WriteString(strings.Repeat(" ", width[i]-len(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(t.w, b.String())
	t.setErr(err)
	t.head, t.rows = "", t.rows[:0]
}

func anyAfter(cols []string) bool {
	for _, c := range cols {
		if c != "" {
			return true
		}
	}
	return false
}
