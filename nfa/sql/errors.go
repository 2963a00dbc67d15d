package sql

import (
	"fmt"
	"strings"
)

// Error is a syntax or semantic error in a query. Error() is one line:
//
//	line L:C: message
//
// followed, for syntax errors, by near "..." quoting the text at the
// position.
type Error struct {
	Pos  Pos
	Msg  string
	Near string // a short snippet of the query at Pos; "" if none
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "line %d:%d: %s", e.Pos.Line, e.Pos.Col, e.Msg)
	if e.Near != "" {
		fmt.Fprintf(&b, " near %q", e.Near)
	}
	return oneLine.Replace(b.String())
}

// oneLine keeps Error() on one line whatever names or strings a message quotes.
var oneLine = strings.NewReplacer("\r\n", `\n`, "\n", `\n`, "\r", `\r`)

func errorf(p Pos, format string, args ...any) *Error {
	return &Error{Pos: p, Msg: fmt.Sprintf(format, args...)}
}

// nearSnippet returns up to maxNear characters of src's line starting at p,
// or "" at the end of the line.
const maxNear = 24

func nearSnippet(src string, p Pos) string {
	if !p.IsValid() {
		return ""
	}
	lines := strings.SplitN(src, "\n", p.Line+1)
	if p.Line-1 >= len(lines) {
		return ""
	}
	r := []rune(strings.TrimRight(lines[p.Line-1], "\r"))
	if p.Col-1 >= len(r) || p.Col < 1 {
		return ""
	}
	r = r[p.Col-1:]
	if len(r) > maxNear {
		return strings.TrimSpace(string(r[:maxNear])) + "…"
	}
	return strings.TrimSpace(string(r))
}
